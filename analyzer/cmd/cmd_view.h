// SPDX-License-Identifier: MIT
// `heapprof view TRACE [-o FILE]`: the self-contained HTML viewer (summary, flamegraph, heap
// over time, sites, growth hotspots; docs/viewer.md). Writes only to the -o file (default: the
// trace's name with .html for .hpt) or, for "-o -", to the FILE it is given; errors go back to
// main.c through errmsg_t.
#ifndef HEAPPROF_ANALYZER_CMD_VIEW_H
#define HEAPPROF_ANALYZER_CMD_VIEW_H

#include "core/errmsg.h"

#include <stdint.h>
#include <stdio.h>

extern const char cmd_view_usage[];

typedef struct cmd_view_opts {
    const char *trace;
    const char *out;   // -o as given, or NULL
    char path[4096];   // the file written ("-" for standard output), set by cmd_view_parse
    uint64_t short_ns; // growth's short-lived threshold
} cmd_view_opts_t;

// argv[0] is "view". Returns 0, or -1 with err filled.
int cmd_view_parse(int argc, char **argv, cmd_view_opts_t *o, errmsg_t *err);

// Reads the trace and writes the page to o->path (replaced only once complete; "-": to out).
// progress: a terminal for the progress line, or NULL. Returns 0, or -1 with err filled.
int cmd_view_run(const cmd_view_opts_t *o, FILE *out, FILE *progress, errmsg_t *err);

#endif
