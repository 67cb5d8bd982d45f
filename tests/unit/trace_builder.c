// SPDX-License-Identifier: MIT
// Synthetic trace writer for tests and benchmarks. Its record encoder mirrors the format
// document on purpose instead of reusing the shim's encoder, so a disagreement between the
// document and hpt_rec_decode shows up as a failing test.
#include "trace_builder.h"

#include "chunk.h"
// hpt_cols_transpose inlined here makes GCC 12 see hpt_rec_t fields read that it cannot prove
// hpt_rec_decode filled (it fills those of the tag it met, and the transpose reads only those):
// a false -Wmaybe-uninitialized in the format headers, silenced for them alone.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#include "format/hpt_codec.h"
#include "format/hpt_columns.h"
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

struct tb {
    uint8_t *file;
    size_t file_len, file_cap;
    size_t flushed; // file bytes already handed to tb_flush (offsets stay absolute)
    uint8_t *raw;
    size_t raw_len, raw_cap;
    hpt_chunk_hdr_t hdr;
    uint64_t prev_t, prev_addr;
    uint64_t seq;
    ZSTD_CCtx *cctx;
    uint8_t *frame;
    size_t frame_cap;
    // the column form (tb_end): off by tb_set_rows; raw_given when tb_payload wrote bytes of
    // its own into the open chunk, which are then stored as they are
    bool rows, raw_given;
    hpt_cols_enc_t *enc; // the transposer's table, kept across chunks as a drainer keeps it
    uint8_t *cols;
    size_t cols_cap;
};

static void *must(void *p) {
    if (!p) {
        fprintf(stderr, "trace_builder: out of memory\n");
        exit(2);
    }
    return p;
}

static void reserve(uint8_t **p, size_t *cap, size_t need) {
    if (need <= *cap)
        return;
    size_t c = *cap ? *cap : 4096;
    while (c < need)
        c *= 2;
    *p = must(realloc(*p, c));
    *cap = c;
}

static void file_put(tb_t *tb, const void *p, size_t n) {
    reserve(&tb->file, &tb->file_cap, tb->file_len + n);
    memcpy(tb->file + tb->file_len, p, n);
    tb->file_len += n;
}

tb_t *tb_new_hdr(const hpt_file_hdr_t *hdr) {
    tb_t *tb = must(calloc(1, sizeof *tb));
    tb->cctx = must(ZSTD_createCCtx());
    file_put(tb, hdr, sizeof *hdr);
    return tb;
}

void tb_default_hdr(hpt_file_hdr_t *h) {
    memset(h, 0, sizeof *h);
    memcpy(h->magic, HPT_MAGIC, 8);
    h->version = HPT_VERSION;
    h->hdr_bytes = sizeof *h;
    h->start_ns = 1000000000ull;
    h->start_unix_ns = 1700000000000000000ull;
    h->pid = 4242;
    h->ppid = 1;
    h->flags = HPT_FILE_HAS_MEMBARRIER;
}

tb_t *tb_new(void) {
    hpt_file_hdr_t h;
    tb_default_hdr(&h);
    return tb_new_hdr(&h);
}

void tb_free(tb_t *tb) {
    if (!tb)
        return;
    ZSTD_freeCCtx(tb->cctx);
    free(tb->enc);
    free(tb->cols);
    free(tb->file);
    free(tb->raw);
    free(tb->frame);
    free(tb);
}

void tb_begin(tb_t *tb, uint16_t type, uint32_t tid, uint64_t base_time_ns, uint64_t base_addr) {
    memset(&tb->hdr, 0, sizeof tb->hdr);
    tb->hdr.type = type;
    tb->hdr.tid = tid;
    tb->hdr.base_time_ns = base_time_ns;
    tb->hdr.base_addr = base_addr;
    tb->raw_len = 0;
    tb->raw_given = false;
    tb->prev_t = base_time_ns;
    tb->prev_addr = base_addr;
}

void tb_set_rows(tb_t *tb, bool rows) { tb->rows = rows; }

