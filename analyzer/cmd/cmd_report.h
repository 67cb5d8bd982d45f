// SPDX-License-Identifier: MIT
// `heapprof report TRACE [--json] [--top N] [--short-ms N]`: where the program allocates, by
// function and source line: totals, then the top sites by bytes, blocks, bytes at the peak,
// bytes leaked at exit, growth hotspots and short-lived (and temporary) blocks. Writes only to the FILE it is given; errors go back to main.c.
#ifndef HEAPPROF_ANALYZER_CMD_REPORT_H
#define HEAPPROF_ANALYZER_CMD_REPORT_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

extern const char cmd_report_usage[];

#define CMD_REPORT_MAX_ALLOC_FNS 64

typedef struct cmd_report_opts {
    const char *trace;
    bool json;
    bool shim_cpu; // keep heapprof's own samples in the CPU rankings
    bool sizes;    // --sizes: the histogram of allocation sizes
    const char *suppress; // --suppress FILE: known leaks (suppress.h); NULL: none
    const char *filter;   // --filter FUNC: only allocations through FUNC (filter.h); NULL: all
    const char *alloc_fns[CMD_REPORT_MAX_ALLOC_FNS]; // --alloc-fn, as given (argv's strings)
    size_t n_alloc_fns;
    bool keep_wrappers; // --keep-wrappers: no detection of functions that only forward to malloc
    size_t top;
    uint64_t short_ns; // --short-ms: blocks freed within this are short-lived
} cmd_report_opts_t;

// argv[0] is "report". Returns 0, or -1 with err filled.
int cmd_report_parse(int argc, char **argv, cmd_report_opts_t *o, errmsg_t *err);

// Reads the trace and writes the report to out. progress: a terminal for the progress line, or
// NULL. Returns 0, or -1 with err filled.
int cmd_report_run(const cmd_report_opts_t *o, FILE *out, FILE *progress, errmsg_t *err);

#endif
