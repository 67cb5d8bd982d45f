// SPDX-License-Identifier: MIT
// bench/tools/drain_bench.c: the drain's work on one thread's real events, timed alone (issue 18,
// item 4: on a machine with few cores the drain's CPU is taken from the program; its time per
// event as a column beside the program is inside the noise of a shared VM, alone it is not).
//
// Reads a trace, takes the heap events of its busiest thread, writes them into a ring image as
// the shim's recorders would (preload/ringent.h's writers: the same entry kinds, THI entries
// where the high bits of the times change), then runs the shim's own column writer
// (preload/ringcols.c) and zstd at the shim's settings (preload/zstd_ctx.c) over the image in
// drains of --drain bytes (1 MiB: half of the largest ring), as a worker would. Prints ns an
// event for the columns and for zstd (the minimum over passes, this machine), instructions need
// callgrind (`valgrind --tool=callgrind --toggle-collect=hp_rc_columns ...`), and the trace
// bytes an event both give, so that a change to the drain is measured by what it costs alone.
// Checks each chunk against hpt_cols_untranspose: the rows must be the rows the trace holds.
// Usage: drain_bench TRACE.hpt [passes (default 9)]
// Built by bench/drain_bench.sh (with the shim's ringcols.c and zstd_ctx.c).
#include "format/hpt_codec.h"
#include "format/hpt_columns.h"
#include "format/hpt_format.h"
#include "trace_file.h"
#include "preload/mem.h"
#include "preload/ringcols.h"
#include "preload/ringent.h"
#include "preload/zstd_ctx.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define DRAIN_BYTES (1u << 20) // half the largest ring: what a worker takes at a nudge
#define CHUNK_MAX (1u << 20)   // HEAPPROF_CHUNK_KB's default

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "drain_bench: out of memory\n");
        exit(1);
    }
    return p;
}

// The shim's memory functions, which zstd_ctx.c calls: plain malloc here (a bench tool).
void *hp_mem_map(size_t n) {
    return malloc(n);
}
void hp_mem_unmap(void *p, size_t n) {
    (void)n;
    free(p);
}

typedef struct image {
    uint8_t *p;
    size_t n, cap;
    uint64_t events, t_hi;
    bool have_hi;
} image_t;

static uint8_t *image_room(image_t *im, size_t k) {
    if (im->n + k > im->cap) {
        im->cap = (im->n + k) * 2;
        im->p = realloc(im->p, im->cap);
        if (!im->p) {
            fprintf(stderr, "drain_bench: out of memory\n");
            exit(1);
        }
    }
    return im->p + im->n;
}

// A THI before an event whose time's high bits differ from the last one's, as tbuf.h does.
static void image_hi(image_t *im, uint64_t t) {
    if (im->have_hi && t >> 32 == im->t_hi)
        return;
    im->n += hp_re_put_thi(image_room(im, HP_RE_THI_BYTES), (uint32_t)(t >> 32));
    im->t_hi = t >> 32;
    im->have_hi = true;
}

static void image_event(image_t *im, const hpt_rec_t *r) {
    switch (r->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED:
        image_hi(im, r->time_ns);
        im->n += hp_re_put_alloc(image_room(im, HP_RE_ALLOC_MAX), r->tag, r->time_ns, r->addr,
                                 (uint32_t)r->stack, r->size, r->align);
        break;
    case HPT_REC_FREE:
        image_hi(im, r->time_ns);
        im->n += hp_re_put_free(image_room(im, HP_RE_FREE_MAX), r->time_ns, r->addr,
                                r->touch ? r->touch - 1 : -1, r->touched, r->touched_nz);
        break;
    case HPT_REC_FREE_SIZED:
        image_hi(im, r->time_ns);
        im->n += hp_re_put_free_sized(image_room(im, HP_RE_FREE_MAX), r->time_ns, r->addr,
                                      r->size, r->align);
        break;
    case HPT_REC_REALLOC:
        im->n += hp_re_put_realloc(image_room(im, HP_RE_REALLOC_BYTES), r->time_ns, r->time2_ns,
                                   (uint32_t)r->stack, r->old_addr, r->addr, r->size);
        break;
    default:
        return; // not a heap event: the drain's other records are rare
    }
    im->events++;
}

