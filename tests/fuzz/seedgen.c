// SPDX-License-Identifier: MIT
// hp_fuzz_seedgen: makes fuzz corpus seeds (tests/fuzz/make_corpus.sh runs it). Not a test.
//   synth DIR              synthetic traces using every record type, stored uncompressed so
//                          mutations land in records rather than in zstd frames; EVENTS
//                          chunks in columns as the shim writes them (the builder's default),
//                          and synth-all-records-rows.hpt the same trace as rows
//   plain IN OUT [MAX]     a real trace with every chunk re-stored uncompressed, cut after the
//                          last whole chunk that fits MAX bytes (default 64 KiB); a chunk
//                          too big to fit is cut to its first records (a prefix still decodes)
//   prefix IN OUT [MAX]    the same cut, chunks left as they are (a trace of a killed process)
#include "chunk.h"
#include "format/hpt_codec.h"
#include "format/hpt_columns.h"
#include "trace_builder.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define DEFAULT_MAX (64u << 10)

static uint8_t *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        perror(path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *buf = malloc(len > 0 ? (size_t)len : 1);
    if (!buf || fread(buf, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "%s: cannot read\n", path);
        exit(1);
    }
    fclose(f);
    *n = (size_t)len;
    return buf;
}

static void spit(const char *path, const uint8_t *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
        perror(path);
        exit(1);
    }
}

// Copies whole chunks of in while the output stays within max; plain re-stores them raw.
static void cut(const char *in, const char *out, size_t max, bool plain) {
    size_t n;
    uint8_t *src = slurp(in, &n);
    hpt_file_hdr_t fh;
    if (n < sizeof fh) {
        fprintf(stderr, "%s: not a trace\n", in);
        exit(1);
    }
    memcpy(&fh, src, sizeof fh);
    uint8_t *dst = malloc(max + hp_chunk_bound(HPT_CHUNK_MAX_RAW));
    uint8_t *raw = malloc(HPT_CHUNK_MAX_RAW);
    size_t pos = fh.hdr_bytes, len = fh.hdr_bytes;
    memcpy(dst, src, fh.hdr_bytes);
    while (n - pos >= sizeof(hpt_chunk_hdr_t)) {
        hpt_chunk_hdr_t h;
        memcpy(&h, src + pos, sizeof h);
        const uint8_t *payload = src + pos + sizeof h;
        if (h.magic != HPT_CHUNK_MAGIC || h.stored_bytes > n - pos - sizeof h)
            break;
        size_t add;
        if (plain && (h.flags & HPT_CHUNK_ZSTD)) {
            size_t got = ZSTD_decompress(raw, HPT_CHUNK_MAX_RAW, payload, h.stored_bytes);
            if (ZSTD_isError(got))
                break;
            hpt_chunk_hdr_t o = h;
            add = hp_chunk_encode(dst + len, hp_chunk_bound(got), &o, raw, got, NULL);
            if (len + add > max && max > len + sizeof h + 64) {
                // keep the records that fit: a chunk's prefix decodes from the same bases. A
                // column chunk is cut as rows (its untransposed records), stored without the flag
                hpt_dstate_t st = {.time_ns = h.base_time_ns, .addr = h.base_addr};
                hpt_rec_t rec;
                size_t keep = 0, room = max - len - sizeof h;
                uint32_t nrec = 0;
                uint8_t *rows = raw;
                size_t n_rows = got;
                if (h.flags & HPT_CHUNK_COLUMNS) {
                    hpt_colr_t cols[HPT_COLS];
                    uint64_t row_bytes;
                    if (!hpt_cols_open(raw, got, cols, &row_bytes) || row_bytes > HPT_CHUNK_MAX_RAW)
                        break;
                    size_t n_allocs = (size_t)row_bytes / 5 + 1;
                    hpt_cols_alloc_t *scratch = malloc(n_allocs * sizeof *scratch);
                    rows = malloc((size_t)row_bytes + 1);
                    n_rows = hpt_cols_untranspose(raw, got, rows, (size_t)row_bytes, scratch,
                                                  n_allocs);
                    free(scratch);
                    if (n_rows != row_bytes) {
                        free(rows);
                        break;
                    }
                }
                const uint8_t *p = rows, *q;
                while (nrec < h.n_records && (q = hpt_rec_decode(p, rows + n_rows, &st, &rec)) &&
                       (size_t)(q - rows) <= room) {
                    p = q;
                    nrec++;
                }
                keep = (size_t)(p - rows);
                o = h;
                o.n_records = nrec;
                o.flags &= (uint16_t)~HPT_CHUNK_COLUMNS;
                add = hp_chunk_encode(dst + len, hp_chunk_bound(keep), &o, rows, keep, NULL);
                if (rows != raw)
                    free(rows);
                len += add;
                break;
            }
        } else {
            add = sizeof h + h.stored_bytes;
            memcpy(dst + len, src + pos, add);
        }
        if (len + add > max)
            break;
        len += add;
        pos += sizeof h + h.stored_bytes;
    }
    spit(out, dst, len);
    free(raw);
    free(dst);
    free(src);
}

