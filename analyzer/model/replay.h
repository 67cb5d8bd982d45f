// SPDX-License-Identifier: MIT
// replay: feeds merged events through a live-block table (address -> size, birth, stack) and
// keeps the heap's totals over time: blocks, bytes, frees, the global peak (t-gmax) and what is
// live at the end (t-end); optionally the same per allocation site (DHAT's per-program-point
// figures, docs/dhat-format.md). Anomalies in the event stream are counted, never fatal.
// Does no I/O. Memory: the live blocks, plus one record per distinct stack and per thread.
#ifndef HEAPPROF_ANALYZER_REPLAY_H
#define HEAPPROF_ANALYZER_REPLAY_H

#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define REPLAY_SIZE_BUCKETS 65

// The bucket of replay_totals_t.size_blocks a size falls in.
static inline unsigned replay_size_bucket(uint64_t size) {
    return size ? 64u - (unsigned)__builtin_clzll(size) : 0u;
}

// The smallest size of bucket k (the bucket holds [min, 2 * min), bucket 0 only size 0).
static inline uint64_t replay_size_bucket_min(unsigned k) {
    return k ? (uint64_t)1 << (k - 1) : 0;
}

typedef struct replay_totals {
    uint64_t n_blocks;   // allocation events counted, including the new half of reallocs
    uint64_t n_bytes;    // bytes of those allocations
    uint64_t n_frees;    // FREE records that released a counted block (not realloc halves)
    uint64_t n_events;   // allocation + free records as recorded (a REALLOC is one)
    uint64_t live_bytes; // now; after the last event: t-end
    uint64_t live_blocks;
    uint64_t peak_bytes; // at the first moment live_bytes reached its maximum
    uint64_t peak_blocks;
    uint64_t peak_time_ns;
    uint64_t n_threads;       // distinct tids with a counted allocation or free of a counted block
    uint64_t last_time_ns;    // time of the latest event seen
    uint64_t n_unknown_frees; // free of an address not live (e.g. inherited across fork)
    uint64_t n_double_allocs; // allocation at a live address (the old block is taken as freed)
    // Frees that named the block's size (Rust's dealloc, sized delete, sdallocx; FREE_SIZED):
    uint64_t n_sized_frees;         // of counted blocks
    uint64_t n_sized_mismatches;    // of them, naming a size other than the block's
    uint64_t mismatch_block_size;   // the first mismatch: the block's size as allocated,
    uint64_t mismatch_freed_size;   //   the size its free named,
    uint64_t mismatch_time_ns;      //   and when
    uint64_t n_sized_unknown_frees; // sized frees of unknown addresses (in n_unknown_frees too)
    // Bytes touched over all counted blocks freed with a measure (docs/trace-format.md#touch):
    uint64_t touch_blocks, touch_bytes, touched_bytes; // blocks, their sizes, bytes touched
    uint64_t touch_resident_blocks, touch_sampled_blocks; // of them, by resident pages / sampled
    uint64_t touch_pages_blocks; // of them, by the pattern on resident pages (issue #23)
    uint64_t touch_live_blocks;  // of them, still live at exit and measured then (issue #23)
    // Counted allocations by requested size (a realloc's new size), in power-of-two buckets:
    // bucket 0 holds size 0, bucket k >= 1 sizes [2^(k-1), 2^k - 1] (REPLAY_SIZE_BUCKETS).
    uint64_t size_blocks[REPLAY_SIZE_BUCKETS], size_bytes[REPLAY_SIZE_BUCKETS];
    // A sampled trace's estimates of the program's figures (replay_set_sampled; 0 otherwise):
    // every counted block weighted by replay_sample_weight. The peak above is then the moment
    // the *estimated* live bytes were highest, and peak_* are the sampled figures at it.
    double est_blocks, est_bytes, est_live_blocks, est_live_bytes, est_peak_blocks, est_peak_bytes;
} replay_totals_t;

// A sampled trace (HPT_FILE_SAMPLED, docs/sampling.md#the-estimator): the shim recorded an
// allocation of size bytes with probability p = 1 - exp(-size / interval_bytes), so it stands
// for 1/p allocations of its size (the Horvitz-Thompson weight; unbiased). Returns 1/p; 1 for
// size 0 or interval 0.
double replay_sample_weight(uint64_t size, uint64_t interval_bytes);

