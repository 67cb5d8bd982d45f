// SPDX-License-Identifier: MIT
// `heapprof attach PID [-o TRACE] [--duration S]` and `heapprof detach PID`:
// record a running program's heap for a while without restarting it
// (docs/design.md#attach). attach stays in the foreground until the duration
// ends, Ctrl-C (SIGINT/SIGTERM), `heapprof detach PID` from elsewhere or the
// program's exit, then makes sure the recording ended. Messages go to the FILE
// given (stderr from main.c); errors back through errmsg_t.
#ifndef HEAPPROF_ANALYZER_CMD_ATTACH_H
#define HEAPPROF_ANALYZER_CMD_ATTACH_H

#include "core/errmsg.h"

#include <stdio.h>
#include <sys/types.h>

extern const char cmd_attach_usage[];
extern const char cmd_detach_usage[];

typedef struct cmd_attach_opts {
    pid_t pid;
    char out[4096];    // absolute trace path (default heapprof.PID.hpt in the
                       // current directory)
    double duration_s; // 0: until Ctrl-C, `heapprof detach` or the program's exit
} cmd_attach_opts_t;

// argv[0] is "attach". Returns 0, or -1 with err filled.
int cmd_attach_parse(int argc, char **argv, cmd_attach_opts_t *o, errmsg_t *err);
// Attaches, waits, detaches. Returns 0, or -1 with err filled (the refusals
// included).
int cmd_attach_run(const cmd_attach_opts_t *o, FILE *msg, errmsg_t *err);

// argv[0] is "detach": parses PID and ends the recording there. Returns 0, or
// -1 with err.
int cmd_detach_run(int argc, char **argv, FILE *msg, errmsg_t *err);

#endif
