// SPDX-License-Identifier: MIT
// timeline: the heap over time for the viewer, in bounded memory whatever the trace's length:
// live bytes in at most TIMELINE_BUCKETS time buckets (each keeps its maximum and its last
// value; the bucket width doubles, merging neighbours, when the run outlasts them), plus at
// most TIMELINE_SNAPS snapshots of the top TIMELINE_TOP sites by live bytes, taken on a grid of
// times that coarsens with the buckets (docs/viewer.md#heap-over-time). Fed the merged events
// by analyze, after replay has applied each. Does no I/O.
#ifndef HEAPPROF_ANALYZER_TIMELINE_H
#define HEAPPROF_ANALYZER_TIMELINE_H

#include "model/replay.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define TIMELINE_BUCKETS 4096 // points of the live-bytes curve, at most
#define TIMELINE_SNAPS 256    // "top sites live at this moment" snapshots, at most
#define TIMELINE_TOP 12       // sites per snapshot

typedef struct timeline timeline_t;

// May allocate.
timeline_t *timeline_new(void);
void timeline_free(timeline_t *tl);

// Replays ev[0..n) into rp (which must run with REPLAY_SITES) one at a time, noting live bytes
// after each event and taking snapshots of rp's sites as the grid says. Replaces
// replay_events for a pass that wants a timeline. Hot path; allocates 8 bytes per new site.
void timeline_events(timeline_t *tl, replay_t *rp, const reader_event_t *ev, size_t n);

// The same from replay's ordered scan (replay_par.c, on a thread of its own): round r's events
// in stream order, what they do to which site (r's ops, as replay_scan_order listed them) and
// the blocks the shards found; dhat: replay runs with REPLAY_DHAT (malloc(0) is one byte).
// Every point and snapshot is the one timeline_events makes of the same events, round after
// round in order.
void timeline_scan(timeline_t *tl, const replay_scan_round_t *r, bool dhat);

typedef struct timeline_point {
    uint64_t time_ns;    // start of the bucket
    uint64_t max_bytes;  // largest live bytes within the bucket
    uint64_t last_bytes; // live bytes at its end
} timeline_point_t;

// The curve: buckets from the first to the last event, oldest first (empty buckets repeat
// the previous value). Valid until the next timeline_events.
const timeline_point_t *timeline_points(const timeline_t *tl, size_t *n);
uint64_t timeline_bucket_ns(const timeline_t *tl);

typedef struct timeline_snap {
    uint64_t time_ns;    // the moment: everything before it has happened, nothing after
    uint64_t live_bytes; // all sites
    uint32_t n_top;
    uint32_t site[TIMELINE_TOP];  // replay site indices, by live bytes, largest first
    uint64_t bytes[TIMELINE_TOP]; // their live bytes then
} timeline_snap_t;

// Snapshots, oldest first. Valid until the next timeline_events.
const timeline_snap_t *timeline_snaps(const timeline_t *tl, size_t *n);

#endif