// The open EVENTS chunk's records in columns, as the shim's drainers write them
// (preload/pipeline.c write_records): hpt_cols_transpose from a zero delta state (the
// columns hold differences only; the header keeps the chunk's bases), with the encoder
// table kept across chunks. max_bytes is the whole chunk, so the transpose takes every
// record or none. Returns the payload's size, or 0 where the rows are to be written: a
// record the column form does not carry (PROCESS, TRAILER, one that does not decode, a
// value the codes cannot express), like the drainers' fallback.
static size_t to_columns(tb_t *tb) {
    if (!tb->enc)
        tb->enc = must(calloc(1, sizeof *tb->enc));
    reserve(&tb->cols, &tb->cols_cap, hpt_cols_bound(tb->raw_len));
    hpt_cols_info_t ci;
    size_t cn = hpt_cols_transpose(tb->raw, tb->raw_len, tb->raw_len, tb->cols, tb->cols_cap,
                                   tb->enc, &ci);
    if (cn == 0 || ci.row_bytes != tb->raw_len)
        return 0;
    return cn;
}

size_t tb_end(tb_t *tb, bool compress) {
    size_t off = tb->flushed + tb->file_len;
    const uint8_t *payload = tb->raw;
    size_t len = tb->raw_len;
    if (tb->hdr.type == HPT_CHUNK_EVENTS && !tb->rows && !tb->raw_given && tb->raw_len) {
        size_t cn = to_columns(tb);
        if (cn) {
            // n_records stays the builder's count (tb_set_n_records may make it lie on
            // purpose); otherwise it is the transpose's, as the drainers write it
            tb->hdr.flags |= HPT_CHUNK_COLUMNS;
            payload = tb->cols;
            len = cn;
        }
    }
    size_t bound = hp_chunk_bound(len);
    reserve(&tb->frame, &tb->frame_cap, bound);
    tb->hdr.seq = tb->seq++;
    size_t n = hp_chunk_encode(tb->frame, bound, &tb->hdr, payload, len,
                               compress ? tb->cctx : NULL);
    if (n == 0) {
        fprintf(stderr, "trace_builder: hp_chunk_encode failed\n");
        exit(2);
    }
    file_put(tb, tb->frame, n);
    tb->raw_len = 0;
    return off;
}

size_t tb_sync(tb_t *tb, uint64_t w) {
    tb_begin(tb, HPT_CHUNK_SYNC, 0, w, 0);
    return tb_end(tb, false);
}

void tb_set_n_records(tb_t *tb, uint32_t n) { tb->hdr.n_records = n; }

void tb_skip_seq(tb_t *tb, uint64_t n) { tb->seq += n; }

void tb_raw(tb_t *tb, const void *p, size_t n) { file_put(tb, p, n); }

void tb_payload(tb_t *tb, const void *p, size_t n, uint32_t n_records) {
    reserve(&tb->raw, &tb->raw_cap, tb->raw_len + n);
    memcpy(tb->raw + tb->raw_len, p, n);
    tb->raw_len += n;
    tb->hdr.n_records += n_records;
    tb->raw_given = true;
}

// ---- record encoding (docs/trace-format.md#records) ----

static void put_u8(tb_t *tb, uint8_t b) {
    reserve(&tb->raw, &tb->raw_cap, tb->raw_len + 1);
    tb->raw[tb->raw_len++] = b;
}

static void put_var(tb_t *tb, uint64_t v) {
    do {
        put_u8(tb, (uint8_t)((v & 0x7f) | (v >= 0x80 ? 0x80 : 0)));
        v >>= 7;
    } while (v);
}

static void put_dt(tb_t *tb, uint64_t t) {
    if (t < tb->prev_t) {
        fprintf(stderr, "trace_builder: time goes backwards within a chunk\n");
        exit(2);
    }
    put_var(tb, t - tb->prev_t);
    tb->prev_t = t;
}

