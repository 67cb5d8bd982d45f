// SPDX-License-Identifier: MIT
// `heapprof check [BUDGETS] -- CMD ARGS...` or `heapprof check [BUDGETS] TRACE`: holds a run's
// heap figures to budgets for CI (docs/check.md): whole-process limits, per-function limits,
// growth over a baseline; one line per budget on the FILE it is given, a summary JSON, JUnit
// XML, and on failure the trace, DHAT JSON and viewer page for a person to look at. Errors go
// back to main.c through errmsg_t; main.c picks the status (0 held, 1 broken, 2 error).
#ifndef HEAPPROF_ANALYZER_CMD_CHECK_H
#define HEAPPROF_ANALYZER_CMD_CHECK_H

#include "analyze/budget.h"
#include "analyze/budget_file.h"
#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

extern const char cmd_check_usage[];

#define CHECK_MAX_BUDGETS 64
#define CHECK_MAX_EXCLUDES 64
#define CHECK_MAX_RUNS 100

typedef struct cmd_check_opts {
    budget_t budgets[CHECK_MAX_BUDGETS]; // the absolute ones, in the order given
    size_t n_budgets;
    const char *baseline;                    // --baseline: a trace or a summary JSON; NULL: none
    double max_increase_pct;                 // --max-increase (0 unless given)
    const char *summary_out;                 // --summary-out FILE
    const char *junit;                       // --junit FILE
    const char *from_module;                 // --from-module NAME: NULL counts every allocation
    const char *exclude[CHECK_MAX_EXCLUDES]; // --exclude FUNC patterns
    size_t n_exclude;
    unsigned runs;      // --runs N (the command only)
    bool median;        // --take median (default) or min
    budget_file_t file; // --budgets FILE, read by cmd_check_parse (its budgets are above)
    const char *trace;  // TRACE, or NULL when cmd is given
    char **cmd;         // NULL-terminated argv after "--", or NULL
} cmd_check_opts_t;

// argv[0] is "check". Returns 0, or -1 with err filled (one line: a bad budget, a missing
// value, nothing to check, a budgets file that cannot be read). Call cmd_check_opts_fini after,
// whatever it returned.
int cmd_check_parse(int argc, char **argv, cmd_check_opts_t *o, errmsg_t *err);
void cmd_check_opts_fini(cmd_check_opts_t *o);

// Runs the command (o->runs times) or reads the trace, evaluates the budgets and writes the
// lines to out and the files asked for. Returns the number of broken budgets, or -1 with err
// filled on an error: the baseline or trace cannot be read, the trace is damaged, an output
// cannot be written, or the command failed (its status is in *cmd_status; the lines and files
// are still written). *cmd_status: the command's exit status (128 + signal), -1 if none ran.
int cmd_check_run(const cmd_check_opts_t *o, FILE *out, FILE *progress, int *cmd_status,
                  errmsg_t *err);

#endif