// Decides whether an allocation event counts (see filter.h). Called once per allocation.
typedef bool (*replay_keep_fn)(void *ctx, const reader_event_t *ev);

typedef struct replay replay_t;

// keep NULL: every allocation counts. With a filter, frees of blocks that did not count are
// ignored, and n_events counts only counted allocations and their frees.
replay_t *replay_new(replay_keep_fn keep, void *keep_ctx);
void replay_free(replay_t *rp);

// Modes for replay_set_mode (docs/dhat-format.md#figures):
// REPLAY_SITES: keep per-site figures, a site being a stack id. A block made by realloc stays
// with the site of the block it replaced (DHAT's convention), so a growing buffer is one site.
// REPLAY_DHAT: DHAT's counting: a 0-byte block counts as 1 byte, and the global peak is the
// *last* moment live bytes reached their maximum (a tie moves it), not the first. Implies
// REPLAY_SITES.
#define REPLAY_SITES 1u
#define REPLAY_DHAT 2u

// Sets the mode; call before the first event. The default (0) is what `heapprof stats` shows.
void replay_set_mode(replay_t *rp, unsigned mode);

// The trace is sampled with this mean interval (file header): keep the est_* estimates too
// (replay_totals_t, replay_site_t). Call before the first event; 0: not sampled.
void replay_set_sampled(replay_t *rp, uint64_t interval_bytes);
uint64_t replay_sample_interval(const replay_t *rp); // 0: the trace records every allocation

// The first words of every block in replay's live table. A companion (below) may read size and
// time_ns of a block replay has counted: size as replay counts it (DHAT mode takes a 0-byte block
// as 1 byte), time_ns its allocation time. stack is replay's own (a stack id or, with
// REPLAY_SITES, a site index, with flags).
typedef struct replay_block {
    uint64_t size;
    uint64_t time_ns;
    uint64_t stack;
} replay_block_t;

// A companion pass (growth.c) keeps `words` words of its own per live block in replay's live
// table, right after the replay_block_t, instead of a table of its own: one probe per event
// serves both, and the block's size and time are kept once. on_alloc gets an allocation's slot
// before replay counts it: the words zeroed if new, the old block's words and head if the
// address was live (replay writes the head after the call). on_free gets the block just taken
// out, in place, before replay counts the free, for every free of a live block (counted or not).
// Call before the first event.
#define REPLAY_COMPANION_WORDS_MAX 8u
typedef void (*replay_companion_fn)(void *ctx, const reader_event_t *ev, replay_block_t *b);
void replay_set_companion(replay_t *rp, size_t words, replay_companion_fn on_alloc,
                          replay_companion_fn on_free, void *ctx);

// The companion's hook for a thread's end (READER_THREAD_END), in stream order with the heap
// events (growth.c releases the thread's state). Call after replay_set_companion.
typedef void (*replay_thread_end_fn)(void *ctx, uint32_t tid);
void replay_set_companion_thread_end(replay_t *rp, replay_thread_end_fn fn);

// The live block at addr (its companion words follow it), or NULL. Valid until the next event.
replay_block_t *replay_block(const replay_t *rp, uint64_t addr);

