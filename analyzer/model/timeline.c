// SPDX-License-Identifier: MIT
// The viewer's heap-over-time series. Bounded: TIMELINE_BUCKETS buckets and TIMELINE_SNAPS
// snapshots, whatever the trace's length; a longer run only coarsens the grid. Live bytes per
// site are mirrored in a compact array (8 bytes a site, updated from replay_last_site after each
// event), so a snapshot scans 8 bytes a site instead of replay's whole site records: a run of S
// sites costs about S * TIMELINE_SNAPS / 2 reads per doubling of its duration past the first
// grid (docs/viewer.md#heap-over-time).
#include "model/timeline.h"

#include "core/xalloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#define FIRST_BUCKET_NS 1000ull // 1 µs: a short run keeps full detail
#define BUCKETS_PER_SNAP (TIMELINE_BUCKETS / TIMELINE_SNAPS)
#define PREFETCH_AHEAD 8 // as replay_events

struct timeline {
    timeline_point_t b[TIMELINE_BUCKETS];
    size_t n_b;        // buckets in use; the last one is the current one
    uint64_t width_ns; // of a bucket
    uint64_t last_ns;  // latest event time (events may arrive a little out of order)
    uint64_t live;     // live bytes after the latest event
    timeline_snap_t s[TIMELINE_SNAPS];
    size_t n_s;
    uint64_t next_snap_ns; // the next grid time to snapshot at
    bool changed;          // an event since the last snapshot
    uint64_t *site_live;   // live bytes per replay site index
    size_t n_sites, sites_cap;
    uint64_t n_double_allocs; // replay's count when the mirror was last made whole
};

timeline_t *timeline_new(void) {
    timeline_t *tl = xcalloc(1, sizeof *tl);
    tl->width_ns = FIRST_BUCKET_NS;
    tl->next_snap_ns = FIRST_BUCKET_NS * BUCKETS_PER_SNAP;
    return tl;
}

void timeline_free(timeline_t *tl) {
    if (tl)
        free(tl->site_live);
    free(tl);
}

// Site `site`'s live bytes in the mirror (grown to hold it, new sites at 0).
static inline uint64_t *site_live(timeline_t *tl, uint32_t site) {
    if (__builtin_expect(site >= tl->n_sites, 0)) {
        size_t n = (size_t)site + 1;
        tl->site_live = xgrow(tl->site_live, &tl->sites_cap, n, sizeof *tl->site_live);
        memset(tl->site_live + tl->n_sites, 0, (n - tl->n_sites) * sizeof *tl->site_live);
        tl->n_sites = n;
    }
    return &tl->site_live[site];
}

// Copies site i's live bytes from replay into the mirror (growing it to replay's site count).
static void mirror(timeline_t *tl, const replay_t *rp, size_t i) {
    size_t n = replay_n_sites(rp);
    if (n > tl->n_sites)
        (void)site_live(tl, (uint32_t)(n - 1));
    if (i < n)
        tl->site_live[i] = replay_site_end_bytes(rp, i); // "as of now", replay.h
}

static uint64_t snap_ns(const timeline_t *tl) { return tl->width_ns * BUCKETS_PER_SNAP; }

// Doubles the bucket width: neighbours merge (max of maxima, the later one's last value), and
// only the snapshots on the coarser grid stay, so both stay within bounds.
static void coarsen(timeline_t *tl) {
    size_t o = 0;
    for (size_t i = 0; i < tl->n_b; i += 2, o++) {
        timeline_point_t p = tl->b[i];
        if (i + 1 < tl->n_b) {
            if (tl->b[i + 1].max_bytes > p.max_bytes)
                p.max_bytes = tl->b[i + 1].max_bytes;
            p.last_bytes = tl->b[i + 1].last_bytes;
        }
        tl->b[o] = p;
    }
    tl->n_b = o;
    tl->width_ns *= 2;
    uint64_t grid = snap_ns(tl);
    o = 0;
    for (size_t i = 0; i < tl->n_s; i++)
        if (tl->s[i].time_ns % grid == 0)
            tl->s[o++] = tl->s[i];
    tl->n_s = o;
    tl->next_snap_ns = (tl->next_snap_ns + grid - 1) / grid * grid;
}

