// SPDX-License-Identifier: MIT
// out: the output writers, one file each (out_dhat.c, out_report.c, ...), on top of the
// formatting they share (fmt.h). A writer reads an analyze_t and writes to the FILE it is given; it returns 0,
// or -1 with err filled when the output cannot be written.
#ifndef HEAPPROF_ANALYZER_OUT_H
#define HEAPPROF_ANALYZER_OUT_H

#include "analyze/analyze.h"
#include "core/errmsg.h"
#include "core/fmt.h"
#include "core/hmap.h"
#include "model/filter.h"

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
    bool sizes;     // also the histogram of allocation sizes (text section, JSON "sizes")
    // Known leaks (--suppress): per site index, true when a rule matched; such sites are left
    // out of the leak ranking and counted apart. NULL: none.
    const bool *suppressed;
    size_t n_rules;
    const char *suppress_path;
    const char *filter_function; // --filter: the figures count only allocations through it
} out_report_opts_t;
int out_report_write(analyze_t *a, const out_report_opts_t *o, FILE *f, errmsg_t *err);
// out_report_cpu.c: the report's CPU section (source, top functions, allocator CPU share), as
// text at the end of the report and as its JSON "cpu" object (new reference).
void out_report_cpu_text(analyze_t *a, size_t top, FILE *f);
json_t *out_report_cpu_json(analyze_t *a, size_t top);

// ---- out_stats.c: the totals `heapprof stats` prints (the "totals" of `report --json`) ----
// r: a trace read to its end; t: its replay's totals; from_module and f NULL without a filter.
// One "allocator" line per allocator the shim found beside libc's (reader_allocators): hooked,
// or not, and then that its blocks are missing. Nothing for an ordinary program.
void out_allocators_text(FILE *out, const reader_t *r);
// The end of the "touched" line where some freed blocks were not measured: the shim fills only
// the blocks of the malloc it is preloaded over, not those of an allocator it hooks (jemalloc
// linked into rustc: every block). Nothing where every freed block was measured.
void out_touch_unmeasured(FILE *out, uint64_t frees, uint64_t measured);
// The frees of blocks the trace never saw allocated: expected in a trace that began mid-run
// (heapprof attach: "attached", at_end names the figures taken at the detach) or in a fork
// child (the parent's blocks: "forked"), where they are counted apart; anything else is an
// "anomalies" line, with the allocations at live addresses. Nothing when there are none.
void out_stats_unknown_frees(FILE *out, const reader_t *r, const replay_totals_t *t,
                             const char *at_end);
// A sampled trace's warning line ("sampled    ESTIMATES: ..."); nothing for a full trace.
void out_stats_sampled_line(FILE *out, const reader_t *r);
void out_stats_text(FILE *out, const char *trace, const reader_t *r, const replay_totals_t *t,
                    const char *from_module, const filter_t *f);
json_t *out_stats_json(const reader_t *r, const replay_totals_t *t, const char *from_module,
                       const filter_t *f); // new reference
int out_stats_json_write(FILE *out, const reader_t *r, const replay_totals_t *t,
                         const char *from_module, const filter_t *f, errmsg_t *err);

// ---- out_massif.c: Valgrind Massif's format, for ms_print and massif-visualizer. Needs a
// opened with a timeline (for the curve); the peak's snapshot is exact (t-gmax). ----
int out_massif_write(analyze_t *a, FILE *f, errmsg_t *err);

// ---- out_html.c: the self-contained viewer page (viewer/ with view_data.h's JSON inside) ----
// Needs a opened with growth and timeline (cmd_view.c). Symbolizes every site.
int out_html_write(analyze_t *a, FILE *f, errmsg_t *err);

// ---- out_pprof.c: a gzipped pprof profile.proto (docs/pprof.md) ----
typedef struct out_pprof_alloc {
    uint64_t blocks, bytes;
} out_pprof_alloc_t;
typedef struct out_pprof_opts {
    bool at_peak;     // inuse_* live at the global peak (report's peak_*), not at exit
    bool full_stacks; // keep the frames below each site's naming frame (allocator, libraries)
    // Follow mode: stack id -> out_pprof_alloc_t, what earlier profiles counted. alloc_* are then
    // the site's figures minus those (and the map is updated to the new figures), sites with
    // nothing to show are left out, and duration_nanos is the time since since_ns. NULL: whole run.
    hmap_t *since;
    uint64_t since_ns;
} out_pprof_opts_t;
// Needs a replay run with REPLAY_SITES; symbolizes every site. Writes the gzip stream to f.
int out_pprof_write(analyze_t *a, const out_pprof_opts_t *o, FILE *f, errmsg_t *err);
// The report's damage line for a, in buf, or NULL when the trace read whole.
const char *out_pprof_damage(const analyze_t *a, char *buf, size_t cap);
// Why "at exit" is only the last event (the trace has no trailer), or NULL.
const char *out_pprof_unfinished(const analyze_t *a);

#endif
