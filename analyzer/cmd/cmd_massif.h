// SPDX-License-Identifier: MIT
// `heapprof massif TRACE [-o FILE]`: the heap over time and the peak's call tree in Valgrind
// Massif's format, for ms_print and massif-visualizer. Writes only to the FILE it is given or
// the -o file; errors go back to main.c through errmsg_t.
#ifndef HEAPPROF_ANALYZER_CMD_MASSIF_H
#define HEAPPROF_ANALYZER_CMD_MASSIF_H

#include "core/errmsg.h"

#include <stdio.h>

extern const char cmd_massif_usage[];

typedef struct cmd_massif_opts {
    const char *trace;
    const char *out; // -o: NULL or "-" writes to the FILE given to cmd_massif_run
} cmd_massif_opts_t;

// argv[0] is "massif". Returns 0, or -1 with err filled.
int cmd_massif_parse(int argc, char **argv, cmd_massif_opts_t *o, errmsg_t *err);

// Reads the trace and writes the Massif file to o->out (replaced only once complete) or to out.
// progress: a terminal for the progress line, or NULL. Returns 0, or -1 with err filled.
int cmd_massif_run(const cmd_massif_opts_t *o, FILE *out, FILE *progress, errmsg_t *err);

#endif