// The top sites by live bytes now, as the state at time t (every earlier event applied).
static void snapshot(timeline_t *tl, uint64_t t) {
    timeline_snap_t *s = &tl->s[tl->n_s];
    if (!tl->changed && tl->n_s > 0) {
        *s = tl->s[tl->n_s - 1]; // nothing happened since: the same picture
    } else {
        memset(s, 0, sizeof *s);
        for (size_t i = 0; i < tl->n_sites; i++) {
            uint64_t v = tl->site_live[i];
            if (v == 0 || (s->n_top == TIMELINE_TOP && v <= s->bytes[TIMELINE_TOP - 1]))
                continue;
            uint32_t k = s->n_top < TIMELINE_TOP ? s->n_top++ : TIMELINE_TOP - 1;
            for (; k > 0 && s->bytes[k - 1] < v; k--) {
                s->bytes[k] = s->bytes[k - 1];
                s->site[k] = s->site[k - 1];
            }
            s->bytes[k] = v;
            s->site[k] = (uint32_t)i;
        }
    }
    s->time_ns = t;
    s->live_bytes = tl->live;
    tl->n_s++;
    tl->changed = false;
}

// Before an event at time_ns: the run's time so far (events may arrive a little out of order),
// the grid coarsened to hold it, and the snapshot it may be due (the state before the event).
static inline uint64_t step_before(timeline_t *tl, uint64_t time_ns) {
    uint64_t t = time_ns > tl->last_ns ? time_ns : tl->last_ns;
    tl->last_ns = t;
    while (t >= TIMELINE_BUCKETS * tl->width_ns) // t / width >= TIMELINE_BUCKETS, no division
        coarsen(tl);
    if (t >= tl->next_snap_ns) {
        uint64_t grid = snap_ns(tl);
        snapshot(tl, t / grid * grid);
        tl->next_snap_ns = (t / grid + 1) * grid;
    }
    return t;
}

// After it: the live bytes it left (live) in the curve. t never decreases (step_before), so an
// event falls in the last bucket or after it: only a new bucket costs a division.
static inline void step_after(timeline_t *tl, uint64_t t, uint64_t live, bool alloc) {
    tl->changed |= live != tl->live || alloc;
    size_t k = tl->n_b && t < tl->n_b * tl->width_ns ? tl->n_b - 1 : (size_t)(t / tl->width_ns);
    if (k >= tl->n_b) {
        for (size_t j = tl->n_b; j < k; j++)
            tl->b[j] = (timeline_point_t){j * tl->width_ns, tl->live, tl->live};
        tl->b[k] = (timeline_point_t){k * tl->width_ns, live > tl->live ? live : tl->live, live};
        tl->n_b = k + 1;
    } else {
        if (live > tl->b[k].max_bytes)
            tl->b[k].max_bytes = live;
        tl->b[k].last_bytes = live;
    }
    tl->live = live;
}

void timeline_events(timeline_t *tl, replay_t *rp, const reader_event_t *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            replay_prefetch(rp, ev[i + PREFETCH_AHEAD].addr);
        uint64_t t = step_before(tl, ev[i].time_ns);
        replay_event(rp, &ev[i]);
        const replay_totals_t *tot = replay_totals(rp);
        if (ev[i].kind == READER_ALLOC || ev[i].kind == READER_FREE) {
            // an event changes at most one site, except an allocation at a live address
            // (a damaged or forked trace), which also releases the old block's site
            if (tot->n_double_allocs != tl->n_double_allocs) {
                tl->n_double_allocs = tot->n_double_allocs;
                for (size_t j = 0; j < replay_n_sites(rp); j++)
                    mirror(tl, rp, j);
            }
            mirror(tl, rp, replay_last_site(rp));
        }
        step_after(tl, t, tot->live_bytes, ev[i].kind == READER_ALLOC);
    }
}

// Below this time an event changes nothing but its last bucket (no coarsening, no snapshot,
// no new bucket); 0 before the first bucket.
static inline uint64_t quiet_until(const timeline_t *tl) {
    if (!tl->n_b)
        return 0;
    uint64_t end = tl->n_b * tl->width_ns; // <= TIMELINE_BUCKETS * width
    return end < tl->next_snap_ns ? end : tl->next_snap_ns;
}

// timeline_scan's walk through the round's ops (replay_scan_order's, in event order) and its
// view of the sites' mirror. Passed by value to the rare path, so that the loop keeps it in
// registers.
typedef struct op_walk {
    const replay_scan_op_t *op, *end;
    uint32_t next; // the event index of *op; UINT32_MAX past the last
    uint64_t *sites;
    size_t n_sites;
} op_walk_t;

