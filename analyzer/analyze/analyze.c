// SPDX-License-Identifier: MIT
// The shared read -> replay -> symbolize pipeline and its progress line. The line is redrawn at
// most 4 times a second with a carriage return and erased at the end, so it never mixes with
// the report when stdout and stderr are the same terminal.
#include "analyze/analyze.h"

#include "core/fmt.h"
#include "core/hmap.h"
#include "core/stage_times.h"
#include "core/xalloc.h"
#include "model/replay_par.h"
#include "trace/readahead.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

typedef struct progress {
    FILE *f;
    uint64_t start_ns, last_ns;
    bool shown;
} progress_t;

static uint64_t now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void progress_init(progress_t *p, FILE *f) {
    p->f = f;
    p->start_ns = p->last_ns = now_ns();
    p->shown = false;
}

// Draws "heapprof: WHAT PCT% of TOTAL (SECONDS)" once the run is past a second, at most 4
// times a second.
static void progress_tick(progress_t *p, const char *what, uint64_t done, uint64_t total,
                          const char *total_text) {
    if (!p->f)
        return;
    uint64_t t = now_ns();
    if (t - p->start_ns < 1000000000ull || t - p->last_ns < 250000000ull)
        return;
    p->last_ns = t;
    p->shown = true;
    double pct = total ? 100.0 * (double)done / (double)total : 0;
    if (pct > 100)
        pct = 100;
    fprintf(p->f, "\rheapprof: %s %5.1f%% of %s (%.1f s)\033[K", what, pct, total_text,
            (double)(t - p->start_ns) / 1e9);
    fflush(p->f);
}

static void progress_done(progress_t *p) {
    if (p->f && p->shown) {
        fputs("\r\033[K", p->f);
        fflush(p->f);
    }
    p->shown = false;
}

// Symbolization ahead of time, on the reading thread while replay is behind: the frames of
// every stack defined so far go through symbolize_warm, so the report after the last event
// finds them looked up (docs/design.md#analyzer-throughput). Stack ids are dense from 1 in
// definition order; a module loaded later makes the symbolizer outdated, and it starts over.
typedef struct warm {
    symbolize_t *sym;
    uint64_t next_id; // the next stack to look up
} warm_t;

#define WARM_STACKS 8 // per idle call: short, so a slot that frees up is filled soon

// Drops the symbolizer if a module was added since it was made.
static void warm_drop_outdated(warm_t *w, const reader_t *r) {
    if (w->sym && !symbolize_current(w->sym, r)) {
        symbolize_free(w->sym);
        w->sym = NULL;
    }
}

// replay_par gives a kept reader batch back (replay_par_set_batch_done).
static void batch_done(void *ctx, void *batch) { reader_batch_done(ctx, batch); }

static bool warm_idle(void *ctx, reader_t *r) {
    warm_t *w = ctx;
    warm_drop_outdated(w, r);
    if (!w->sym) {
        size_t n_mods = 0;
        reader_modules(r, &n_mods);
        if (n_mods == 0 || !reader_stack(r, 1, &(uint32_t){0}))
            return false; // nothing to look up in yet
        w->sym = symbolize_new(r);
        w->next_id = 1;
    }
    for (int k = 0; k < WARM_STACKS; k++) {
        uint32_t n;
        const uint64_t *frames = reader_stack(r, w->next_id, &n);
        if (!frames)
            return false; // up to date
        for (uint32_t i = 0; i < n; i++)
            symbolize_warm(w->sym, frames[i]);
        w->next_id++;
    }
    return true;
}

analyze_t *analyze_open(const char *path, unsigned mode, FILE *progress, errmsg_t *err) {
    analyze_opts_t o = {.mode = mode};
    return analyze_open_opts(path, &o, progress, err);
}

size_t analyze_site_of(analyze_t *a, uint64_t stack) {
    if (!a->site_index) {
        a->site_index = xmalloc(sizeof *a->site_index);
        hmap_init(a->site_index, sizeof(uint64_t));
        for (size_t i = 0; i < sites_count(a->sites); i++)
            *(uint64_t *)hmap_put(a->site_index, sites_figures(a->sites, i)->stack, NULL) = i + 1;
    }
    const uint64_t *i = hmap_get(a->site_index, stack);
    return i ? (size_t)(*i - 1) : SIZE_MAX;
}

