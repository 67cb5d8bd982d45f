// SPDX-License-Identifier: MIT
// bench/tools/trace_file.h: a trace read whole into memory for the bench tools that measure one
// (trace_columns.c, drain_bench.c): these are measuring tools, not readers that recover from
// damage (`heapprof stats` is), so a file that is not a trace ends the tool with a one-line
// error and exit status 2.
#ifndef HEAPPROF_BENCH_TRACE_FILE_H
#define HEAPPROF_BENCH_TRACE_FILE_H

#include "format/hpt_format.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The bytes of the trace at path (*size of them) and its file header; exits on any failure,
// naming the tool.
static inline uint8_t *bench_trace_read(const char *tool, const char *path, size_t *size,
                                        hpt_file_hdr_t *fh) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "%s: %s: cannot open\n", tool, path);
        exit(2);
    }
    long n = -1;
    if (fseek(f, 0, SEEK_END) == 0)
        n = ftell(f);
    if (n < (long)sizeof(hpt_file_hdr_t) || fseek(f, 0, SEEK_SET) != 0) {
        fprintf(stderr, "%s: %s: too short for a trace\n", tool, path);
        exit(2);
    }
    uint8_t *file = malloc((size_t)n);
    if (!file || fread(file, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "%s: %s: read failed\n", tool, path);
        exit(2);
    }
    fclose(f);
    memcpy(fh, file, sizeof *fh);
    if (memcmp(fh->magic, HPT_MAGIC, 8) || fh->hdr_bytes < 48 || fh->hdr_bytes > (uint64_t)n) {
        fprintf(stderr, "%s: %s: not a heapprof trace\n", tool, path);
        exit(2);
    }
    *size = (size_t)n;
    return file;
}

#endif