static void out_path(char *buf, const char *dir, const char *name) {
    snprintf(buf, 4096, "%s/%s", dir, name);
}

// Two threads with a realloc chain, calloc, aligned blocks, a block freed by the other thread,
// a library loaded and unloaded, thread names, SYNC watermarks and a trailer; rows or columns.
static void synth_full(const char *dir, bool rows) {
    tb_t *tb = tb_new();
    tb_set_rows(tb, rows);
    const char *argv[] = {"/usr/bin/app", "--flag", ""};
    static const uint8_t build_id[] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4};
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    tb_rec_process(tb, "/usr/bin/app", 3, argv);
    tb_rec_module_load(tb, 1, 0x400000, 0x10000, "/usr/bin/app", build_id, sizeof build_id);
    tb_rec_module_load(tb, 2, 0x7f0000000000, 0x200000, "/lib/x86_64-linux-gnu/libc.so.6", NULL, 0);
    tb_rec_allocator(tb, HPT_ALLOC_PATCHED, "jemalloc", "mallocx rallocx sdallocx in /usr/bin/app");
    tb_end(tb, false);

    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 10, 0x5000);
    tb_rec_thread_start(tb, 10, "main");
    tb_rec_stack(tb, 1, 3, (const uint64_t[]){0x401000, 0x401234, 0x7f0000001000});
    tb_rec_stack(tb, 2, 1, (const uint64_t[]){0x7f0000002000});
    tb_rec_malloc(tb, 20, 1, 0x5000, 100);
    tb_rec_calloc(tb, 21, 2, 0x5100, 64);
    tb_rec_aligned(tb, 22, 1, 0x6000, 4096, 4096);
    tb_rec_realloc(tb, 30, 31, 1, 0x5000, 0x7000, 400);
    tb_rec_realloc(tb, 32, 33, 2, 0, 0x8000, 16);
    tb_rec_free_touch(tb, 40, 0x5100, HPT_TOUCH_FILL, 64, 12); // calloc block: 12 bytes set
    tb_end(tb, false);

    tb_begin(tb, HPT_CHUNK_EVENTS, 101, 15, 0x9000);
    tb_rec_thread_start(tb, 15, "worker-1");
    tb_rec_module_load(tb, 16, 0x7f1000000000, 0x1000, "/tmp/libplug.so", build_id, 4);
    tb_rec_stack(tb, 3, 2, (const uint64_t[]){0x7f1000000100, 0x401000});
    tb_rec_malloc(tb, 25, 3, 0x9000, 32);
    tb_rec_free_touch(tb, 26, 0x6000, HPT_TOUCH_RESIDENT, 4096, 4096); // made by the other thread
    tb_rec_module_unload(tb, 35, 0x7f1000000000);
    tb_rec_thread_end(tb, 50);
    tb_end(tb, false);
    tb_sync(tb, 45);

    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 60, 0x7000);
    tb_rec_free(tb, 60, 0x7000);
    tb_rec_malloc(tb, 61, 0, 0xa000, 1 << 20); // stack 0: unwinding failed
    tb_rec_thread_end(tb, 70);
    tb_end(tb, false);
    tb_sync(tb, 80);

    // the CPU sampler's stream: samples of two threads, times going back, a new stack
    tb_begin(tb, HPT_CHUNK_EVENTS, 0, 5, 0);
    tb_rec_cpu_info(tb, HPT_CPU_PERF, 997, 0, 0, "");
    tb_rec_stack(tb, 4, 2, (const uint64_t[]){0x401011, 0x401234});
    tb_rec_cpu_sample(tb, 40, 100, 4);
    tb_rec_cpu_sample(tb, 30, 101, 3);
    tb_rec_cpu_sample(tb, 75, 100, 0);
    tb_rec_cpu_info(tb, HPT_CPU_PERF, 997, 3, 1, "");
    tb_rec_touch_live(tb, 90, 0xa000, HPT_TOUCH_PAGES, 8192, 8192); // the leaked 1 MiB block
    tb_end(tb, false);

    tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
    tb_rec_trailer(tb, 11, 0, 3, 0);
    tb_end(tb, false);
    char p[4096];
    out_path(p, dir, rows ? "synth-all-records-rows.hpt" : "synth-all-records.hpt");
    tb_write(tb, p);
    tb_free(tb);
}

