// SPDX-License-Identifier: MIT
// bench/tools/trace_columns.c: where a trace's bytes go, column by column, and what the
// trace-size choices still open would change (issue 18: v4's per-thread chunks name blocks by
// address and time events in nanoseconds, so a trace is 2-8x heaptrack's; docs/design.md "The
// pipeline", the price).
//
// For every EVENTS chunk stored in columns (docs/trace-format.md#columns) it decompresses the
// payload and sums, per column, the raw bytes and the bytes that column takes compressed alone
// (zstd at the shim's level, one frame per chunk and column: an estimate of each column's share,
// not a split of the real payload, which zstd compresses whole). Then two what-ifs, each on the
// same chunks:
//   - the TIME column with every time floored to a coarser unit (4, 16, 64, 256 ns) before the
//     deltas are taken, compressed alone: what a coarser clock unit would save (the reader
//     would then need a rule for events of two threads at one address and one time);
//   - the whole payload compressed at other zstd levels and with a small hash table, with the
//     time each takes (the minimum of 3 passes, on this machine): the drain's zstd share.
// Rows chunks and other chunk types are counted but not split. The trace is read whole into
// memory; a damaged chunk ends the scan (this is a measuring tool: `heapprof stats` is the
// reader that recovers).
// Usage: trace_columns TRACE.hpt [zstd level (default 1, the shim's)]
// Build: cc -O2 -I. -o trace_columns bench/tools/trace_columns.c -lzstd (from the repository root)
#include "format/hpt_codec.h"
#include "format/hpt_format.h"
#include "trace_file.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#define NCOLS 8
#define NQUANT 4
static const char *const col_name[NCOLS] = {"TAG",  "TIME", "STACK", "ADDR",
                                            "FREE", "SIZE", "TOUCH", "OTHER"};

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef struct chunk {
    const hpt_chunk_hdr_t *hdr;
    uint8_t *raw; // the decompressed payload
    size_t raw_len;
} chunk_t;

static void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) {
        fprintf(stderr, "trace_columns: out of memory\n");
        exit(1);
    }
    return p;
}

