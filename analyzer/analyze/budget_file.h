// SPDX-License-Identifier: MIT
// budget_file: `heapprof check --budgets FILE`, budgets a person writes in YAML (parsed by
// libyaml), keyed by the flags' names with values spelled as on the command line
// (docs/check.md#budgets-file). Reads the file once; never prints.
#ifndef HEAPPROF_ANALYZER_BUDGET_FILE_H
#define HEAPPROF_ANALYZER_BUDGET_FILE_H

#include "analyze/budget.h"
#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct budget_file {
    budget_t *budgets; // whole-process and site budgets, in the file's order
    size_t n_budgets;
    char *baseline;    // NULL unless given
    char *from_module; // NULL unless given
    bool has_max_increase;
    double max_increase_pct;
    char **exclude; // patterns
    size_t n_exclude;
} budget_file_t;

// Reads path into f (zeroed first). Returns 0, or -1 with err filled as one line
// ("check: FILE:LINE: ..."), f then holding nothing. Free with budget_file_fini. May allocate.
int budget_file_read(const char *path, budget_file_t *f, errmsg_t *err);
void budget_file_fini(budget_file_t *f);

#endif
