// SPDX-License-Identifier: MIT
// The figures of `heapprof live` (live.h). The trace is followed (analyze_follow_open): each
// refresh replays only the events written since the previous one into the same replay (with
// growth chains), then ranks replay's per-site figures, which are `heapprof report`'s for the
// trace so far; the rates are the difference of each site's allocated bytes from the previous
// refresh, kept by stack id.
#include "analyze/live.h"

#include "analyze/analyze.h"
#include "core/fmt.h"
#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <string.h>

// The file stopped growing for this many refreshes while its writer's pid still answers (a
// trace from another pid namespace, or a writer stuck for good): the trace is read as ended.
#define STALL_REFRESHES 600

struct live {
    const char *path;
    analyze_t *a;        // the followed trace; NULL until it could be opened
    uint64_t last_size;  // the file's size at the previous refresh
    unsigned n_stalled;  // refreshes since it last grew
    hmap_t prev_bytes; // stack id -> bytes allocated at the previous refresh
    uint64_t prev_time_ns, prev_total_bytes;
    bool has_prev;
    uint64_t *history;
    size_t n_history, cap_history;
};

live_t *live_new(const char *path) {
    live_t *l = xcalloc(1, sizeof *l);
    l->path = path;
    hmap_init(&l->prev_bytes, sizeof(uint64_t));
    return l;
}

void live_free(live_t *l) {
    if (!l)
        return;
    hmap_fini(&l->prev_bytes);
    analyze_close(l->a);
    free(l->history);
    free(l);
}

const uint64_t *live_history(const live_t *l, size_t *n) {
    *n = l->n_history;
    return l->history;
}

// "function  file:line" of site i, safe to print.
static void site_name(analyze_t *a, size_t i, char *out, size_t cap) {
    const site_t *s = sites_get(a->sites, i);
    if (!s->n_frames) {
        snprintf(out, cap, "(unknown stack)");
        return;
    }
    char fn[1024], loc[1024], raw[2100];
    const symbolize_frame_t *fr = s->frames[s->name_frame];
    const char *name = sites_frame_function(fr, fn, sizeof fn);
    sites_frame_location(fr, loc, sizeof loc);
    if (strcmp(name, loc) == 0)
        snprintf(raw, sizeof raw, "%s", name);
    else
        snprintf(raw, sizeof raw, "%s  %s", name, loc);
    char safe[4 * sizeof raw];
    snprintf(out, cap, "%s", fmt_safe_text(raw, safe, sizeof safe));
}

typedef struct ranked {
    size_t site;
    double key;
} ranked_t;

static int by_key_desc(const void *x, const void *y) {
    const ranked_t *a = x, *b = y;
    return (a->key < b->key) - (a->key > b->key);
}

typedef struct growth_sum {
    hmap_t by_stack; // stack + 1 -> index into v
    struct gs_ent {
        uint64_t stack, n_steps, bytes_copied;
    } *v;
    size_t n, cap;
} growth_sum_t;

static void growth_add(void *ctx, uint64_t stack, uint64_t n_steps, uint64_t bytes_copied) {
    growth_sum_t *g = ctx;
    bool existed;
    uint64_t *i = hmap_put(&g->by_stack, stack + 1, &existed);
    if (!existed) {
        g->v = xgrow(g->v, &g->cap, g->n + 1, sizeof *g->v);
        g->v[g->n] = (struct gs_ent){.stack = stack};
        *i = g->n++;
    }
    g->v[*i].n_steps += n_steps;
    g->v[*i].bytes_copied += bytes_copied;
}

// growth.c's ranking: bytes copied, then steps, then stack
static int by_copied_desc(const void *x, const void *y) {
    const struct gs_ent *a = x, *b = y;
    if (a->bytes_copied != b->bytes_copied)
        return a->bytes_copied > b->bytes_copied ? -1 : 1;
    if (a->n_steps != b->n_steps)
        return a->n_steps > b->n_steps ? -1 : 1;
    return (a->stack > b->stack) - (a->stack < b->stack);
}

// Reads what was written since the last refresh. Returns the followed trace, or NULL (err
// filled) while it cannot be opened yet.
static analyze_t *follow(live_t *l, errmsg_t *err) {
    if (!l->a) {
        analyze_opts_t ao = {.mode = REPLAY_SITES, .growth = true, .short_ns = 1000000};
        if (!(l->a = analyze_follow_open(l->path, &ao, err)))
            return NULL;
    }
    // the writer is gone: the program exited without a TRAILER (killed), or the file has not
    // grown for a long while
    struct stat st;
    uint64_t size = stat(l->path, &st) == 0 ? (uint64_t)st.st_size : l->last_size;
    l->n_stalled = size == l->last_size ? l->n_stalled + 1 : 0;
    l->last_size = size;
    // the pid alone is not enough: a writer in another pid namespace (a container writing to
    // a shared volume) has a pid that may not exist here, but its file grows
    bool gone = (l->n_stalled > 0 && reader_writer_gone(l->a->r)) ||
                l->n_stalled >= STALL_REFRESHES;
    if (analyze_follow_step(l->a, gone, err) != 0) {
        // an I/O error: start again from the beginning at the next refresh
        analyze_close(l->a);
        l->a = NULL;
        return NULL;
    }
    return l->a;
}

