// SPDX-License-Identifier: MIT
// analyze: the pipeline that `heapprof report` and `heapprof dhat` share: one streaming pass of
// the trace through replay with per-site figures, then a symbolizer over the trace's modules and
// the site table on top. Draws a progress line on the FILE it is given, if any, once the work
// has taken more than a second.
#ifndef HEAPPROF_ANALYZER_ANALYZE_H
#define HEAPPROF_ANALYZER_ANALYZE_H

#include "core/errmsg.h"
#include "model/cpu.h"
#include "model/filter.h"
#include "model/growth.h"
#include "model/replay.h"
#include "model/sites.h"
#include "model/timeline.h"
#include "symbols/symbolize.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

typedef struct analyze {
    const char *path;
    reader_t *r;
    replay_t *rp;
    symbolize_t *sym;
    sites_t *sites;
    FILE *progress; // NULL: no progress line
    growth_t *growth; // growth chains and short-lived blocks; NULL unless asked for
    timeline_t *timeline; // live bytes over time (timeline.h); NULL unless asked for
    struct hmap *site_index; // stack id -> site index + 1, built by analyze_site_of
    cpu_t *cpu; // CPU samples by stack (cpu.h); symbolized on first use; NULL with totals_only
    reader_t *defs;   // with from_module: the first pass's reader (definitions only)
    filter_t *filter; // with from_module: which allocations count; NULL: all
} analyze_t;

// Reads the trace at path (replay mode: REPLAY_SITES, plus REPLAY_DHAT for DHAT's counting).
// progress: a terminal to draw on, or NULL. Returns NULL with err filled when the trace cannot
// be opened or read; damage inside it is not an error (reader_damage says what was lost).
analyze_t *analyze_open(const char *path, unsigned mode, FILE *progress, errmsg_t *err);
void analyze_close(analyze_t *a);

// The commands whose figures must be exact (dhat, massif, view, check) refuse a sampled trace
// (docs/sampling.md#what-each-command-does): returns -1 with err filled ("CMD: TRACE is a
// sampled trace ..."), or 0 for a trace that records every allocation.
int analyze_refuse_sampled(const analyze_t *a, const char *cmd, errmsg_t *err);

typedef struct analyze_opts {
    unsigned mode;     // replay mode, as for analyze_open
    bool growth;       // also detect growth chains and short-lived blocks (growth.h)
    uint64_t short_ns; // with growth: the short-lived threshold
    bool timeline;     // also keep the heap over time (timeline.h; slower: no prefetch)
    const char *from_module; // count only allocations made from this module's code (filter.h):
                             // a first pass reads the definitions; NULL: all
    const char *through_function; // count only allocations with this function on the stack
                                  // (filter.h; a first pass too); NULL: all
    bool totals_only;  // replay's totals alone (`stats`): no sites, no symbols, no CPU table
    const char *const *alloc_fns; // the program's own allocator functions (sites_set_alloc_fns)
    size_t n_alloc_fns;
    bool keep_wrappers; // functions that only forward to the allocator name sites (sites.h)
} analyze_opts_t;

// analyze_open with options; with growth, a->growth is finished (growth_finish) on return.
analyze_t *analyze_open_opts(const char *path, const analyze_opts_t *o, FILE *progress,
                             errmsg_t *err);

// ---- following a trace still being written (`live`, `pprof --follow`; docs/design.md#live) ----
// Opens path with its reader in follow mode (reader_follow) and replay ready; reads no event yet.
// Uses o's mode, growth and short_ns (the rest is for one-shot reads). With growth, a->growth
// is never finished: growth_peek gives its figures so far. NULL with err filled when the trace
// is not readable yet (no file, no complete header).
analyze_t *analyze_follow_open(const char *path, const analyze_opts_t *o, errmsg_t *err);

// Reads only what was written since the last step (the reader and replay keep their state) and
// rebuilds a->sites and a->cpu over replay's figures so far: work in proportion to the new
// events and the number of sites, never to the trace read before. writer_gone: the program no
// longer writes (reader_follow_stop): the rest of the file is read to its end, and
// reader_ended(a->r) is then true. Returns 0, or -1 on I/O error (err filled).
int analyze_follow_step(analyze_t *a, bool writer_gone, errmsg_t *err);

// The site index of a stack id (SIZE_MAX if it allocated nothing). Builds an index on first use.
size_t analyze_site_of(analyze_t *a, uint64_t stack);

// Resolves (symbolizes) sites [0, n) in the given order, with progress if the work is long;
// a later sites_get of them costs nothing. order NULL: sites 0..n-1.
void analyze_resolve(analyze_t *a, const size_t *order, size_t n);

#endif