// DHAT's figures of one site, in bytes, blocks and nanoseconds.
typedef struct replay_site {
    uint64_t stack;                 // stack id
    uint64_t blocks, bytes;         // tbk, tb: allocated here (a realloc counts its new size)
    uint64_t lifetime_ns;           // tl: sum of block lifetimes; live blocks count to t-end
    uint64_t max_bytes, max_blocks; // mb, mbk: this site's own maximum of live bytes
    uint64_t peak_bytes, peak_blocks; // gb, gbk: live at the global peak (t-gmax)
    uint64_t end_bytes, end_blocks;   // eb, ebk: live after the last event (t-end)
    uint64_t temp_blocks, temp_bytes; // short-lived: freed by the thread that made it before
                                      // that thread allocated anything else
    // Bytes touched (docs/trace-format.md#touch), over the blocks freed with a measure:
    uint64_t touch_blocks;          // how many blocks were measured
    uint64_t touch_bytes;           // their sizes
    uint64_t touched_bytes;         // bytes of them the program touched (<= touch_bytes)
    uint64_t touch_resident_blocks; // of touch_blocks, measured by resident pages (upper bound)
    uint64_t touch_sampled_blocks;  // of touch_blocks, measured on sampled lines (an estimate)
    // A sampled trace's estimates (replay_set_sampled; 0 otherwise) of blocks and bytes, blocks
    // and bytes live at the global peak, and at t-end: the counted blocks weighted by
    // replay_sample_weight.
    double est_blocks, est_bytes, est_peak_blocks, est_peak_bytes, est_end_blocks, est_end_bytes;
    uint64_t touch_pages_blocks;    // of touch_blocks, by the pattern on resident pages (#23)
} replay_site_t;

// Sites seen so far (REPLAY_SITES), in order of their first allocation, and the figures of site
// i as of now (t-end = the latest event so far). 0 sites without REPLAY_SITES. For a sampled
// trace blocks, bytes, peak_* and end_* are the estimates (rounded est_*); the other figures
// are those of the sampled blocks.
size_t replay_n_sites(const replay_t *rp);
void replay_site(const replay_t *rp, size_t i, replay_site_t *out);
// replay_site's end_bytes alone, without the copy of every figure (timeline.c reads it after
// every event: the whole copy was ~12% of `view`'s samples on one thread).
uint64_t replay_site_end_bytes(const replay_t *rp, size_t i);

// Applies one event (any kind; non-heap events only update threads and time). Hot path; may
// allocate as the live table grows.
void replay_event(replay_t *rp, const reader_event_t *ev);

// replay_event over ev[0..n), prefetching the live table a few events ahead so a table of
// millions of blocks costs overlapping cache misses instead of one after another. Hot path.
void replay_events(replay_t *rp, const reader_event_t *ev, size_t n);

const replay_totals_t *replay_totals(const replay_t *rp);

// The totals to show people: replay_totals, or for a sampled trace a copy with the estimates
// in place of n_blocks, n_bytes, n_frees, peak_* and live_* (rounded; docs/sampling.md). The
// size histogram, events and touch figures stay those of the sampled blocks. Valid until the
// next call or event.
const replay_totals_t *replay_totals_shown(replay_t *rp);

// The site whose figures the latest site change touched (REPLAY_SITES; 0 before any). An event
// that changed no site leaves it as it was; one that changed two (an allocation at a live
// address, counted in n_double_allocs) names the second. For timeline.c's per-site live bytes.
uint32_t replay_last_site(const replay_t *rp);

// Starts loading the live-table slot of addr, as replay_events does a few events ahead, for a
// caller that applies events one at a time (timeline.c). Hot path.
void replay_prefetch(const replay_t *rp, uint64_t addr);

// ---- shards: the totals of one replay split by address over threads (replay_par.h) ----
// A block's address (its serial number) picks its shard by groups of 2^REPLAY_SHARD_GROUP_BITS:
// every event of one block meets the same shard, and in totals mode (no REPLAY_SITES) no figure
// of a shard depends on another's events except the global peak, which needs the order of all
// events: each shard reports every event's change of live bytes (replay_step_t) and one thread
// adds them up in order.
#define REPLAY_SHARD_GROUP_BITS 6u

static inline unsigned replay_shard_of(uint64_t addr, unsigned shard_bits) {
    return (unsigned)(addr >> REPLAY_SHARD_GROUP_BITS) & ((1u << shard_bits) - 1u);
}

// What one event did to the live totals of its shard.
typedef struct replay_step {
    uint64_t live_bytes;    // the change, modulo 2^64 (a decrease is a large number)
    uint32_t live_blocks;   // the same for blocks
    uint32_t counted_alloc; // 1: a counted allocation, where a new global peak may start
} replay_step_t;

// Makes rp one of 2^shard_bits shards (call before the first event; totals mode only).
void replay_set_shard(replay_t *rp, unsigned shard_bits);