// The heap events of the column chunks of thread tid, in file order, into im.
static bool read_thread(const uint8_t *file, size_t size, size_t off, uint32_t tid,
                        image_t *im) {
    uint8_t *raw = xmalloc(HPT_CHUNK_MAX_RAW), *rows = xmalloc(HPT_CHUNK_MAX_RAW + 1);
    size_t n_allocs = HPT_CHUNK_MAX_RAW / 5 + 1;
    hpt_cols_alloc_t *allocs = xmalloc(n_allocs * sizeof *allocs);
    while (off + sizeof(hpt_chunk_hdr_t) <= size) {
        const hpt_chunk_hdr_t *h = (const void *)(file + off);
        if (h->magic != HPT_CHUNK_MAGIC || h->stored_bytes > size - off - sizeof *h ||
            h->raw_bytes > HPT_CHUNK_MAX_RAW)
            break; // damage: the events before it are enough to measure
        const uint8_t *payload = file + off + sizeof *h;
        off += sizeof *h + h->stored_bytes;
        if (h->type != HPT_CHUNK_EVENTS || h->tid != tid)
            continue;
        size_t len = h->raw_bytes;
        const uint8_t *in = payload;
        if (h->flags & HPT_CHUNK_ZSTD) {
            len = ZSTD_decompress(raw, HPT_CHUNK_MAX_RAW, payload, h->stored_bytes);
            if (ZSTD_isError(len))
                continue;
            in = raw;
        }
        const uint8_t *p = in, *end = in + len;
        if (h->flags & HPT_CHUNK_COLUMNS) {
            size_t rb = hpt_cols_untranspose(in, len, rows, HPT_CHUNK_MAX_RAW, allocs, n_allocs);
            if (!rb)
                continue;
            p = rows;
            end = rows + rb;
        }
        hpt_dstate_t st = {h->base_time_ns, h->base_addr};
        hpt_rec_t r;
        while (p < end && (p = hpt_rec_decode(p, end, &st, &r)))
            image_event(im, &r);
    }
    free(raw);
    free(rows);
    free(allocs);
    return im->events > 0;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: drain_bench TRACE.hpt [passes]\n");
        return 2;
    }
    int passes = argc > 2 ? atoi(argv[2]) : 9;
    if (passes < 1)
        passes = 1;
    size_t size;
    hpt_file_hdr_t fh;
    uint8_t *file = bench_trace_read("drain_bench", argv[1], &size, &fh);
    // the busiest thread: the one with most records in EVENTS chunks
    uint32_t tids[4096];
    uint64_t recs[4096];
    size_t n_tids = 0;
    for (size_t off = fh.hdr_bytes; off + sizeof(hpt_chunk_hdr_t) <= size;) {
        const hpt_chunk_hdr_t *h = (const void *)(file + off);
        if (h->magic != HPT_CHUNK_MAGIC || h->stored_bytes > size - off - sizeof *h)
            break;
        off += sizeof *h + h->stored_bytes;
        if (h->type != HPT_CHUNK_EVENTS)
            continue;
        size_t i = 0;
        while (i < n_tids && tids[i] != h->tid)
            i++;
        if (i == n_tids) {
            if (n_tids == 4096)
                continue;
            tids[n_tids] = h->tid;
            recs[n_tids++] = 0;
        }
        recs[i] += h->n_records;
    }
    size_t best = 0;
    for (size_t i = 1; i < n_tids; i++)
        if (recs[i] > recs[best])
            best = i;
    image_t im = {0};
    if (!n_tids || !read_thread(file, size, fh.hdr_bytes, tids[best], &im)) {
        fprintf(stderr, "drain_bench: %s: no heap events in column chunks\n", argv[1]);
        return 2;
    }

    size_t out_cap = hpt_cols_bound(CHUNK_MAX + HPT_COLS_REC_MAX);
    uint8_t *out = xmalloc(out_cap), scratch[HP_RC_SCRATCH];
    size_t z_cap = ZSTD_compressBound(out_cap);
    uint8_t *z = xmalloc(z_cap), *rows = xmalloc(CHUNK_MAX + HPT_COLS_REC_MAX + 1);
    hpt_cols_alloc_t *allocs = xmalloc((CHUNK_MAX / 5 + 1) * sizeof *allocs);
    hpt_cols_enc_t *enc = calloc(1, sizeof *enc);
    ZSTD_CCtx *cctx = hp_zstd_cctx_new(1);
    if (!enc || !cctx)
        return 1;
    double best_cols = 1e30, best_z = 1e30, z_bytes = 0;
    uint64_t events = 0, chunks = 0;
    for (int pass = 0; pass < passes; pass++) {
        double t_cols = 0, t_z = 0;
        hp_rc_pos_t pos = {{0, 0}, 0, 0};
        events = chunks = 0;
        z_bytes = 0;
        for (size_t d = 0; d < im.n;) {
            // a drain: whole entries up to DRAIN_BYTES (the ring's half; the image holds
            // entries only, so each steps by its kind's size)
            const uint8_t *p = im.p + d, *end = p;
            while (end < im.p + im.n && (size_t)(end - p) + hp_re_bytes(*end) <= DRAIN_BYTES)
                end += hp_re_bytes(*end);
            const size_t dn = (size_t)(end - p);
            while (p < end) {
                hp_rc_info_t ci;
                hpt_dstate_t base = pos.w;
                double t0 = now_s();
                size_t cn = hp_rc_columns(p, (size_t)(end - p), CHUNK_MAX, out, out_cap, enc,
                                          scratch, &pos, &ci);
                double t1 = now_s();
                if (!cn) {
                    fprintf(stderr, "drain_bench: the column writer refused a chunk\n");
                    return 1;
                }
                size_t zn = ZSTD_compress2(cctx, z, z_cap, out, cn);
                double t2 = now_s();
                if (ZSTD_isError(zn))
                    return 1;
                t_cols += t1 - t0;
                t_z += t2 - t1;
                z_bytes += (double)(zn + sizeof(hpt_chunk_hdr_t));
                if (pass == 0) { // the rows must decode to the events written
                    size_t rb = hpt_cols_untranspose(out, cn, rows, CHUNK_MAX + HPT_COLS_REC_MAX,
                                                     allocs, CHUNK_MAX / 5 + 1);
                    hpt_dstate_t st = base;
                    hpt_rec_t r;
                    const uint8_t *q = rows, *qe = rows + rb;
                    uint32_t got = 0;
                    while (q < qe && (q = hpt_rec_decode(q, qe, &st, &r)))
                        got++;
                    if (rb != ci.row_bytes || q != qe || got != ci.n_records) {
                        fprintf(stderr, "drain_bench: chunk %llu does not read back\n",
                                (unsigned long long)chunks);
                        return 1;
                    }
                }
                events += ci.n_events;
                chunks++;
                p += ci.in_bytes;
            }
            d += dn;
        }
        best_cols = t_cols < best_cols ? t_cols : best_cols;
        best_z = t_z < best_z ? t_z : best_z;
    }
    printf("%s: thread %u, %llu heap events, %.2f ring bytes an event, %llu chunks\n", argv[1],
           tids[best], (unsigned long long)events, (double)im.n / (double)events,
           (unsigned long long)chunks);
    printf("columns %.1f ns/event, zstd %.1f ns/event, together %.1f (min of %d passes); "
           "%.3f trace bytes/event\n",
           best_cols * 1e9 / (double)events, best_z * 1e9 / (double)events,
           (best_cols + best_z) * 1e9 / (double)events, passes, z_bytes / (double)events);
    return 0;
}
