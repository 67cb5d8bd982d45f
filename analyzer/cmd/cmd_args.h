// SPDX-License-Identifier: MIT
// cmd_args: the command-line conventions every `heapprof CMD TRACE [options]` shares, in one
// place with their error messages: `--` ends options, an unknown option and a second TRACE are
// errors, the TRACE is required.
#ifndef HEAPPROF_ANALYZER_CMD_ARGS_H
#define HEAPPROF_ANALYZER_CMD_ARGS_H

#include "core/errmsg.h"

#include <stdbool.h>

// The end of a command's option loop, for an argument a that none of its own options took:
// `--` (sets *only_args), an unknown option (unless *only_args), the TRACE, or an argument too
// many. Returns 0, or -1 with err filled ("CMD: ..., see heapprof CMD --help").
int cmd_args_other(const char *cmd, const char *a, bool *only_args, const char **trace,
                   errmsg_t *err);

// After the loop: 0 if trace was given, else -1 with err filled.
int cmd_args_need_trace(const char *cmd, const char *trace, errmsg_t *err);

// The whole command line of `heapprof dhat` and `heapprof view`: `CMD TRACE [-o|--output FILE]`
// into *trace and *out (NULL when not given).
int cmd_args_trace_out(const char *cmd, int argc, char **argv, const char **trace,
                       const char **out, errmsg_t *err);

#endif