// Applies the events ev[idx[0]], ..., ev[idx[m - 1]] (this shard's events of the round, in stream
// order: the caller picked them by replay_shard_of) and writes each one's step into steps[idx[k]]
// (others are not written). round: the batch's number, which with an event's index orders it
// in the whole stream.
void replay_shard_events(replay_t *rp, const reader_event_t *ev, const uint32_t *idx, size_t m,
                         replay_step_t *steps, uint64_t round);

// Adds the summed figures of from into into (every field but n_threads and the peak; the
// latest time is the later one). The one place that knows which totals are sums: a new one
// goes here.
void replay_totals_add(replay_totals_t *into, const replay_totals_t *from);

// Adds a finished shard's totals into into (which saw no events itself), threads as a union.
void replay_merge_shard(replay_t *into, const replay_t *shard);

// With REPLAY_SITES the shards only look blocks up (replay_shard_find) and one thread applies
// every event in order with what they found (replay_scan_order): site indexes, the per-thread
// state and the peak need the order of all events; each site's own figures only the order of
// its own and the peak's epoch, so threads by site apply them (replay_scan_apply).
typedef struct replay_found {
    uint64_t size, time_ns, stack; // the block at the address (replay's own stack word)
    uint64_t had;                  // 1: a block was there (freed, or replaced by an allocation)
} replay_found_t;

// A companion applied in the ordered scan (growth.c on shard threads, replay_par_set_growth)
// keeps these words per block in the shard's table, beside the block (replay_shard_keep_words):
// the shard writes them when it stores an allocation and hands them to the scan in cw[i] with
// every block it finds (found[i].had); the scan's own words reach the shard D rounds later as
// fixes (replay_shard_fix_words: the shards find rounds k + 1 .. k + D - 1 while the scans of
// round k run; D the rounds in flight, replay_shard_set_depth).
typedef struct replay_cwords {
    uint64_t serial;    // the allocation's place in the stream: round << 32 | index (never 0)
    uint64_t stack;     // the allocating event's stack id
    uint64_t origin;    // the scan's word: the allocating event's stack until a fix says other
    uint64_t tid_chain; // the allocating tid << 32 | the scan's chain word (0 until a fix)
} replay_cwords_t;

// A scan's words for the block allocated at addr as serial (others there are left alone).
typedef struct replay_cfix {
    uint64_t addr, serial, origin;
    uint32_t chain;
} replay_cfix_t;

// Makes a shard's blocks carry replay_cwords_t (call before the first event).
void replay_shard_keep_words(replay_t *rp);
// replay_shard_find asks for the lines of found[] (and cw[]) a few events ahead to be owned by
// its core before it stores there (HEAPPROF_REPLAY_PREFETCHW, an experiment for many cores:
// two events' results share a line, often two shards'). Off unless set.
void replay_shard_prefetch_results(replay_t *rp, bool on);
// Applies the fixes of fix[0..n) whose address falls in shard `shard`.
void replay_shard_fix_words(replay_t *rp, unsigned shard, const replay_cfix_t *fix, size_t n);

// The rounds in flight (replay_par.c): a shard's new block may wait this many rounds for its
// site, the scans resolve marks of the last `depth` rounds. 2 to REPLAY_DEPTH_MAX; 2 unless set.
// Call before the first event.
#define REPLAY_DEPTH_MAX 8u
void replay_shard_set_depth(replay_t *rp, unsigned depth);

// Shard side, at the start of round `round`: rewrites the blocks of round - D (the same slot, round
// % D) whose site was still open, from that round's site_of (the scans of round - D + 1 and later
// may still be running: their blocks stay marked). Then replay_shard_find: for the events
// *ev[0], ..., *ev[m - 1], the round's events idx[0], ..., idx[m - 1] (this shard's, in stream
// order, picked by the caller, each where it lies: replay_par copies none) takes out freed
// blocks, stores allocated ones (verdict: keep's answer per event, NULL: all count) and writes
// found[i]; with words (replay_shard_keep_words) also cw[i] where a block was found. round: the
// round's number (>= 1), for the serials and the marks' slot. rp: made with the scan's mode,
// replay_set_shard.
void replay_shard_fix(replay_t *rp, const uint32_t *site_of, uint64_t round);
void replay_shard_find(replay_t *rp, const reader_event_t *const *ev, const uint32_t *idx,
                       size_t m, const uint8_t *verdict, replay_found_t *found, uint64_t round,
                       replay_cwords_t *cw);