static void put_addr(tb_t *tb, uint64_t a) {
    int64_t d = (int64_t)(a - tb->prev_addr);
    put_var(tb, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
    tb->prev_addr = a;
}

static void put_bytes(tb_t *tb, const void *p, size_t n) {
    put_var(tb, n);
    reserve(&tb->raw, &tb->raw_cap, tb->raw_len + n);
    if (n)
        memcpy(tb->raw + tb->raw_len, p, n);
    tb->raw_len += n;
}

static void rec_alloc(tb_t *tb, uint8_t tag, uint64_t t, uint64_t stack, uint64_t addr,
                      uint64_t size) {
    put_u8(tb, tag);
    put_dt(tb, t);
    put_var(tb, stack);
    put_addr(tb, addr);
    put_var(tb, size);
    tb->hdr.n_records++;
}

void tb_rec_malloc(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size) {
    rec_alloc(tb, HPT_REC_MALLOC, t, stack, addr, size);
}

void tb_rec_calloc(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size) {
    rec_alloc(tb, HPT_REC_CALLOC, t, stack, addr, size);
}

void tb_rec_aligned(tb_t *tb, uint64_t t, uint64_t stack, uint64_t addr, uint64_t size,
                    uint64_t align) {
    rec_alloc(tb, HPT_REC_ALIGNED, t, stack, addr, size);
    put_var(tb, align);
}

void tb_rec_free(tb_t *tb, uint64_t t, uint64_t addr) {
    tb_rec_free_touch(tb, t, addr, -1, 0, 0);
}

void tb_rec_free_touch(tb_t *tb, uint64_t t, uint64_t addr, int method, uint64_t touched,
                       uint64_t touched_nz) {
    put_u8(tb, HPT_REC_FREE);
    put_dt(tb, t);
    put_addr(tb, addr);
    uint8_t buf[2 * HPT_VARINT_MAX];
    uint8_t *e = hpt_put_touch(buf, method, touched, touched_nz);
    for (uint8_t *q = buf; q < e; q++)
        put_u8(tb, *q);
    tb->hdr.n_records++;
}

void tb_rec_touch_live(tb_t *tb, uint64_t t, uint64_t addr, int method, uint64_t touched,
                       uint64_t touched_nz) {
    put_u8(tb, HPT_REC_TOUCH_LIVE);
    put_dt(tb, t);
    put_var(tb, addr); // absolute: the address state is left alone
    uint8_t buf[2 * HPT_VARINT_MAX];
    uint8_t *e = hpt_put_touch(buf, method, touched, touched_nz);
    for (uint8_t *q = buf; q < e; q++)
        put_u8(tb, *q);
    tb->hdr.n_records++;
}

void tb_rec_realloc(tb_t *tb, uint64_t t, uint64_t t2, uint64_t stack, uint64_t old_addr,
                    uint64_t new_addr, uint64_t size) {
    put_u8(tb, HPT_REC_REALLOC);
    put_dt(tb, t);
    put_dt(tb, t2);
    put_var(tb, stack);
    put_addr(tb, old_addr);
    put_addr(tb, new_addr);
    put_var(tb, size);
    tb->hdr.n_records++;
}

void tb_rec_stack(tb_t *tb, uint64_t id, uint32_t n, const uint64_t *frames) {
    put_u8(tb, HPT_REC_STACK);
    put_var(tb, id);
    put_var(tb, n);
    for (uint32_t i = 0; i < n; i++) {
        if (i == 0) {
            put_var(tb, frames[0]);
        } else {
            int64_t d = (int64_t)(frames[i] - frames[i - 1]);
            put_var(tb, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
        }
    }
    tb->hdr.n_records++;
}

void tb_rec_thread_start(tb_t *tb, uint64_t t, const char *name) {
    put_u8(tb, HPT_REC_THREAD_START);
    put_dt(tb, t);
    put_bytes(tb, name, strlen(name));
    tb->hdr.n_records++;
}

void tb_rec_thread_end(tb_t *tb, uint64_t t) {
    put_u8(tb, HPT_REC_THREAD_END);
    put_dt(tb, t);
    tb->hdr.n_records++;
}

void tb_rec_module_load(tb_t *tb, uint64_t t, uint64_t base, uint64_t size, const char *path,
                        const uint8_t *build_id, uint32_t build_id_len) {
    put_u8(tb, HPT_REC_MODULE_LOAD);
    put_dt(tb, t);
    put_var(tb, base);
    put_var(tb, size);
    put_bytes(tb, path, strlen(path));
    put_bytes(tb, build_id, build_id_len);
    tb->hdr.n_records++;
}

void tb_rec_module_unload(tb_t *tb, uint64_t t, uint64_t base) {
    put_u8(tb, HPT_REC_MODULE_UNLOAD);
    put_dt(tb, t);
    put_var(tb, base);
    tb->hdr.n_records++;
}

void tb_rec_process(tb_t *tb, const char *exe, int argc, const char *const *argv) {
    put_u8(tb, HPT_REC_PROCESS);
    put_bytes(tb, exe, strlen(exe));
    put_var(tb, (uint64_t)argc);
    for (int i = 0; i < argc; i++)
        put_bytes(tb, argv[i], strlen(argv[i]));
    tb->hdr.n_records++;
}

void tb_rec_trailer(tb_t *tb, uint64_t n_events, uint64_t n_lost, uint64_t n_stacks,
                    uint64_t n_overflows) {
    put_u8(tb, HPT_REC_TRAILER);
    put_var(tb, n_events);
    put_var(tb, n_lost);
    put_var(tb, n_stacks);
    put_var(tb, n_overflows);
    put_var(tb, 0); // events placed late (v3)
    put_var(tb, 0); // wait_ns
    put_var(tb, 0); // n_waits
    put_var(tb, 0); // workers_cpu_ns
    put_var(tb, 0); // flusher_cpu_ns
    put_var(tb, 0); // n_workers
    tb->hdr.n_records++;
}

void tb_rec_cpu_sample(tb_t *tb, uint64_t t, uint32_t tid, uint64_t stack) {
    // signed delta: samples of several CPUs interleave (docs/trace-format.md#cpu)
    int64_t d = (int64_t)(t - tb->prev_t);
    put_u8(tb, HPT_REC_CPU_SAMPLE);
    put_var(tb, ((uint64_t)d << 1) ^ (uint64_t)(d >> 63));
    tb->prev_t = t;
    put_var(tb, tid);
    put_var(tb, stack);
    tb->hdr.n_records++;
}

void tb_rec_allocator(tb_t *tb, unsigned status, const char *family, const char *detail) {
    put_u8(tb, HPT_REC_ALLOCATOR);
    put_var(tb, status);
    put_bytes(tb, family, strlen(family));
    put_bytes(tb, detail, strlen(detail));
    tb->hdr.n_records++;
}

void tb_rec_cpu_info(tb_t *tb, unsigned source, uint32_t hz, uint64_t n_samples, uint64_t n_lost,
                     const char *reason) {
    put_u8(tb, HPT_REC_CPU_INFO);
    put_var(tb, source);
    put_var(tb, hz);
    put_var(tb, n_samples);
    put_var(tb, n_lost);
    put_bytes(tb, reason, strlen(reason));
    tb->hdr.n_records++;
}

// ---- output ----

uint8_t *tb_data(tb_t *tb, size_t *n) {
    *n = tb->file_len;
    return tb->file;
}

size_t tb_chunk_bytes(const tb_t *tb) { return tb->raw_len; }

int tb_flush(tb_t *tb, FILE *f) {
    if (tb->file_len && fwrite(tb->file, 1, tb->file_len, f) != tb->file_len)
        return -1;
    tb->flushed += tb->file_len;
    tb->file_len = 0;
    return 0;
}

int tb_write(tb_t *tb, const char *path) {
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    int rc = fwrite(tb->file, 1, tb->file_len, f) == tb->file_len ? 0 : -1;
    if (fclose(f) != 0)
        rc = -1;
    return rc;
}

int tb_write_tmp(tb_t *tb, char *path) {
    strcpy(path, "/tmp/hpt-test-XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0)
        return -1;
    size_t done = 0;
    while (done < tb->file_len) {
        ssize_t w = write(fd, tb->file + done, tb->file_len - done);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        done += (size_t)w;
    }
    return close(fd);
}
