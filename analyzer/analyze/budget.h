// SPDX-License-Identifier: MIT
// budget: the limits `heapprof check` holds a run to (docs/check.md#figures), parsed from their
// command-line spelling, and their evaluation against a summary (summary.h): whole-process
// limits (--peak SIZE ...), per-function limits (--site 'PATTERN:METRIC<=VALUE') and growth
// over a baseline (--baseline FILE --max-increase P%). Pure: no I/O, never prints.
#ifndef HEAPPROF_ANALYZER_BUDGET_H
#define HEAPPROF_ANALYZER_BUDGET_H

#include "analyze/summary.h"
#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum budget_kind {
    BUDGET_TOTAL,    // a whole-process figure <= limit
    BUDGET_SITE,     // the figure summed over the functions matching pattern <= limit
    BUDGET_BASELINE, // a whole-process figure <= the baseline's plus max_increase percent
} budget_kind_t;

typedef struct budget {
    budget_kind_t kind;
    summary_metric_t metric;
    uint64_t limit;          // TOTAL, SITE
    char pattern[512];       // SITE: fnmatch(3) pattern on the function's name
    double max_increase_pct; // BASELINE
    char name[640];          // how it reads: "peak <= 1048576", "site 'f*':total <= 10 KiB"
} budget_t;

// "1048576", "512K", "1.5MiB", "2 GB", "10KB": bytes into *out. K, M, G, T and KiB, MiB, ... are
// powers of 1024; KB, MB, GB, TB are powers of 1000; B or nothing is bytes. A fraction must
// come out a whole number of bytes. Returns 0, or -1 with err filled ("check: ...").
int budget_parse_size(const char *s, uint64_t *out, errmsg_t *err);
// A count of blocks: digits only (a "k" or "M" suffix scales by 1000), into *out.
int budget_parse_count(const char *s, uint64_t *out, errmsg_t *err);
// "5%", "5", "0.5%": a non-negative percentage.
int budget_parse_percent(const char *s, double *pct, errmsg_t *err);

// A whole-process budget of metric m from its flag's value.
int budget_total(summary_metric_t m, const char *value, budget_t *b, errmsg_t *err);
// 'PATTERN:METRIC<=VALUE' (the last ':' before METRIC splits, so C++ and Rust paths work).
int budget_site(const char *spec, budget_t *b, errmsg_t *err);
// Growth over a baseline of metric m by at most pct percent.
void budget_baseline(summary_metric_t m, double pct, budget_t *b);

#define BUDGET_MAX_CULPRITS 3

typedef struct budget_result {
    bool broken;
    uint64_t figure; // the run's
    uint64_t limit;  // for BASELINE computed from base (rounded down)
    uint64_t base;   // BASELINE: the baseline's figure
    // The functions that account for most of the excess, biggest first (indexes into the
    // current summary's sites) and what each contributes: for TOTAL and SITE its figure, for
    // BASELINE its increase over the baseline's entry of the same name.
    size_t n_culprits;
    size_t culprit[BUDGET_MAX_CULPRITS];
    uint64_t culprit_value[BUDGET_MAX_CULPRITS];
} budget_result_t;

// Evaluates b against the run's summary cur; base is the baseline (needed by BASELINE only).
void budget_eval(const budget_t *b, const summary_t *cur, const summary_t *base,
                 budget_result_t *res);

#endif