int live_refresh(live_t *l, live_snapshot_t *s, errmsg_t *err) {
    analyze_t *a = follow(l, err);
    if (!a)
        return 0;
    memset(s, 0, sizeof *s);
    const replay_totals_t *t = replay_totals(a->rp);
    const hpt_file_hdr_t *h = reader_header(a->r);
    s->finished = reader_ended(a->r);
    s->attached = h->flags & HPT_FILE_ATTACHED;
    s->forked = h->flags & HPT_FILE_FORKED;
    s->pid = h->pid;
    const char *exe = reader_exe(a->r);
    char safe[4 * LIVE_NAME_BYTES];
    snprintf(s->exe, sizeof s->exe, "%s", exe ? fmt_safe_text(exe, safe, sizeof safe) : "?");
    s->time_ns = t->last_time_ns;
    s->live_bytes = t->live_bytes;
    s->live_blocks = t->live_blocks;
    s->peak_bytes = t->peak_bytes;
    s->n_blocks = t->n_blocks;
    s->n_bytes = t->n_bytes;
    double dt_s = l->has_prev && t->last_time_ns > l->prev_time_ns
                      ? (double)(t->last_time_ns - l->prev_time_ns) / 1e9
                      : 0;
    if (dt_s > 0)
        s->rate_bytes_s = (double)(t->n_bytes - l->prev_total_bytes) / dt_s;

    size_t n = sites_count(a->sites);
    ranked_t *live = xcalloc(n ? n : 1, sizeof *live), *rate = xcalloc(n ? n : 1, sizeof *rate);
    size_t n_rate = 0;
    for (size_t i = 0; i < n; i++) {
        const replay_site_t *f = sites_figures(a->sites, i);
        live[i] = (ranked_t){i, (double)f->end_bytes};
        uint64_t *prev = hmap_get(&l->prev_bytes, f->stack + 1); // + 1: stack 0 is a stack too
        uint64_t before = prev ? *prev : 0;
        if (dt_s > 0 && f->bytes > before)
            rate[n_rate++] = (ranked_t){i, (double)(f->bytes - before) / dt_s};
        uint64_t *slot = hmap_put(&l->prev_bytes, f->stack + 1, NULL);
        *slot = f->bytes;
    }
    sort_items(live, n, sizeof *live, by_key_desc);
    sort_items(rate, n_rate, sizeof *rate, by_key_desc);
    for (size_t i = 0; i < n && s->n_by_live < LIVE_TOP && live[i].key > 0; i++) {
        live_site_t *o = &s->by_live[s->n_by_live++];
        const replay_site_t *f = sites_figures(a->sites, live[i].site);
        site_name(a, live[i].site, o->name, sizeof o->name);
        o->live_bytes = f->end_bytes;
        o->live_blocks = f->end_blocks;
        o->bytes = f->bytes;
    }
    for (size_t i = 0; i < n_rate && s->n_by_rate < LIVE_TOP; i++) {
        live_site_t *o = &s->by_rate[s->n_by_rate++];
        const replay_site_t *f = sites_figures(a->sites, rate[i].site);
        site_name(a, rate[i].site, o->name, sizeof o->name);
        o->live_bytes = f->end_bytes;
        o->live_blocks = f->end_blocks;
        o->bytes = f->bytes;
        o->rate_bytes_s = rate[i].key;
    }
    free(live);
    free(rate);

    // growth so far, without ending the pass (growth_peek)
    growth_sum_t g = {0};
    hmap_init(&g.by_stack, sizeof(uint64_t));
    growth_peek(a->growth, growth_add, &g);
    sort_items(g.v, g.n, sizeof *g.v, by_copied_desc);
    for (size_t i = 0; i < g.n && s->n_growth < LIVE_GROWTH_TOP && g.v[i].bytes_copied > 0; i++) {
        size_t site = analyze_site_of(a, g.v[i].stack);
        if (site == SIZE_MAX)
            continue;
        live_growth_t *o = &s->growth[s->n_growth++];
        site_name(a, site, o->name, sizeof o->name);
        o->bytes_copied = g.v[i].bytes_copied;
        o->n_steps = g.v[i].n_steps;
    }
    hmap_fini(&g.by_stack);
    free(g.v);

    if (l->n_history == l->cap_history) {
        l->cap_history = l->cap_history ? 2 * l->cap_history : 256;
        l->history = xrealloc(l->history, l->cap_history * sizeof *l->history);
    }
    l->history[l->n_history++] = t->live_bytes;
    l->prev_time_ns = t->last_time_ns;
    l->prev_total_bytes = t->n_bytes;
    l->has_prev = true;
    return 1;
}