// Event i's ops applied to the mirror and to live (returned), in the order the one-thread
// replay applies them (a release before the allocation that replaced the block).
static inline __attribute__((always_inline)) uint64_t
event_ops(timeline_t *tl, op_walk_t *w, const replay_scan_round_t *r, size_t i, bool dhat,
          uint64_t live) {
    const uint32_t index_mask = (1u << REPLAY_OP_SHIFT) - 1;
    for (; w->next == i;
         w->op++, w->next = w->op < w->end ? w->op->ev_op & index_mask : UINT32_MAX) {
        unsigned o = w->op->ev_op >> REPLAY_OP_SHIFT;
        uint32_t site = w->op->site;
        if (__builtin_expect(site >= w->n_sites, 0)) {
            w->sites = site_live(tl, site) - site;
            w->n_sites = tl->n_sites;
        }
        if (o & REPLAY_OP_ALLOC) {
            uint64_t size = r->ev[i]->size;
            size += dhat && size == 0;
            w->sites[site] += size;
            live += size;
        } else if (o & (REPLAY_OP_RELEASE | REPLAY_OP_FREE)) {
            w->sites[site] -= r->found[i].size;
            live -= r->found[i].size;
        } // REPLAY_OP_TOUCH_LIVE: a measure, no change of the live bytes
    }
    return live;
}

// An event that may open a bucket, take a snapshot or coarsen the grid, with tl's fields
// current: the one-thread steps around its ops.
static __attribute__((noinline)) op_walk_t rare_event(timeline_t *tl, op_walk_t w,
                                                      const replay_scan_round_t *r, size_t i,
                                                      bool dhat) {
    const reader_event_t *e = r->ev[i];
    uint64_t t = step_before(tl, e->time_ns);
    uint64_t live = event_ops(tl, &w, r, i, dhat, tl->live);
    step_after(tl, t, live, e->kind == READER_ALLOC);
    return w;
}

void timeline_scan(timeline_t *tl, const replay_scan_round_t *r, bool dhat) {
    op_walk_t w = {r->ops, r->ops + r->n_ops, UINT32_MAX, tl->site_live, tl->n_sites};
    if (w.op < w.end)
        w.next = w.op->ev_op & ((1u << REPLAY_OP_SHIFT) - 1);
    // What an event changes, in locals (with tl's fields in memory, every write to the mirror
    // made the compiler load them all again); back in tl around the rare events and at the end.
    uint64_t last = tl->last_ns, live = tl->live, quiet = quiet_until(tl);
    bool changed = tl->changed;
    timeline_point_t cur = tl->n_b ? tl->b[tl->n_b - 1] : (timeline_point_t){0, 0, 0};
    for (size_t i = 0; i < r->n; i++) {
        const reader_event_t *e = r->ev[i];
        uint64_t t = e->time_ns > last ? e->time_ns : last;
        if (__builtin_expect(t >= quiet, 0)) {
            tl->last_ns = last;
            tl->live = live;
            tl->changed = changed;
            if (tl->n_b)
                tl->b[tl->n_b - 1] = cur;
            w = rare_event(tl, w, r, i, dhat);
            last = tl->last_ns;
            live = tl->live;
            changed = tl->changed;
            cur = tl->b[tl->n_b - 1];
            quiet = quiet_until(tl);
            continue;
        }
        last = t;
        uint64_t before = live;
        live = event_ops(tl, &w, r, i, dhat, live);
        changed |= (live != before) | (e->kind == READER_ALLOC);
        cur.max_bytes = live > cur.max_bytes ? live : cur.max_bytes;
        cur.last_bytes = live;
    }
    tl->last_ns = last;
    tl->live = live;
    tl->changed = changed;
    if (tl->n_b)
        tl->b[tl->n_b - 1] = cur;
}

const timeline_point_t *timeline_points(const timeline_t *tl, size_t *n) {
    *n = tl->n_b;
    return tl->b;
}

uint64_t timeline_bucket_ns(const timeline_t *tl) { return tl->width_ns; }

const timeline_snap_t *timeline_snaps(const timeline_t *tl, size_t *n) {
    *n = tl->n_s;
    return tl->s;
}