// Scan side, split three ways so it runs on several threads (replay_par.c), over one round
// (REPLAY_SITES; rp has no events of its own table). replay_scan_order goes through ev[0..n) of
// round `round` in stream order with found[] and decides what needs the order of all events
// but not the live totals: the sites' numbers, the per-thread state, the rare totals. It writes
// site_of[i] for each counted allocation (for this round's later events, the next D - 1 rounds'
// scans and the shards' fix D rounds on; site_of_slots[j] is the site_of of the open round
// with round % D == j, this one's included, for the blocks still pending there), and the list
// of what the round's events do to sites, in stream order (replay_scan_op_t: one op for most
// events, none for an uncounted one). replay_scan_peak, on another thread at the same time,
// adds up the live totals for the peak and lists the events that set a new one (bump). Once
// both are done with a round, replay_scan_apply(part k) applies the ops of part k's sites (site
// % K, K = replay_scan_parts), each in the epoch of its event (epoch0 + the peaks before it): K
// threads may apply one round at once, beside the next round's order and peak. An apply thread
// reads the 48-byte event and what the shards found only for its own ops; another part's op
// costs it a look at its 8 bytes. replay_scan_merge puts the parts' figures and the peak into
// rp after the last round.
#define REPLAY_SCAN_PARTS_MAX 16u
enum {
    REPLAY_OP_ALLOC = 1,       // a counted allocation joins the op's site
    REPLAY_OP_RELEASE = 2,     // a counted block replaced by an allocation at its address
                               // leaves the op's site (listed before the allocation's op)
    REPLAY_OP_FREE = 4,        // a counted block freed leaves the op's site
    REPLAY_OP_TEMP = 8,        // ... and it was a temporary
    REPLAY_OP_TOUCH_LIVE = 16, // a live block's measure at exit, for the op's site
};

// One op: the event's index in the round | REPLAY_OP_* << REPLAY_OP_SHIFT, and the site. An
// allocation at a live address gives two (release, then alloc), so a round has at most 2n.
#define REPLAY_OP_SHIFT 24u // event indexes stay below 2^24 (a round is at most 2^20 events)
typedef struct replay_scan_op {
    uint32_t ev_op;
    uint32_t site;
} replay_scan_op_t;

typedef struct replay_scan_round {
    const reader_event_t *const *ev; // the round's events, by index, where they lie
    size_t n;
    uint64_t round;              // >= 1
    const replay_found_t *found; // what the shards found, per event
    const uint8_t *verdict;      // keep's answer per event; NULL: every allocation counts
    uint32_t *site_of;           // order: the site of each counted allocation
    replay_scan_op_t *ops;       // order: the round's ops in stream order (2n room)
    size_t n_ops;                // order
    size_t n_sites;              // order: the sites after the round
    uint32_t *bump;  // peak: the indexes of the events that set a new peak, in order, then
                     // UINT32_MAX (n + 1 room)
    uint64_t epoch0; // peak: the epoch at the round's start
} replay_scan_round_t;

// Makes rp's scan split into `parts` parts (rounded down to a power of two, at least 1, at most
// REPLAY_SCAN_PARTS_MAX). Call before the first event.
void replay_scan_split(replay_t *rp, unsigned parts);
unsigned replay_scan_parts(const replay_t *rp);
void replay_scan_order(replay_t *rp, replay_scan_round_t *r, uint32_t *const *site_of_slots);
void replay_scan_peak(replay_t *rp, replay_scan_round_t *r);
void replay_scan_apply(replay_t *rp, unsigned part, const replay_scan_round_t *r);
void replay_scan_merge(replay_t *rp);

// Sets the global peak found by the ordered scan over the shards' steps.
void replay_set_peak(replay_t *rp, uint64_t bytes, uint64_t blocks, uint64_t time_ns);

#endif
