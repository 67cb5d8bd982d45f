// SPDX-License-Identifier: MIT
// replay_par: replay on several threads. Blocks are split by address over 2^k shards, each a
// replay_t of its own on a thread of its own; every batch of events goes to all shards at once
// and each handles the events of its blocks. Totals alone (`stats`): each shard replays its
// events in full and reports every event's change of live bytes, which the caller's thread
// adds up in stream order for the global peak. With per-site figures (REPLAY_SITES, DHAT):
// the shards only look blocks up; a scan thread applies every event in stream order with what
// they found to what needs that order (replay_scan_order), another beside it adds up the live
// totals for the peak (replay_scan_peak), threads by site then apply each site's own figures
// (replay_scan_apply), and all overlap the shards' next round. Either way every
// figure is the one-thread replay's, exactly (docs/design.md#replay-threads). Growth chains
// ride along (replay_par_set_growth), and so does the timeline (replay_par_set_timeline).
// Memory: the live blocks (spread over the shards' tables, + 32 bytes each with growth), one
// set of thread ids per shard, and the rounds in flight: per event 16 bytes a step (totals, one
// round) or, D rounds (replay_par_set_depth), 8 a pointer to the event (it stays in its batch)
// + 32 found + 4 site + 9 the order's and the peak's per-event results (sites; + 33 words and
// growth's decision with growth), + 12 an event of the two rounds the shards may work on at once (each part's
// indexes and event pointers by shard), and the batches of the next round until it starts
// (kept, or copied by replay_par_events).
#ifndef HEAPPROF_ANALYZER_REPLAY_PAR_H
#define HEAPPROF_ANALYZER_REPLAY_PAR_H

#include "model/growth.h"
#include "model/replay.h"
#include "model/timeline.h"
#include "trace/reader.h"

#include <stddef.h>

#define REPLAY_PAR_THREADS_MAX 16u

// Threads for replay: HEAPPROF_REPLAY_THREADS (0-16) if set, else half the online CPUs (the
// reader and its decoders use the rest), at most 4; rounded down to a power of two. 0 or 1:
// replay on the caller's thread alone (replay_events), as on a machine of two CPUs.
unsigned replay_par_threads(void);

typedef struct replay_par replay_par_t;

// Replays into `into` (made by replay_new with mode set to `mode`, no events applied, no
// companion, not fed to timeline_events) on n_threads threads (a power of two >= 2, at most REPLAY_PAR_THREADS_MAX), the caller's
// included. keep as for replay_new; it runs on the caller's thread only. If threads cannot be
// made the caller's thread does their work: slower, the same figures. Allocates (exits on OOM).
replay_par_t *replay_par_new(replay_t *into, unsigned mode, unsigned n_threads,
                             replay_keep_fn keep, void *keep_ctx);

// Rounds of at least min_events events (gathered from smaller batches) and at most max_events
// (>= 1; the defaults are 131072, or HEAPPROF_REPLAY_ROUND, and 2^20). For tests, whose rounds
// must be small enough that blocks and peaks cross from one round to the next. Call before the first event.
void replay_par_set_round(replay_par_t *p, size_t min_events, size_t max_events);

// Rounds in flight with per-site figures (mode with REPLAY_SITES or REPLAY_DHAT; totals run one
// round at a time): the shards may find round k while they finish round k - 1 and the scans of
// rounds k - D + 1 .. k - 2 have not finished. 2 to REPLAY_DEPTH_MAX (clamped); the default is
// 4, or HEAPPROF_REPLAY_DEPTH (bad values: a warning on stderr, the default). Every figure is
// the same at any depth. Call before the first event.
void replay_par_set_depth(replay_par_t *p, unsigned depth);
unsigned replay_par_depth(const replay_par_t *p);

// Growth chains beside the sites (mode with REPLAY_SITES, not REPLAY_DHAT): the shards keep
// growth's words per block and growth applies every event in stream order in two passes
// (growth_scan_links, then growth_scan_chains) on two threads of their own, beside the sites'
// scans. g: made by growth_new, not attached, fed nothing
// else; read it after replay_par_finish. Call before the first event.
void replay_par_set_growth(replay_par_t *p, growth_t *g);

// The heap over time beside the sites (mode with REPLAY_SITES): a scan on a thread of its own
// reads each round's events and the order's ops after replay_scan_order (timeline_scan), so
// the timeline comes out as timeline_events would make it on one thread. tl: made by
// timeline_new, fed nothing else; read it after replay_par_finish. Call before the first event.
void replay_par_set_timeline(replay_par_t *p, timeline_t *tl);

// Applies ev[0..n) in order (as replay_events). ev needs to stay valid only during the call.
void replay_par_events(replay_par_t *p, const reader_event_t *ev, size_t n);

// The same without a copy: the events stay where they are until p is done with them, and then
// (from the caller's thread, in the order given, at the latest in replay_par_finish) p calls
// the function set by replay_par_set_batch_done with `batch`. A reader's kept batches
// (reader_next_batch_keep) go to the shards this way: the caller's thread touches none of
// their events.
void replay_par_events_kept(replay_par_t *p, const reader_event_t *ev, size_t n, void *batch);
typedef void (*replay_batch_done_fn)(void *ctx, void *batch);
void replay_par_set_batch_done(replay_par_t *p, replay_batch_done_fn done, void *ctx);

// Applies what is still held back, stops the threads, writes the totals into `into` and frees
// p. `into`'s totals are complete only after this.
void replay_par_finish(replay_par_t *p);

#endif
