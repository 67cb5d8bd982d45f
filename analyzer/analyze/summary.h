// SPDX-License-Identifier: MIT
// summary: the figures `heapprof check` holds budgets against, for one run: the whole-process
// totals (the very numbers `stats` and `report` print) and the same figures per function (a
// function being the frame that names a site in `report`; its sites summed). Read from an
// analysis, or from the compact JSON that `check --summary-out` writes
// (docs/check.md#summary-json), so a baseline can be a committed file. Pure data apart from the
// JSON I/O.
#ifndef HEAPPROF_ANALYZER_SUMMARY_H
#define HEAPPROF_ANALYZER_SUMMARY_H

#include "analyze/analyze.h"
#include "core/errmsg.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

// The figures; the names are the budget flags' and the summary's keys (docs/check.md#figures).
typedef enum summary_metric {
    SUMMARY_PEAK,      // bytes live at the global peak of live heap bytes (DHAT's t-gmax)
    SUMMARY_TOTAL,     // bytes allocated (a realloc counts its new size)
    SUMMARY_BLOCKS,    // blocks allocated (a realloc counts as one)
    SUMMARY_LEAKED,    // bytes still live at exit (t-end)
    SUMMARY_TEMPORARY, // blocks freed by their thread before it allocated anything else
    SUMMARY_N_METRICS,
} summary_metric_t;

// "peak", "total", ...; summary_metric_parse: 0, or -1 for an unknown name.
const char *summary_metric_name(summary_metric_t m);
int summary_metric_parse(const char *name, summary_metric_t *m);
// What the figure means, in words, for every line that shows it.
const char *summary_metric_meaning(summary_metric_t m);
// Bytes (peak, total, leaked) rather than a count of blocks.
bool summary_metric_is_bytes(summary_metric_t m);

typedef struct summary_site {
    char *function; // as `report` names the site ("[unknown stack]" when unwinding failed)
    char *location; // file:line of its largest site (by bytes allocated); NULL if unknown
    char *advice;   // growth advice of its site that copied most (growth.h); NULL: no growth
    uint64_t v[SUMMARY_N_METRICS];
} summary_site_t;

typedef struct summary {
    char *program; // the executable's file name; NULL if unknown
    uint64_t total[SUMMARY_N_METRICS];
    summary_site_t *sites; // by bytes allocated, then function name
    size_t n_sites;
    size_t n_omitted; // read from JSON: functions the writer left out (see summary_json)
    size_t *by_name;  // site indexes in name order, for summary_find; NULL: none (a scan)
} summary_t;

// The summary of an analysis opened with growth (analyze_opts_t.growth; mode 0, stats'
// counting). Sites whose function matches one of the n_exclude fnmatch patterns are left out,
// and their figures taken off the totals. Symbolizes every site. May allocate.
summary_t *summary_from_analyze(analyze_t *a, const char *const *exclude, size_t n_exclude);

// Combines n >= 1 summaries of repeated runs figure by figure: the minimum, or the median (the
// lower middle one) when median. A function missing from a run counts 0 there. New summary.
summary_t *summary_combine(summary_t *const *runs, size_t n, bool median);

void summary_free(summary_t *s);

// The JSON form (docs/check.md#summary-json): the totals and the functions that rank in the top
// SUMMARY_KEEP by any figure, in a stable order. New reference.
#define SUMMARY_KEEP 50
json_t *summary_json(const summary_t *s, int exit_status /* -1: not run by check */);

// Reads a summary JSON file. Returns NULL with err filled ("check: FILE: ...") when the file
// cannot be read or is not a summary.
summary_t *summary_read(const char *path, errmsg_t *err);

// The function entry of s named function, or NULL. A binary search in the summaries made here;
// a scan in one built by hand (by_name NULL).
const summary_site_t *summary_find(const summary_t *s, const char *function);

#endif
