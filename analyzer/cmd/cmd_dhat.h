// SPDX-License-Identifier: MIT
// `heapprof dhat TRACE [-o FILE]`: writes the trace's allocation sites as DHAT JSON for
// Valgrind's viewer (dh_view.html). Writes only to the FILE it is given or the -o file; errors
// go back to main.c through errmsg_t.
#ifndef HEAPPROF_ANALYZER_CMD_DHAT_H
#define HEAPPROF_ANALYZER_CMD_DHAT_H

#include "core/errmsg.h"

#include <stdio.h>

extern const char cmd_dhat_usage[];

typedef struct cmd_dhat_opts {
    const char *trace;
    const char *out; // -o: NULL or "-" writes to the FILE given to cmd_dhat_run
} cmd_dhat_opts_t;

// argv[0] is "dhat". Returns 0, or -1 with err filled.
int cmd_dhat_parse(int argc, char **argv, cmd_dhat_opts_t *o, errmsg_t *err);

// Reads the trace and writes the JSON to o->out (replaced only once complete) or to out.
// progress: a terminal for the progress line, or NULL. Returns 0, or -1 with err filled.
int cmd_dhat_run(const cmd_dhat_opts_t *o, FILE *out, FILE *progress, errmsg_t *err);

#endif
