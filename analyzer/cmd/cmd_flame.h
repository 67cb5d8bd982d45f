// SPDX-License-Identifier: MIT
// `heapprof flame TRACE` and `heapprof diff BEFORE AFTER`: allocation flamegraphs by one metric,
// as folded stacks or an interactive SVG, and the differential form with a table of the sites
// that changed most. Writes only to the FILEs it is given or to -o FILE; errors go to main.c.
#ifndef HEAPPROF_ANALYZER_CMD_FLAME_H
#define HEAPPROF_ANALYZER_CMD_FLAME_H

#include "analyze/flame.h"
#include "core/errmsg.h"

#include <stdbool.h>
#include <stdio.h>

extern const char cmd_flame_usage[];
extern const char cmd_diff_usage[];

typedef struct cmd_flame_opts {
    bool is_diff;          // argv[0] was "diff"
    const char *trace[2];  // flame: [0]; diff: before, after
    flame_metric_t metric; // default bytes
    bool folded, trim;
    const char *out; // -o FILE; NULL: standard output (diff: no SVG)
} cmd_flame_opts_t;

// argv[0] is "flame" or "diff". Returns 0, or -1 with err filled.
int cmd_flame_parse(int argc, char **argv, cmd_flame_opts_t *o, errmsg_t *err);

// Reads the trace(s) and writes the output; out is standard output. progress: a terminal for
// the progress line, or NULL. Returns 0, or -1 with err filled (a file given with -o is then
// left as it was).
int cmd_flame_run(const cmd_flame_opts_t *o, FILE *out, FILE *progress, errmsg_t *err);

#endif
