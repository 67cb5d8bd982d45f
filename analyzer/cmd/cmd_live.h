// SPDX-License-Identifier: MIT
// `heapprof live TRACE`: watch a trace while the program writes it, refreshed every second;
// a curses screen on a terminal (`q` quits), plain lines otherwise (until the trace is
// complete or SIGINT). Reading never touches the program.
#ifndef HEAPPROF_ANALYZER_CMD_LIVE_H
#define HEAPPROF_ANALYZER_CMD_LIVE_H

#include "core/errmsg.h"

#include <stdio.h>

extern const char cmd_live_usage[];

// argv[0] is "live". Returns 0, or -1 with err filled.
int cmd_live_run(int argc, char **argv, FILE *out, errmsg_t *err);

#endif
