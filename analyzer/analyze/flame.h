// SPDX-License-Identifier: MIT
// flame: the model behind `heapprof flame` and `heapprof diff`: every allocation site's stack,
// symbolized with inlined calls expanded, turned into root-first folded lines weighted by one
// metric, identical lines merged and sorted; and its two writers: folded text (out_folded.c,
// the format flamegraph.pl and inferno read) and a self-contained interactive SVG (out_svg.c).
// Frame names are made safe for both formats here, once (see flame_frame_text).
#ifndef HEAPPROF_ANALYZER_FLAME_H
#define HEAPPROF_ANALYZER_FLAME_H

#include "analyze/analyze.h"
#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef enum flame_metric {
    FLAME_BYTES,     // bytes allocated
    FLAME_BLOCKS,    // blocks allocated
    FLAME_PEAK,      // bytes live at the global peak (t-gmax), as `heapprof stats` counts it
    FLAME_LEAKED,    // bytes live at exit (t-end)
    FLAME_TEMPORARY, // bytes of temporary blocks (the report's definition, replay.h)
    FLAME_GROWTH,    // bytes copied by growth (growth.h; needs a->growth)
    FLAME_CPU,       // CPU samples (a->cpu): sample stacks, not sites; never trimmed
} flame_metric_t;

// "bytes", "blocks", ... -> *m. Returns 0, or -1 with err filled for an unknown name.
int flame_metric_parse(const char *name, flame_metric_t *m, errmsg_t *err);
const char *flame_metric_name(flame_metric_t m);
// Whether the metric counts bytes (for display: "1.5 MiB" rather than "1,536").
bool flame_metric_is_bytes(flame_metric_t m);

// Frame kinds for colouring: sites_frame_kind_t's library kind split by language.
typedef enum flame_kind {
    FLAME_KIND_USER = 0,
    FLAME_KIND_RUST_STD,
    FLAME_KIND_CXX_STD,
    FLAME_KIND_LIBC,
    FLAME_KIND_ALLOCATOR,
    FLAME_KIND_UNKNOWN, // "[unknown stack]"
    FLAME_N_KINDS,
} flame_kind_t;

// One merged folded line: frames root first, joined by ';'.
typedef struct flame_line {
    char *stack;
    uint8_t *kinds; // flame_kind_t of each frame, root first
    uint32_t n_frames;
    uint64_t value[2]; // [0] the value; for a diff, [0] before and [1] after
} flame_line_t;

typedef struct flame {
    flame_line_t *lines; // sorted by stack (strcmp), no two equal, no all-zero value
    size_t n;
    uint64_t total[2];
    flame_metric_t metric;
    bool is_diff;
    char *title_program; // "exe arg1 arg2" of the (AFTER) trace, or "" when unknown
} flame_t;

// Value of site i by metric m: its replay figure, or for FLAME_GROWTH the bytes its growth
// chains copied (0 when a->growth is NULL); 0 for FLAME_CPU (samples are not per site).
uint64_t flame_site_value(const analyze_t *a, size_t i, flame_metric_t m);

// Folds the sites of a (opened with mode 0, so peak is stats' peak; with growth for
// FLAME_GROWTH) by metric m. trim: cut each stack below the frame that names its site (drop the
// allocator's and library frames under the user's first frame). Sites whose value is 0 are not
// symbolized. May allocate.
flame_t *flame_new(analyze_t *a, flame_metric_t m, bool trim);
// Two-column flame: lines of both, value[0] from before, value[1] from after. Takes ownership
// of neither.
flame_t *flame_diff(const flame_t *before, const flame_t *after);
void flame_free(flame_t *f);

// Makes a function name safe as a folded frame, into buf (cap >= 2): fmt_safe_text (control
// characters and bytes that are not valid UTF-8 become \xNN), then ';' (the frame separator)
// becomes ',' and an empty name becomes "[unnamed]". Returns buf.
char *flame_frame_text(const char *name, char *buf, size_t cap);

// Kind of a symbolized frame, refining sites_classify.
flame_kind_t flame_classify(const char *function, const char *file, const char *module);

// ---- out_folded.c ----
// `stack value` per line (for a diff: `stack before after`), in f's order. Returns 0 or -1.
int out_folded_write(const flame_t *f, FILE *out, errmsg_t *err);

// ---- out_svg.c ----
typedef struct out_svg_opts {
    unsigned width_px;   // 1200 by default
    double min_width_px; // frames narrower than this are not drawn (and counted in the title)
} out_svg_opts_t;
// The interactive SVG; for a diff, widths are AFTER's values and colours the delta.
// Returns 0 or -1 when out cannot be written.
int out_svg_write(const flame_t *f, const out_svg_opts_t *o, FILE *out, errmsg_t *err);

#endif
