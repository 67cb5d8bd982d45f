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

// Copies site i's live bytes from replay into the mirror (growing it to replay's site count).
static void mirror(timeline_t *tl, const replay_t *rp, size_t i) {
    size_t n = replay_n_sites(rp);
    if (n > tl->n_sites) {
        tl->site_live = xgrow(tl->site_live, &tl->sites_cap, n, sizeof *tl->site_live);
        memset(tl->site_live + tl->n_sites, 0, (n - tl->n_sites) * sizeof *tl->site_live);
        tl->n_sites = n;
    }
    if (i < n) {
        replay_site_t f;
        replay_site(rp, i, &f);
        tl->site_live[i] = f.end_bytes; // "as of now", replay.h
    }
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

void timeline_events(timeline_t *tl, replay_t *rp, const reader_event_t *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            replay_prefetch(rp, ev[i + PREFETCH_AHEAD].addr);
        uint64_t t = ev[i].time_ns > tl->last_ns ? ev[i].time_ns : tl->last_ns;
        tl->last_ns = t;
        while (t / tl->width_ns >= TIMELINE_BUCKETS)
            coarsen(tl);
        if (t >= tl->next_snap_ns) {
            uint64_t grid = snap_ns(tl);
            snapshot(tl, t / grid * grid);
            tl->next_snap_ns = (t / grid + 1) * grid;
        }
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
        uint64_t live = tot->live_bytes;
        tl->changed |= live != tl->live || ev[i].kind == READER_ALLOC;
        size_t k = (size_t)(t / tl->width_ns);
        if (k >= tl->n_b) {
            for (size_t j = tl->n_b; j < k; j++)
                tl->b[j] = (timeline_point_t){j * tl->width_ns, tl->live, tl->live};
            tl->b[k] =
                (timeline_point_t){k * tl->width_ns, live > tl->live ? live : tl->live, live};
            tl->n_b = k + 1;
        } else {
            if (live > tl->b[k].max_bytes)
                tl->b[k].max_bytes = live;
            tl->b[k].last_bytes = live;
        }
        tl->live = live;
    }
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
