// SPDX-License-Identifier: MIT
// growth: growth chains (a block linked to the block that replaced it, by realloc or by
// allocate-copy-free, docs/growth.md), summed per allocation site, with one line of advice in the
// language of the site's frames; and short-lived blocks per site (docs/growth.md#short-lived). Fed
// the same merged events as replay, in one pass; keeps its blocks in replay's live table
// (growth_attach) or, fed directly, in its own; and per thread, the last few allocations. Does
// no I/O and no symbolization itself.
#ifndef HEAPPROF_ANALYZER_GROWTH_H
#define HEAPPROF_ANALYZER_GROWTH_H

#include "model/replay.h"
#include "model/sites.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define GROWTH_DEFAULT_SHORT_NS 1000000ull // 1 ms: heaptrack-like "short-lived"

typedef struct growth growth_t;

// short_ns: a block freed at most this long after its allocation is short-lived. May allocate.
growth_t *growth_new(uint64_t short_ns);
void growth_free(growth_t *g);

// Applies one merged event (any kind; non-heap events are ignored). Hot path; may allocate.
void growth_event(growth_t *g, const reader_event_t *ev);
void growth_events(growth_t *g, const reader_event_t *ev, size_t n);

// Keeps the live blocks in rp's table (replay_set_companion) instead of growth's own, so rp's
// replay_event feeds growth too and growth_event must not be called. The cheaper way when both
// passes run (docs/design.md#analyzer-throughput); a block's size and time are then replay's,
// so rp must not count DHAT's way (REPLAY_DHAT makes a 0-byte block 1 byte). Call before the
// first event.
void growth_attach(growth_t *g, replay_t *rp);

// Growth beside replay on shard threads (replay_par_set_growth): the shards keep each block's
// words (replay_cwords_t, replay.h) with the block, and growth applies every event in stream
// order, in replay_par's ordered scans, from what the shards found, in two passes over each
// round, each may be on a thread of its own: growth_scan_links keeps the per-thread state (the
// rings of recent allocations, the pending realloc) and decides which free is a short-lived
// block and which event links two blocks; growth_scan_chains, once links is done with the
// round (and may run beside links of the next round), keeps the chains, the blocks' origins
// and the short-lived counts by origin. The words growth changes (a block that joined a chain)
// in round k come back from growth_scan_fixes for the shards to apply at the start of round
// k + D (they find rounds k + 1 .. k + D - 1 while these scans run; D = depth, replay_par's
// rounds in flight, 2 to REPLAY_DEPTH_MAX); until then growth reads them from its own lists of
// the last D rounds. Every figure is the one-thread pass's. Call growth_scan_start before the
// first event, instead of growth_attach (rp must not count DHAT's way either); again before
// it to change the depth. round: 1, 2, 3, ... May allocate.
void growth_scan_start(growth_t *g, unsigned depth);
void growth_scan_links(growth_t *g, const reader_event_t *const *ev, size_t n,
                       const replay_found_t *found, const replay_cwords_t *cw, uint64_t round);
void growth_scan_chains(growth_t *g, const reader_event_t *const *ev, size_t n,
                        const replay_found_t *found, const replay_cwords_t *cw, uint64_t round);
// The words changed by the scan (chains) of round - D, for the shards at the start of `round`;
// valid until the scan (chains) of `round`.
const replay_cfix_t *growth_scan_fixes(const growth_t *g, uint64_t round, size_t *n);

// Ends the pass: chains whose last block is still live end, and every chain is summed into its
// site. Call once, after the last event. May allocate.
void growth_finish(growth_t *g);

// Steps and bytes copied so far, per site, without ending the pass (growth_finish does): for a
// reader that follows a trace still being written (`heapprof live`). fn gets each site's chains
// that ended, and each chain still open on its own, so a site may come more than once: sum by
// stack. The sums equal what growth_finish would give now.
typedef void (*growth_peek_fn)(void *ctx, uint64_t stack, uint64_t n_steps, uint64_t bytes_copied);
void growth_peek(const growth_t *g, growth_peek_fn fn, void *ctx);

// The growth figures of one site (the stack id of the chains' first blocks, which is replay's site
// of every block of a realloc chain).
// Growth advice names a capacity that covers this share of a site's chains, not the largest
// (one huge buffer among hundreds of small ones would make it reserve far too much).
#define GROWTH_COVER_PCT 90u

typedef struct growth_site {
    uint64_t stack;
    uint64_t n_chains;        // chains with a realloc growth step or two allocate-copy-free ones
    uint64_t n_steps;         // links to a larger block
    uint64_t n_realloc_steps; // of them by realloc (the rest by allocate-copy-free)
    uint64_t n_moves;         // steps that copied: every allocate-copy-free step, and the
                              // reallocs whose address changed
    uint64_t bytes_copied;    // old size summed over the steps that copied
    uint64_t final_max;       // the chains' last block sizes: the largest
    uint64_t final_median;    // ... and the median (the lower middle one)
    // The size that covers GROWTH_COVER_PCT% of the chains (the smallest final size at least
    // that share of them ended at or below), and what reserving it up front would save: the
    // steps and bytes copied of the chains that end at or below it.
    uint64_t final_cover;
    uint64_t cover_chains, cover_steps, cover_copied;
    uint64_t first_min;       // smallest first block of a chain
    bool doubling;            // every growth step exactly doubled the size
    bool constant_increment;  // every chain of >= 2 steps added one constant, and one chain
                              // had >= 4 steps
    uint64_t increment;       // that constant when all chains share it, else 0
    uint64_t hashbrown_elem;  // element size when every chain fits hashbrown's table layout
                              // (docs/growth.md#advice), else 0
} growth_site_t;

// Sites with chains, by bytes copied (then steps, then stack), valid after growth_finish.
size_t growth_n_sites(const growth_t *g);
const growth_site_t *growth_site(const growth_t *g, size_t i);
// The growth figures of stack, or NULL when it started no chain.
const growth_site_t *growth_site_of(const growth_t *g, uint64_t stack);

typedef struct growth_short {
    uint64_t blocks, bytes; // short-lived blocks (and their bytes) allocated at this site
} growth_short_t;

// Short-lived figures of the site with this stack id (zeros when none). Valid at any time.
growth_short_t growth_short_of(const growth_t *g, uint64_t stack);
uint64_t growth_short_ns(const growth_t *g);

// Threads whose state growth holds: those with an event and no READER_THREAD_END since (the
// state goes with the thread, so that a trace of many short threads is read in memory by the
// threads alive, not by all it ever had).
size_t growth_threads_held(const growth_t *g);

// The block size the advice names: the covering size (final_cover) for a site of 10 or more
// chains whose largest outgrew it, else the largest final size.
uint64_t growth_advised_size(const growth_site_t *gs);

// Advice for site figures gs at the resolved site s ("`Vec::with_capacity(1024)` here would save 16
// reallocations and 1.0 MiB of copying"), in the language the frames between the allocator and the
// naming frame tell (Rust, C++, else C), with what reserving it costs over the site's chains.
// Writes into buf and returns it.
const char *growth_advice(const growth_site_t *gs, const site_t *s, char *buf, size_t cap);

// The API the advice names ("Vec::with_capacity", "std::vector::reserve", ...; "grow
// geometrically" or "allocate up front" for C), for tests and JSON.
const char *growth_api(const growth_site_t *gs, const site_t *s);

#endif