// Damage the reader must account for: a seq gap, a chunk whose record count lies, garbage
// between chunks, an event below a released watermark, a partial chunk at the end.
static void synth_damage(const char *dir) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 100, 0x1000);
    tb_rec_stack(tb, 5, 2, (const uint64_t[]){0x1234, 0x1200});
    tb_rec_malloc(tb, 100, 5, 0x1000, 8);
    tb_rec_malloc(tb, 110, 5, 0x1010, 8);
    tb_end(tb, false);
    tb_sync(tb, 200);
    tb_skip_seq(tb, 2);
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 150, 0x1000); // below the watermark: late
    tb_rec_free(tb, 150, 0x1000);
    tb_end(tb, false);
    tb_raw(tb, "garbage between chunks HPCK", 27);
    tb_begin(tb, HPT_CHUNK_EVENTS, 8, 300, 0x2000);
    tb_rec_malloc(tb, 300, 5, 0x2000, 24);
    tb_set_n_records(tb, 5);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 8, 400, 0x2000);
    tb_rec_free(tb, 400, 0x1010);
    tb_rec_malloc(tb, 410, 9, 0x3000, 48); // stack never defined
    tb_end(tb, false);
    size_t cut_at = tb_sync(tb, 500);
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 600, 0x4000);
    for (int i = 0; i < 20; i++)
        tb_rec_malloc(tb, 600 + (uint64_t)i, 5, 0x4000 + 16 * (uint64_t)i, 16);
    tb_end(tb, false);
    size_t n;
    uint8_t *d = tb_data(tb, &n);
    char p[4096];
    out_path(p, dir, "synth-damage.hpt");
    spit(p, d, cut_at + (n - cut_at) / 2 + 30);
    tb_free(tb);
}

// Many threads interleaving across several SYNC rounds, one chunk compressed per round.
static void synth_threads(const char *dir) {
    tb_t *tb = tb_new();
    uint64_t t = 1000;
    for (int round = 0; round < 6; round++) {
        for (uint32_t tid = 1; tid <= 5; tid++) {
            tb_begin(tb, HPT_CHUNK_EVENTS, tid, t, 0x10000 * tid);
            if (round == 0) {
                tb_rec_thread_start(tb, t, "");
                tb_rec_stack(tb, tid, 1, (const uint64_t[]){0x400000 + tid});
            }
            for (int i = 0; i < 12; i++) {
                uint64_t a = 0x10000 * tid + 64 * (uint64_t)(i / 2 % 3);
                if (i % 2 == 0)
                    tb_rec_malloc(tb, t + (uint64_t)i * 3 + tid, tid, a, 48 + tid);
                else
                    tb_rec_free(tb, t + (uint64_t)i * 3 + tid, a);
            }
            if (round == 5)
                tb_rec_thread_end(tb, t + 50);
            tb_end(tb, tid == 3);
        }
        t += 100;
        tb_sync(tb, t);
    }
    char p[4096];
    out_path(p, dir, "synth-threads.hpt");
    tb_write(tb, p);
    tb_free(tb);
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "synth")) {
        synth_full(argv[2], false);
        synth_full(argv[2], true);
        synth_damage(argv[2]);
        synth_threads(argv[2]);
        return 0;
    }
    if (argc >= 4 && (!strcmp(argv[1], "plain") || !strcmp(argv[1], "prefix"))) {
        size_t max = argc > 4 ? strtoul(argv[4], NULL, 0) : DEFAULT_MAX;
        cut(argv[2], argv[3], max, !strcmp(argv[1], "plain"));
        return 0;
    }
    fprintf(stderr, "usage: %s synth DIR | plain IN OUT [MAX] | prefix IN OUT [MAX]\n", argv[0]);
    return 2;
}
