// SPDX-License-Identifier: MIT
// `heapprof stats TRACE [--json] [--from-module NAME]`: totals of a trace (blocks, bytes, peak,
// at end, threads, stacks, duration) and what was lost, as text or one JSON object.
// Writes only to the FILE it is given; errors go back to main.c through errmsg_t.
#ifndef HEAPPROF_ANALYZER_CMD_STATS_H
#define HEAPPROF_ANALYZER_CMD_STATS_H

#include "core/errmsg.h"
#include "model/filter.h"
#include "model/replay.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stdio.h>

extern const char cmd_stats_usage[];

typedef struct cmd_stats_opts {
    const char *trace;
    const char *from_module; // NULL: count every allocation
    bool json;
} cmd_stats_opts_t;

// argv[0] is "stats". Returns 0, or -1 with err filled (unknown option, missing TRACE).
int cmd_stats_parse(int argc, char **argv, cmd_stats_opts_t *o, errmsg_t *err);

// Reads the trace (twice with --from-module) and writes the summary to out. Returns 0, or -1
// with err filled when the trace cannot be opened or read (damage inside it is reported, not
// an error).
int cmd_stats_run(const cmd_stats_opts_t *o, FILE *out, errmsg_t *err);

#endif
