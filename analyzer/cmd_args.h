// SPDX-License-Identifier: MIT
// cmd_args: the command line that `heapprof dhat` and `heapprof view` share:
// `CMD TRACE [-o|--output FILE]`, with `--` ending options. One place for its error messages.
#ifndef HEAPPROF_ANALYZER_CMD_ARGS_H
#define HEAPPROF_ANALYZER_CMD_ARGS_H

#include "errmsg.h"

// Parses argv[1..argc) of command cmd into *trace and *out (NULL when not given). Returns 0,
// or -1 with err filled ("CMD: ..., see heapprof CMD --help").
int cmd_args_trace_out(const char *cmd, int argc, char **argv, const char **trace,
                       const char **out, errmsg_t *err);

#endif