int main(int argc, char **argv) {
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: trace_columns TRACE.hpt [zstd level]\n");
        return 2;
    }
    int level = argc > 2 ? atoi(argv[2]) : 1;
    size_t size;
    hpt_file_hdr_t fh;
    uint8_t *file = bench_trace_read("trace_columns", argv[1], &size, &fh);

    size_t cap = 1024, n = 0, off = fh.hdr_bytes;
    chunk_t *ch = xmalloc(cap * sizeof *ch);
    uint64_t n_rec = 0, rows_records = 0, other_bytes = 0, events_bytes = 0;
    while (off + sizeof(hpt_chunk_hdr_t) <= size) {
        const hpt_chunk_hdr_t *h = (const void *)(file + off);
        if (h->magic != HPT_CHUNK_MAGIC || h->stored_bytes > size - off - sizeof *h ||
            h->raw_bytes > HPT_CHUNK_MAX_RAW) {
            fprintf(stderr, "trace_columns: damage at byte %zu: the rest is not counted\n", off);
            break;
        }
        const uint8_t *payload = file + off + sizeof *h;
        off += sizeof *h + h->stored_bytes;
        if (h->type != HPT_CHUNK_EVENTS) {
            other_bytes += sizeof *h + h->stored_bytes;
            continue;
        }
        events_bytes += sizeof *h + h->stored_bytes;
        if (!(h->flags & HPT_CHUNK_COLUMNS)) {
            rows_records += h->n_records;
            continue;
        }
        uint8_t *raw = xmalloc(h->raw_bytes);
        size_t len = h->raw_bytes;
        if (h->flags & HPT_CHUNK_ZSTD) {
            len = ZSTD_decompress(raw, h->raw_bytes, payload, h->stored_bytes);
            if (ZSTD_isError(len)) {
                fprintf(stderr, "trace_columns: a chunk does not decompress: skipped\n");
                free(raw);
                continue;
            }
        } else {
            memcpy(raw, payload, h->stored_bytes < len ? h->stored_bytes : len);
        }
        if (n == cap)
            ch = realloc(ch, (cap *= 2) * sizeof *ch);
        if (!ch)
            return 1;
        ch[n++] = (chunk_t){h, raw, len};
        n_rec += h->n_records;
    }
    if (!n_rec) {
        fprintf(stderr, "trace_columns: %s: no column chunks\n", argv[1]);
        return 1;
    }

    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t out_cap = ZSTD_compressBound(HPT_CHUNK_MAX_RAW);
    uint8_t *out = xmalloc(out_cap), *q_buf[NQUANT];
    for (int q = 0; q < NQUANT; q++)
        q_buf[q] = xmalloc(HPT_CHUNK_MAX_RAW * 2);
    double raw_sum[NCOLS] = {0}, z_sum[NCOLS] = {0}, qz_sum[NQUANT] = {0};
    ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, level);
    for (size_t k = 0; k < n; k++) {
        const uint8_t *p = ch[k].raw, *end = p + ch[k].raw_len;
        uint64_t ncols, row_bytes, len[NCOLS];
        if (!(p = hpt_get_varint(p, end, &ncols)) || ncols != NCOLS ||
            !(p = hpt_get_varint(p, end, &row_bytes)))
            continue;
        bool ok = true;
        for (int i = 0; i < NCOLS && ok; i++)
            ok = (p = hpt_get_varint(p, end, &len[i])) != NULL;
        for (int i = 0; i < NCOLS && ok && len[i] <= (uint64_t)(end - p); i++) {
            raw_sum[i] += (double)len[i];
            if (len[i])
                z_sum[i] += (double)ZSTD_compress2(cctx, out, out_cap, p, len[i]);
            if (i == 1) { // TIME: each dt (REALLOC's second too) re-based to coarser units
                const uint8_t *tp = p, *te = p + len[i];
                uint64_t t = ch[k].hdr->base_time_ns, prev[NQUANT];
                uint8_t *qo[NQUANT];
                for (int q = 0; q < NQUANT; q++) {
                    prev[q] = t >> (2 * q + 2);
                    qo[q] = q_buf[q];
                }
                uint64_t dt;
                while (tp < te && (tp = hpt_get_varint(tp, te, &dt))) {
                    t += dt;
                    for (int q = 0; q < NQUANT; q++) {
                        uint64_t tq = t >> (2 * q + 2);
                        qo[q] = hpt_put_varint(qo[q], tq - prev[q]);
                        prev[q] = tq;
                    }
                }
                for (int q = 0; q < NQUANT; q++)
                    qz_sum[q] += (double)ZSTD_compress2(cctx, out, out_cap, q_buf[q],
                                                        (size_t)(qo[q] - q_buf[q]));
            }
            p += len[i];
        }
    }
    double total_z = 0;
    printf("%s: %zu column chunks, %llu records (%llu more in row chunks); EVENTS chunks %.2f "
           "B/record as stored, other chunks %.2f MB\n",
           argv[1], n, (unsigned long long)n_rec, (unsigned long long)rows_records,
           (double)events_bytes / (double)(n_rec + rows_records), (double)other_bytes / 1e6);
    printf("column   raw B/rec   zstd %d alone B/rec   share\n", level);
    for (int i = 0; i < NCOLS; i++)
        total_z += z_sum[i];
    for (int i = 0; i < NCOLS; i++)
        printf("%-6s   %9.3f   %19.3f   %4.0f%%\n", col_name[i], raw_sum[i] / (double)n_rec,
               z_sum[i] / (double)n_rec, 100.0 * z_sum[i] / total_z);
    printf("TIME in coarser units, zstd %d alone (B/rec):", level);
    for (int q = 0; q < NQUANT; q++)
        printf("  %d ns %.3f", 1 << (2 * q + 2), qz_sum[q] / (double)n_rec);
    printf("\n");

    // the whole payload, as the shim compresses it, at other settings
    struct {
        const char *name;
        int level, hash_log, window_log;
    } v[] = {{"level 3", 3, 0, 0},   {"level 1", 1, 0, 0},
             {"level 1, hashLog 12, windowLog 17", 1, 12, 17},
             {"level -1", -1, 0, 0}, {"level -5", -5, 0, 0}};
    printf("whole payloads         B/rec   ns/rec (min of 3 passes, this machine)\n");
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        ZSTD_CCtx_reset(cctx, ZSTD_reset_session_and_parameters);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, v[i].level);
        if (v[i].hash_log)
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_hashLog, v[i].hash_log);
        if (v[i].window_log)
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_windowLog, v[i].window_log);
        double best = 1e30, bytes = 0;
        for (int pass = 0; pass < 3; pass++) {
            double t0 = now_s();
            bytes = 0;
            for (size_t k = 0; k < n; k++)
                bytes += (double)ZSTD_compress2(cctx, out, out_cap, ch[k].raw, ch[k].raw_len);
            double t = now_s() - t0;
            best = t < best ? t : best;
        }
        printf("  %-34s %6.3f   %6.1f\n", v[i].name, bytes / (double)n_rec,
               best * 1e9 / (double)n_rec);
    }
    return 0;
}
