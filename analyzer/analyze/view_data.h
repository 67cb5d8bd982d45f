// SPDX-License-Identifier: MIT
// view_data: the data embedded in the viewer page (`heapprof view`): one JSON object with the
// summary, a string table, frames, the stacks as a prefix tree of frame indices, per-site figure
// columns, the heap over time, growth hotspots and the reserved-but-untouched list. Schema in
// docs/viewer.md#data-model. Every string from the trace is escaped so the JSON can sit inside
// an HTML <script> element as is ('<', '>', '&', U+2028/2029 as \u escapes; invalid UTF-8 as '?').
#ifndef HEAPPROF_ANALYZER_VIEW_DATA_H
#define HEAPPROF_ANALYZER_VIEW_DATA_H

#include "analyze/analyze.h"
#include "core/errmsg.h"

#include <stdint.h>
#include <stdio.h>

// Writes the JSON object for a (opened with mode 0, growth and timeline; see cmd_view.c) to f.
// Symbolizes every site. Returns 0, or -1 with err filled when f cannot be written. May allocate.
int view_data_write(analyze_t *a, FILE *f, errmsg_t *err);

// Writes s as a JSON string literal that is also safe inside an HTML <script> element. NULL
// writes null.
void view_json_str(FILE *f, const char *s);

// The CPU figures the summary shows: samples read and cpu_describe's line about them
// ("1,234 samples at 997 Hz (perf_event cpu-clock), 0 lost", "off: ...", "not recorded ...").
// With view_data.c's cpu_paths, the one place the viewer learns about CPU sampling.
typedef struct view_cpu {
    uint64_t n_samples;
    char source[256];
} view_cpu_t;
void view_cpu_summary(const analyze_t *a, view_cpu_t *out);

#endif
