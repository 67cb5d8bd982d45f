// SPDX-License-Identifier: MIT
// out: the output writers, one file each (out_dhat.c, out_report.c, ...), on top of the
// formatting they share (fmt.h). A writer reads an analyze_t and writes to the FILE it is given; it returns 0,
// or -1 with err filled when the output cannot be written.
#ifndef HEAPPROF_ANALYZER_OUT_H
#define HEAPPROF_ANALYZER_OUT_H

#include "analyze.h"
#include "errmsg.h"
#include "fmt.h"

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

// ---- out_dhat.c: DHAT's JSON (docs/dhat-format.md). Needs a replay run with REPLAY_DHAT. ----
int out_dhat_write(analyze_t *a, FILE *f, errmsg_t *err);

// ---- out_report.c: the text report and its JSON form (docs/report-json.md) ----
typedef struct out_report_opts {
    size_t top;     // entries per ranking
    bool json;
} out_report_opts_t;
int out_report_write(analyze_t *a, const out_report_opts_t *o, FILE *f, errmsg_t *err);
// out_report_cpu.c: the report's CPU section (source, top functions, allocator CPU share), as
// text at the end of the report and as its JSON "cpu" object (new reference).
void out_report_cpu_text(analyze_t *a, size_t top, FILE *f);
json_t *out_report_cpu_json(analyze_t *a, size_t top);

// ---- out_html.c: the self-contained viewer page (viewer/ with view_data.h's JSON inside) ----
// Needs a opened with growth and timeline (cmd_view.c). Symbolizes every site.
int out_html_write(analyze_t *a, FILE *f, errmsg_t *err);

#endif