analyze_t *analyze_open_opts(const char *path, const analyze_opts_t *o, FILE *progress,
                             errmsg_t *err) {
    unsigned mode = o->mode;
    reader_t *defs = NULL;
    if (o->from_module || o->through_function) {
        // stacks and modules may be defined after their first use: a pass for them first
        if (!(defs = reader_open(path, err)) || reader_load_defs(defs, err) != 0) {
            reader_close(defs);
            return NULL;
        }
    }
    reader_t *r = reader_open(path, err);
    if (!r) {
        reader_close(defs);
        return NULL;
    }
    analyze_t *a = xcalloc(1, sizeof *a);
    a->path = path;
    a->r = r;
    a->progress = progress;
    a->defs = defs;
    if (defs)
        a->filter = filter_new(defs, o->from_module, o->through_function);
    a->rp = a->filter ? replay_new(filter_keep, a->filter) : replay_new(NULL, NULL);
    unsigned rp_mode = o->totals_only ? mode : mode | REPLAY_SITES;
    replay_set_mode(a->rp, rp_mode);
    const hpt_file_hdr_t *h = reader_header(r);
    if (h->flags & HPT_FILE_SAMPLED)
        replay_set_sampled(a->rp, h->sample_bytes);
    if (o->growth)
        a->growth = growth_new(o->short_ns); // attached to replay or to its shards below
    if (o->timeline)
        a->timeline = timeline_new();

    struct stat st;
    uint64_t size = stat(path, &st) == 0 ? (uint64_t)st.st_size : 0;
    char size_text[32];
    fmt_bytes(size, size_text);
    progress_t p;
    progress_init(&p, progress);
    const reader_event_t *batch;
    size_t n;
    int got;
    uint64_t n_batches = 0, offset = 0;
    warm_t warm = {0};
    // the live table split over threads (replay_par.h), growth chains and the timeline in its
    // ordered scans. A sampled trace's peak is the estimated heap's (replay_set_sampled), which
    // the shards' exact steps do not give, and its few events need no threads: one thread.
    unsigned par_threads = replay_par_threads();
    replay_par_t *par = NULL;
    if (!(h->flags & HPT_FILE_SAMPLED) && par_threads >= 2 &&
        (!a->growth || !o->totals_only) && (!a->timeline || !o->totals_only)) {
        par = replay_par_new(a->rp, rp_mode, par_threads, a->filter ? filter_keep : NULL,
                             a->filter);
        if (a->growth)
            replay_par_set_growth(par, a->growth);
        if (a->timeline)
            replay_par_set_timeline(par, a->timeline);
    }
    if (a->growth && !par)
        growth_attach(a->growth, a->rp); // replay's events now feed growth too
    readahead_t *ra = readahead_new(r, o->totals_only ? NULL : warm_idle, &warm);
    if (par) // the shards take the reader's batches as they are; replay_par gives them back
        replay_par_set_batch_done(par, batch_done, r);
    reader_batch_t *keep = NULL;
    while ((got = par ? readahead_next_keep(ra, &batch, &n, &offset, &keep, err)
                      : readahead_next(ra, &batch, &n, &offset, err)) == 1) {
        if (par)
            replay_par_events_kept(par, batch, n, keep);
        else if (a->timeline)
            timeline_events(a->timeline, a->rp, batch, n);
        else
            replay_events(a->rp, batch, n);
        if ((++n_batches & 63) == 0)
            progress_tick(&p, "reading", offset, size, size_text);
    }
    stage_threads("read+replay"); // before the threads are joined
    uint64_t caller_waited_ns = readahead_waited_ns(ra);
    readahead_free(ra); // the reading thread is done with the reader
    if (stage_times_level() >= 2)
        fprintf(stderr,
                "reader waits: the caller waited %.3f s for the reading thread's batches, the "
                "reading thread %.3f s for its decode workers (at most %zu chunks in flight)\n",
                caller_waited_ns / 1e9, reader_decode_waited_ns(r) / 1e9,
                reader_decode_most_in_flight(r));
    stage_mark("read+replay");
    if (par)
        replay_par_finish(par); // after an error too: it joins the threads
    stage_mark("replay finish");
    progress_done(&p);
    warm_drop_outdated(&warm, r);
    if (got < 0) {
        symbolize_free(warm.sym);
        analyze_close(a);
        return NULL;
    }
    if (o->totals_only)
        return a;
    a->sym = warm.sym ? warm.sym : symbolize_new(r);
    a->cpu = cpu_new(r, a->sym);
    stage_mark("symbolizer");
    a->sites = sites_new(r, a->rp, a->sym);
    sites_set_alloc_fns(a->sites, o->alloc_fns, o->n_alloc_fns);
    sites_keep_wrappers(a->sites, o->keep_wrappers);
    if (a->growth)
        growth_finish(a->growth);
    stage_mark("sites");
    return a;
}

analyze_t *analyze_follow_open(const char *path, const analyze_opts_t *o, errmsg_t *err) {
    reader_t *r = reader_open(path, err);
    if (!r)
        return NULL;
    reader_follow(r);
    analyze_t *a = xcalloc(1, sizeof *a);
    a->path = path;
    a->r = r;
    a->rp = replay_new(NULL, NULL);
    replay_set_mode(a->rp, o->mode | REPLAY_SITES);
    const hpt_file_hdr_t *h = reader_header(r);
    if (h->flags & HPT_FILE_SAMPLED)
        replay_set_sampled(a->rp, h->sample_bytes);
    if (o->growth) {
        a->growth = growth_new(o->short_ns);
        growth_attach(a->growth, a->rp);
    }
    return a;
}

int analyze_follow_step(analyze_t *a, bool writer_gone, errmsg_t *err) {
    if (writer_gone)
        reader_follow_stop(a->r);
    // On this thread, without readahead or replay shards: a step's new events are few, and
    // replay must keep its one live table from step to step.
    const reader_event_t *batch;
    size_t n;
    int got;
    while ((got = reader_next_batch(a->r, &batch, &n, err)) == 1)
        replay_events(a->rp, batch, n);
    if (got < 0)
        return -1;
    // the per-site view is rebuilt over replay's figures; the symbolizer (and what it looked
    // up) is kept unless a module was loaded since
    if (a->site_index) {
        hmap_fini(a->site_index);
        free(a->site_index);
        a->site_index = NULL;
    }
    sites_free(a->sites);
    cpu_free(a->cpu);
    if (a->sym && !symbolize_current(a->sym, a->r)) {
        symbolize_free(a->sym);
        a->sym = NULL;
    }
    if (!a->sym)
        a->sym = symbolize_new(a->r);
    a->cpu = cpu_new(a->r, a->sym);
    a->sites = sites_new(a->r, a->rp, a->sym);
    return 0;
}

void analyze_resolve(analyze_t *a, const size_t *order, size_t n) {
    progress_t p;
    progress_init(&p, a->progress);
    char total[48], num[32];
    snprintf(total, sizeof total, "%s sites", fmt_grouped(n, num));
    for (size_t i = 0; i < n; i++) {
        sites_get(a->sites, order ? order[i] : i);
        if ((i & 63) == 0)
            progress_tick(&p, "symbolizing", i, n, total);
    }
    progress_done(&p);
}

int analyze_refuse_sampled(const analyze_t *a, const char *cmd, errmsg_t *err) {
    const hpt_file_hdr_t *h = reader_header(a->r);
    if (!(h->flags & HPT_FILE_SAMPLED))
        return 0;
    errmsg_set(err,
               "%s: %s is a sampled trace (HEAPPROF_SAMPLE_BYTES=%u): its figures would be "
               "estimates; record without sampling, or use pprof, report or stats",
               cmd, a->path, h->sample_bytes);
    return -1;
}

void analyze_close(analyze_t *a) {
    if (!a)
        return;
    growth_free(a->growth);
    timeline_free(a->timeline);
    if (a->site_index) {
        hmap_fini(a->site_index);
        free(a->site_index);
    }
    sites_free(a->sites);
    cpu_free(a->cpu);
    symbolize_free(a->sym);
    replay_free(a->rp);
    filter_free(a->filter);
    reader_close(a->defs);
    reader_close(a->r);
    free(a);
}
