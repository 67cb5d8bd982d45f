// SPDX-License-Identifier: MIT
// Replay on shard threads. One round per batch: the caller's thread publishes a round and every
// shard thread applies its shards' events and writes their steps (totals) or what they found
// (sites). With sites the caller's thread has no shard of its own (when every thread could be
// made): it publishes round k + 1 as soon as round k - 1 is complete, so the shard threads go
// from round k to k + 1 without waiting for it, then hands round k to the scans once its shards
// are done, and lists round k + 2 from the reader's batches; in totals mode it is shard thread 0.
// Totals: once all are done the caller's thread adds the steps up in order for the global peak, and
// the next round starts (lock-step: the scan is a few additions an event). Sites: the scans
// (replay_scan_order and replay_scan_peak side by side, then replay_scan_apply by part of the
// sites; growth_scan_links, then growth_scan_chains) run on threads of their own and overlap the
// shards' next round, so a round costs the slowest of them instead of their sum: with D rounds in
// flight (HEAPPROF_REPLAY_DEPTH, 4 by default) round k uses buffers [k % D] (a pointer to each of
// its events where it lies, the batches it took the last events of, the finds, the sites, the
// order's ops, the peak's new peaks and the verdicts), and round k starts once the scans of round
// k - D are done with them (round k - D's batches go back to the reader then); its shards first
// apply the sites and growth's words of round k - D. A round is at least ROUND_MIN events (the
// reader's batches are smaller): the batches wait, kept where the reader left them
// (replay_par_events_kept), and the round is handed over as the list of its pieces: no thread
// copies an event with sites (session 14: the copy was ~20% of a shard thread's instructions;
// totals still copy, their rounds go one at a time). Each thread notes where the events of one part
// of the round lie and sorts that part's indexes by shard; after a barrier it reads a shard's
// indexes from every part, part after part, and only those events, so no event is looked at by
// every thread. A thread claims its own part and shards first, then those another left (one
// that starts the round late: `claim`), so one shard's table is worked on by one thread at a
// time. The shard threads meet at counters (spin, then futex), not at the lock; the scans'
// rounds pass between threads through the mutex.
#include "model/replay_par.h"

#include "core/cpus.h"
#include "core/stage_times.h"
#include "core/xalloc.h"

#include <limits.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <linux/futex.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define REPLAY_PAR_THREADS_DEFAULT 8u // without HEAPPROF_REPLAY_THREADS: see replay_par_threads
// Shards a replay thread, by default (HEAPPROF_REPLAY_SHARDS, 1 to 4): each thread claims its
// own parts and shards of a round, then what others left (claim), so the part of a thread that
// starts a round late is sorted by the others, and with more shards than threads its shards
// taken too. More than one a thread cost ~10% on 2 CPUs (4 replay threads, `report` on 20 M
// events: 1.73 s against 1.57-1.59); on many cores it is to be measured
// (docs/design.md#replay-threads).
#define SHARDS_PER_THREAD 1u
#define REPLAY_SHARDS_MAX (REPLAY_PAR_THREADS_MAX * 4u)
#define ROUND_MIN 131072u     // events a round gathers before it starts (round_min_env)
#define ROUND_MAX (1u << 20)  // events a round takes at most (its indexes are 32-bit)
_Static_assert(ROUND_MAX <= 1u << REPLAY_OP_SHIFT, "an op holds its event's index below its bits");
// rounds in flight with sites (depth_env). The 16-core machine (session 13, `report` on 100 M
// c_churn events, 4 decode workers and 8 replay threads, medians of 2) took 2.09 s at depth 2,
// 1.91 at 3 and 1.95 at 4 (194 / 211 / 229 MiB); session 12: 2.21, 2.10, 2.10. (e2e_growth's
// failure in session 12 was growth's time bound under load, not the depth: replay threads
// never run on 2 CPUs.) Since session 20 round k is published while the shards finish k - 1,
// a round earlier than before, so the scans keep the slack they had at 3 with 4.
#define DEPTH_DEFAULT 4u
#define DEPTH_TOTALS 2u // totals (no sites) run one round at a time: the depth is not used
#define WORKER_STACK_BYTES (256u << 10)
// A thread that waits for the next round, the round's partition or the shards' end spins this
// many pauses (a few microseconds) before it sleeps on a futex: the partition's barrier and the
// end of a round are usually that close, and a round handed to threads that spin costs no
// system call on the caller's thread. Only where every thread of replay (and the reader) has a
// CPU of its own: else a spinning thread holds up the one it waits for.
#define SPIN_PAUSES 2048u

// A counter threads wait on: spin, then futex. The one who changes it wakes sleepers only
// when there are any (sleepers is announced before the value is read again, both sequentially
// consistent, so a wake-up is never lost).
typedef struct waitword {
    _Atomic uint32_t v;
    _Atomic uint32_t sleepers;
    _Atomic unsigned spin; // pauses before sleeping: SPIN_PAUSES or 0
    char pad[52];  // each on its own cache line
} waitword_t;

static inline void cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ volatile("yield" ::: "memory");
#endif
}

// Waits until w's value is no longer `old`.
static void ww_wait(waitword_t *w, uint32_t old) {
    unsigned spin = atomic_load_explicit(&w->spin, memory_order_relaxed);
    for (unsigned i = 0; i < spin; i++) {
        if (atomic_load_explicit(&w->v, memory_order_acquire) != old)
            return;
        cpu_relax();
    }
    atomic_fetch_add(&w->sleepers, 1);
    while (atomic_load(&w->v) == old)
        (void)syscall(SYS_futex, &w->v, FUTEX_WAIT_PRIVATE, old, NULL, NULL, 0);
    atomic_fetch_sub(&w->sleepers, 1);
}

static void ww_wake(waitword_t *w) {
    if (atomic_load(&w->sleepers))
        (void)syscall(SYS_futex, &w->v, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

// Waits until w's value reaches `target` (counted modulo 2^32).
static void ww_wait_reach(waitword_t *w, uint32_t target) {
    for (;;) {
        uint32_t cur = atomic_load_explicit(&w->v, memory_order_acquire);
        if ((int32_t)(cur - target) >= 0)
            return;
        ww_wait(w, cur);
    }
}

// Adds one to w; the one that makes it `target` wakes whoever waits for that.
static void ww_arrive(waitword_t *w, uint32_t target) {
    if (atomic_fetch_add(&w->v, 1) + 1 == target)
        ww_wake(w);
}

typedef struct shard_thread {
    struct replay_par *p;
    uint64_t ns_go, ns_parted, ns_work; // HEAPPROF_STAGE_TIMES=2: waiting for a round, at the
                                        // partition's barrier, working (replay_par_finish)
    // and when, in round at_round, it started, reached the barrier and finished, and when it
    // had ended the round before (note_spreads; atomic: a thread late for a round may still
    // write them while the caller reads)
    _Atomic uint64_t at_round, at_start, at_parted, at_end, at_free;
    uint64_t free_since; // when its last work() returned (its own)
    pthread_t thread;
} shard_thread_t;

// One part of a round (events [n * q / parts, n * (q + 1) / parts) for part q): its event
// indexes sorted by shard, shard s's at s * stride, count[s] of them.
typedef struct part {
    uint32_t *idx;
    // sites: beside each index the pointer to its event, so that a shard reads its own events'
    // pointers in a row instead of one from each line of the round's pointers (a shard takes
    // about one event in n_shards: each line of 8 pointers another thread wrote)
    const reader_event_t **evp;
    size_t cap, evp_cap, stride;
    size_t count[REPLAY_SHARDS_MAX];
} part_t;

// Events waiting for a round: a batch kept for p (replay_par_events_kept), events copied
// into p->held (at held_off), or the caller's own during replay_par_events.
typedef struct pend {
    const reader_event_t *ev; // NULL: in p->held from held_off
    size_t n, held_off;
    void *batch; // given back once its last event's round is copied (NULL: nothing to give)
} pend_t;

// One round's data for the scans (sites).
typedef struct round_buf {
    const reader_event_t **ev; // the round's events where they lie (kept batches, held), by
    size_t n, ev_cap;          // index: not copied
    void **gone; // the batches whose last events the round took: given back once its scans are
    size_t n_gone, gone_cap; // done with them (when the buffer is used again, or at the finish)
    uint64_t round;
    replay_found_t *found; // what the shards found, per event
    size_t found_cap;
    uint32_t *site_of; // the site of each counted allocation (the sites' scan writes it)
    size_t site_of_cap;
    replay_cwords_t *cw; // with growth: the words of the blocks the shards found
    size_t cw_cap;
    uint8_t *verdict; // with a filter: keep's answer per event
    size_t verdict_cap;
    replay_scan_op_t *ops; // the order's list of ops (2n room)
    size_t ops_cap;
    uint32_t *bump; // the peak's: the events that set a new peak (n + 1 room)
    size_t bump_cap;
    replay_scan_round_t sr; // the above for the scans (the peak's epoch0 too)
} round_buf_t;

enum { SCAN_ORDER, SCAN_PEAK, SCAN_APPLY, SCAN_GROWTH, SCAN_GROWTH_CHAINS, SCAN_TIMELINE };

typedef struct scanner {
    struct replay_par *p;
    unsigned kind;   // replay_scan_order, _peak, _apply of `part`, growth_scan_links, _chains,
                     // timeline_scan
    unsigned part;
    uint64_t done;   // rounds scanned
    uint64_t ns_wait, ns_work; // HEAPPROF_STAGE_TIMES=2: waiting for a round, scanning
    bool threaded;   // on a thread of its own
    pthread_t thread;
} scanner_t;

// A piece of the round: events [at, at + n) of the round lie at ev.
typedef struct round_seg {
    const reader_event_t *ev;
    size_t at, n;
} round_seg_t;

// A published round as the shard threads read it. Rounds alternate between two of these, so
// that round r + 1 can be published, listed and found while round r's last shards finish:
// the shard threads go from one round to the next without waiting for the caller's thread
// (pub_of). Round r's is written before it is published and stays until round r is complete
// (round r + 2 is published only then).
typedef struct pub_round {
    round_seg_t *segs; // the round's pieces (the caller's listing, swapped in at publication)
    size_t n_segs, seg_cap;
    size_t n;                    // events
    const reader_event_t **rptr; // sites: the round's events by index (its round buffer's ev)
    const replay_cfix_t *gfix;   // with growth: the changed words of round - D, for the shards
    size_t n_gfix;
    uint64_t at_go; // HEAPPROF_STAGE_TIMES=2: when it was published
    part_t parts[REPLAY_PAR_THREADS_MAX]; // a part a thread: listed, then read by shard
} pub_round_t;

struct replay_par {
    replay_t *into;
    replay_t *shards[REPLAY_SHARDS_MAX];
    unsigned n_shards, shard_bits;
    shard_thread_t threads[REPLAY_PAR_THREADS_MAX]; // [0]: the caller's thread, if caller_works
    unsigned n_threads;                              // working on shards, the caller's included
    bool caller_works; // the caller's thread is threads[0] and its rounds run one at a time;
                       // else (sites, every thread made) it gathers round k + 1 while the
                       // shard threads do rounds k - 1 and k (complete_rounds)
    unsigned n_parts; // a round's parts: one a thread

    // The shard threads' rounds, without a lock: the caller's thread writes round r into
    // pub[r & 1], then sets `go` to r; each thread goes through every round up to `go` in
    // turn. In round r it claims parts, its own first (part t for thread t), then any other
    // still unclaimed, lists and sorts each, adding one to `parted[r & 1]` for each; once every
    // part of r is listed (round_target) it claims shards the same way (its own: s = t, t +
    // n_threads, ...; then the others') and applies each one's events, adding one to
    // `finished[r & 1]` for each: round r is complete when every shard has applied it. So when
    // every thread comes in time each does its own, as if they were fixed (its shards' tables
    // stay in its core's cache); a thread late for a round finds its own taken by the others
    // and goes on. A part's claim is a compare-and-swap of its last claimed round of that
    // parity from r - 2 to r; a shard's, of its last claimed round from r - 1 to r, once its
    // last applied round (shard_done) is r - 1: shards apply rounds in order, and a thread late
    // for round r never takes a part or shard of a later one. Round r + 1 is published while r
    // runs (once r - 1 is complete: pub[] and the counters alternate), so a thread that ends
    // its share of r finds the next round waiting, and no thread waits for the caller's thread
    // between rounds (sites; totals run one round at a time).
    waitword_t go, parted[2], finished[2];
    _Alignas(64) _Atomic uint64_t part_round[2][REPLAY_PAR_THREADS_MAX];
    _Alignas(64) _Atomic uint64_t shard_round[REPLAY_SHARDS_MAX];
    _Alignas(64) _Atomic uint64_t shard_done[REPLAY_SHARDS_MAX];
    _Alignas(64) _Atomic bool stop;

    // rounds r - 1 and r as published: their events lie in pub's segs (the kept batches where
    // they are, held, the caller's array); the threads note where each lies in rptr (sites) or
    // copy them to tev (totals), one part each, as they sort them
    uint64_t round;    // rounds published
    uint64_t complete; // rounds whose shards are done (complete_rounds): round - 1 or round
    pub_round_t pub[2];
    reader_event_t *tev; // totals: the round's copy
    size_t tev_cap;
    round_seg_t *seg_list; // the next round's pieces, being listed (next_round)
    size_t seg_cap;
    replay_step_t *steps;
    size_t steps_cap;
    uint8_t *verdict; // totals with a filter: keep's answer per event of the round
    size_t verdict_cap;
    replay_keep_fn keep;
    void *keep_ctx;
    bool sites;        // REPLAY_SITES: shards find, the scans apply (replay_scan_order)
    bool apply_started; // with sites: the apply scanners run (start_apply, at the first round)
    bool timing;        // HEAPPROF_STAGE_TIMES=2: the threads time their waits
    unsigned idle;      // HEAPPROF_TEST_REPLAY_IDLE=T: thread T claims nothing, so that the
                        // others take its part and shards every round (tests); else UINT_MAX
    unsigned make_left; // HEAPPROF_TEST_REPLAY_MAKE=N: only N of replay's threads are made,
                        // the rest "fail" (tests of the paths without them); else UINT_MAX
    unsigned slow;      // HEAPPROF_TEST_REPLAY_SLOW=T: thread T pauses after each shard it
                        // applies, so that the others meet its shards still at the round
                        // before, and between reading a round and the stop flag, where the
                        // finish may come (tests; the figures do not depend on it); else
                        // UINT_MAX
    uint64_t ns_wait_scans, ns_wait_shards; // the caller's: for round k - D's scans, for the
                                             // other shard threads of its round
    // HEAPPROF_STAGE_TIMES=2, summed over rounds: from the round's publication (its at_go) to
    // its shard threads' starts (the mean and the last), and the spreads of their arrivals at
    // the barrier and of their ends: late wake-ups and uneven shares, told apart
    uint64_t ns_lag_mean, ns_lag_max, ns_parted_spread, ns_end_spread;
    unsigned depth;    // with sites: rounds in flight, D (2..REPLAY_DEPTH_MAX)
    round_buf_t buf[REPLAY_DEPTH_MAX]; // with sites: round k's in buf[k % depth]
    growth_t *growth;  // replay_par_set_growth: growth in a scan, its words in shards
    timeline_t *timeline; // replay_par_set_timeline: the heap over time, in a scan after the order
    bool dhat;            // REPLAY_DHAT (the timeline's bytes of malloc(0))

    // with sites, the scans of the rounds the shards finished, each on a thread of its own
    // (scan_main; the caller's thread runs them in turn when none could be made)
    pthread_mutex_t lock;
    pthread_cond_t scan_go, scanned; // a round is ready for the scans; a scan finished one
    uint64_t ready;                  // rounds the shards finished
    // [0]: replay_scan_order, [1]: replay_scan_peak, then growth's links and chains (with
    // growth) and the timeline (with one) in the order they were set, and replay_scan_apply of
    // each part
    scanner_t scanners[5 + REPLAY_SCAN_PARTS_MAX];
    unsigned growth_links; // the index of growth's links scanner
    unsigned n_scanners;
    bool scan_stop;

    // events waiting for the next round, oldest first: pend[pend_head, n_pend), n_pend_ev
    // events in all
    pend_t *pend;
    size_t pend_head, n_pend, pend_cap, n_pend_ev;
    reader_event_t *held; // copies of events the caller could not leave (replay_par_events)
    size_t n_held, held_cap;
    void **gone; // batches whose last events the next round takes (being listed)
    size_t n_gone, gone_cap;
    void **run_gone; // totals: the published round's, given back once it is complete: the two
    size_t n_run_gone, run_gone_cap; // swap (sites: its round buffer keeps them)
    replay_batch_done_fn batch_done;
    void *batch_ctx;

    size_t round_min, round_max; // ROUND_MIN, ROUND_MAX unless a test set others

    // the scan
    uint64_t live_bytes, live_blocks, peak_bytes, peak_time_ns, peak_blocks;
};

// HEAPPROF_REPLAY_ROUND: the events a round gathers before it starts (bench/analyzer_scaling.sh
// measures round sizes with it; every figure is the same at any size, test_replay_par's rounds
// go down to one event). Fewer, larger rounds mean fewer meetings of the threads a round, more
// memory in flight (the round's pointers, results and batches, ~150 bytes an event, D rounds).
static size_t round_min_env(void) {
    const char *env = getenv("HEAPPROF_REPLAY_ROUND");
    char *end;
    unsigned long v = env && *env ? strtoul(env, &end, 10) : 0;
    if (!env || !*env || *end || v == 0)
        return ROUND_MIN;
    return v > ROUND_MAX ? ROUND_MAX : v;
}

// A count from the environment variable `name`, lo to hi; unset or empty: `dflt`; anything
// else: one warning (per variable: *warned), then `dflt`.
static unsigned count_env(const char *name, unsigned lo, unsigned hi, unsigned dflt,
                          _Atomic bool *warned) {
    const char *env = getenv(name);
    if (!env || !*env)
        return dflt;
    char *end;
    unsigned long v = strtoul(env, &end, 10);
    if (*end || v < lo || v > hi) {
        if (!atomic_exchange(warned, true))
            fprintf(stderr, "heapprof: %s=%s is not a number from %u to %u; using %u\n", name, env,
                    lo, hi, dflt);
        return dflt;
    }
    return (unsigned)v;
}

// HEAPPROF_REPLAY_DEPTH: the rounds in flight with sites, D, 2 to REPLAY_DEPTH_MAX (every
// figure is the same at any depth). More let the shards run further ahead of the scans when
// one round's stage is slow, at ~150 bytes an event of a round for each (docs/design.md
// #replay-threads).
static unsigned depth_env(void) {
    static _Atomic bool warned;
    return count_env("HEAPPROF_REPLAY_DEPTH", 2, REPLAY_DEPTH_MAX, DEPTH_DEFAULT, &warned);
}

// HEAPPROF_REPLAY_APPLY: the sites' apply threads (parts of the sites), 1 to
// REPLAY_SCAN_PARTS_MAX, rounded down to a power of two (every figure is the same with any);
// else `dflt`.
static unsigned apply_parts_env(unsigned dflt) {
    static _Atomic bool warned;
    return count_env("HEAPPROF_REPLAY_APPLY", 1, REPLAY_SCAN_PARTS_MAX, dflt, &warned);
}

// HEAPPROF_REPLAY_PREFETCHW=1: the shards ask for their results' lines ahead of their stores
// (replay_shard_prefetch_results; an experiment for many cores, where two shards' results
// share lines), where the CPU has PREFETCHW.
static bool prefetchw_env(void) {
    static _Atomic bool warned;
    if (!count_env("HEAPPROF_REPLAY_PREFETCHW", 0, 1, 0, &warned))
        return false;
#if defined(__x86_64__)
    unsigned a, b, c, d;
    return __get_cpuid(0x80000001u, &a, &b, &c, &d) && (c & (1u << 8)); // PRFCHW
#else
    return true;
#endif
}

// HEAPPROF_REPLAY_SHARDS: shards a replay thread, 1 to 4 (rounded down to a power of two;
// every figure is the same with any), else SHARDS_PER_THREAD.
static unsigned shards_env(void) {
    static _Atomic bool warned;
    unsigned n = count_env("HEAPPROF_REPLAY_SHARDS", 1, 4, SHARDS_PER_THREAD, &warned);
    while (n & (n - 1))
        n &= n - 1;
    return n;
}

unsigned replay_par_threads(void) {
    unsigned n;
    const char *env = getenv("HEAPPROF_REPLAY_THREADS");
    char *end;
    unsigned long v = env && *env ? strtoul(env, &end, 10) : 0;
    if (env && *env && !*end) {
        n = v > REPLAY_PAR_THREADS_MAX ? REPLAY_PAR_THREADS_MAX : (unsigned)v;
    } else {
        // Half the CPUs, at most REPLAY_PAR_THREADS_DEFAULT: with the scans' own threads
        // (order, peak, growth's two passes, the apply parts), the reader and its decode
        // workers beside them, more shards cost more than they give. On 16 cores (session 11,
        // `report` on 100 M c_churn events, 4 decode workers, rounds of 131,072 events): 4
        // shards 2.42-2.43 s, 8 2.29-2.36 s, 16 2.40-2.52 s (with rounds of 16,384: 2.53-2.58,
        // 2.82-2.98, 3.62-3.86 s).
        unsigned cpus = cpus_usable(); // a container's or taskset's, not the host's
        n = cpus <= 2 ? 0 : cpus / 2;
        if (n > REPLAY_PAR_THREADS_DEFAULT)
            n = REPLAY_PAR_THREADS_DEFAULT;
    }
    while (n & (n - 1))
        n &= n - 1; // shards are picked by address bits: a power of two
    return n;
}

// The filter's verdict, decided on the caller's thread before the round (filter_keep keeps a
// cache that is not shared safely) and read here by the shard that owns the block.
static bool verdict_keep(void *ctx, const reader_event_t *ev) {
    const replay_par_t *p = ctx;
    return p->verdict[ev - p->tev];
}

// The filter's verdicts on the round's events, in order, into verdict.
static void set_verdicts(replay_par_t *p, uint8_t *verdict, size_t n_segs) {
    for (size_t g = 0; g < n_segs; g++) {
        const round_seg_t *sg = &p->seg_list[g];
        for (size_t i = 0; i < sg->n; i++)
            verdict[sg->at + i] =
                sg->ev[i].kind == READER_ALLOC && p->keep(p->keep_ctx, &sg->ev[i]);
    }
}

static void scanner_start(replay_par_t *p, unsigned kind, unsigned part);

// Spin before sleeping only where it pays: for the next round (a wait as long as the scans
// make it) if the shard threads, the scans and the reading thread all fit on the CPUs; at the
// barrier and the round's end (threads woken together, waiting for the slowest of them) if the
// shard threads do.
// HEAPPROF_REPLAY_SPIN (0 to 2^24): the pauses instead of SPIN_PAUSES, for measuring on a
// many-core machine whether rounds wait for threads to wake (HEAPPROF_STAGE_TIMES=2 prints the
// lags); the CPUs still decide whether to spin at all.
static void set_spin(replay_par_t *p) {
    static _Atomic bool warned;
    unsigned pauses = count_env("HEAPPROF_REPLAY_SPIN", 0, 1u << 24, SPIN_PAUSES, &warned);
    unsigned cpus = cpus_usable(); // where the process may run: spinning on CPUs it lacks stalls
    unsigned all = cpus >= p->n_threads + p->n_scanners + 1 ? pauses : 0;
    unsigned shards = cpus >= p->n_threads ? pauses : 0;
    atomic_store_explicit(&p->go.spin, all, memory_order_relaxed);
    for (unsigned k = 0; k < 2; k++) {
        atomic_store_explicit(&p->parted[k].spin, shards, memory_order_relaxed);
        atomic_store_explicit(&p->finished[k].spin, shards, memory_order_relaxed);
    }
}

// Events a thread lists (or copies), then sorts by shard, at a time: the sort reads them while
// their lines are still in L1 (one pass over the part, not two).
#define COPY_CHUNK 512u

// Round r's published fields.
static inline pub_round_t *pub_of(replay_par_t *p, uint64_t r) { return &p->pub[r & 1]; }

// What parted[r & 1] and finished[r & 1] count for round r, in parts or shards: each counter
// goes up by one for every part (shard) of every round of its parity, and rounds r and r + 2
// never run at once (r + 2 is published once r is complete), so round r is listed (complete)
// when its counter reaches the rounds of r's parity up to r, times the parts (shards).
static inline uint32_t round_target(uint64_t r, unsigned per_round) {
    return (uint32_t)((r + 1) / 2 * per_round);
}

// Sorts the indexes of the round's events [lo, hi) by shard into pt->idx (shard s's at
// s * stride), counting them in count. With sites (ptrs) the events lie where rptr says and each
// index's pointer goes beside it (part_t's evp); totals read their copy in tev.
static inline __attribute__((always_inline)) void sort_range(const replay_par_t *p,
                                                             const pub_round_t *pr, part_t *pt,
                                                             size_t stride, size_t lo, size_t hi,
                                                             size_t *count, bool ptrs) {
    const unsigned bits = p->shard_bits;
    uint32_t *part = pt->idx;
    const reader_event_t **evp = pt->evp;
    if (p->n_shards == 2) { // no table of cursors: the common small case, one compare an event
        uint32_t *a = part, *c = part + stride;
        const reader_event_t **ea = evp, **ec = evp + stride;
        size_t na = count[0], nc = count[1];
        for (size_t i = lo; i < hi; i++) {
            const reader_event_t *e = ptrs ? pr->rptr[i] : NULL;
            bool odd = replay_shard_of(ptrs ? e->addr : p->tev[i].addr, bits);
            a[na] = (uint32_t)i;
            c[nc] = (uint32_t)i;
            if (ptrs) {
                ea[na] = e;
                ec[nc] = e;
            }
            na += !odd;
            nc += odd;
        }
        count[0] = na;
        count[1] = nc;
    } else {
        for (size_t i = lo; i < hi; i++) {
            const reader_event_t *e = ptrs ? pr->rptr[i] : NULL;
            unsigned s = replay_shard_of(ptrs ? e->addr : p->tev[i].addr, bits);
            size_t at = s * stride + count[s]++;
            part[at] = (uint32_t)i;
            if (ptrs)
                evp[at] = e;
        }
    }
}

// Notes where events [lo, hi) of the round lie in its pieces (rptr; totals: copies them to tev),
// a chunk at a time, and sorts each chunk's indexes by shard right after.
static void copy_part(replay_par_t *p, const pub_round_t *pr, part_t *pt, size_t stride,
                      size_t lo, size_t hi, size_t *count) {
    const round_seg_t *g = pr->segs, *end = pr->segs + pr->n_segs;
    while (g < end && g->at + g->n <= lo)
        g++;
    for (; g < end && g->at < hi; g++) {
        size_t from = g->at > lo ? g->at : lo, to = g->at + g->n < hi ? g->at + g->n : hi;
        for (size_t c = from; c < to; c += COPY_CHUNK) {
            size_t e = to - c < COPY_CHUNK ? to : c + COPY_CHUNK;
            if (p->sites) { // where they lie: the batches stay until the round's scans are done
                const reader_event_t *src = g->ev + (c - g->at);
                for (size_t j = c; j < e; j++)
                    pr->rptr[j] = src++;
            } else {
                memcpy(p->tev + c, g->ev + (c - g->at), (e - c) * sizeof *p->tev);
            }
            if (p->sites)
                sort_range(p, pr, pt, stride, c, e, count, true);
            else
                sort_range(p, pr, pt, stride, c, e, count, false);
        }
    }
}

// Claims a part or shard for round r: true if this thread is the one that moved its last
// claimed round from `from` to r.
static inline bool claim(_Atomic uint64_t *last, uint64_t from, uint64_t r) {
    return atomic_load_explicit(last, memory_order_relaxed) == from &&
           atomic_compare_exchange_strong(last, &from, r);
}

// Lists part q of round r (the scans read the events where they lie: the batches go back
// once the scans are done) and sorts its indexes by shard.
static void list_part(replay_par_t *p, uint64_t r, unsigned q) {
    pub_round_t *pr = pub_of(p, r);
    part_t *pt = &pr->parts[q];
    const size_t n = pr->n, np = p->n_parts, n_shards = p->n_shards;
    size_t lo = n * q / np, hi = n * (q + 1) / np, stride = hi - lo;
    if (pt->cap < n_shards * stride + 1) // + 1: never NULL, even for an empty part
        pt->idx = xgrow(pt->idx, &pt->cap, n_shards * stride + 1, sizeof *pt->idx);
    if (p->sites && pt->evp_cap < n_shards * stride + 1)
        pt->evp = xgrow(pt->evp, &pt->evp_cap, n_shards * stride + 1, sizeof *pt->evp);
    size_t count[REPLAY_SHARDS_MAX] = {0};
    copy_part(p, pr, pt, stride, lo, hi, count);
    pt->stride = stride;
    memcpy(pt->count, count, n_shards * sizeof *count);
}

// Applies shard s's events of round r from every part, part after part (so in stream order):
// each event is looked at once for its shard, by one thread, whatever the number of threads.
static void apply_shard(replay_par_t *p, unsigned s, uint64_t r) {
    round_buf_t *b = &p->buf[r % p->depth];
    const pub_round_t *pr = pub_of(p, r);
    if (p->sites) {
        // round - D's sites and words: b's site_of still holds them, and gfix
        replay_shard_fix(p->shards[s], b->site_of, r);
        if (p->growth)
            replay_shard_fix_words(p->shards[s], s, pr->gfix, pr->n_gfix);
    }
    for (unsigned q = 0; q < p->n_parts; q++) {
        const part_t *pt = &pr->parts[q];
        const uint32_t *idx = pt->idx + s * pt->stride;
        size_t m = pt->count[s];
        if (!m)
            continue;
        if (!p->sites)
            replay_shard_events(p->shards[s], p->tev, idx, m, p->steps, r);
        else
            replay_shard_find(p->shards[s], pt->evp + s * pt->stride, idx, m,
                              p->keep ? b->verdict : NULL, b->found, r, b->cw);
    }
}

// Thread th's share of round r: the parts it claims, then, once every part is sorted
// (`parted`), the shards it claims, its own first. Nothing of the round is read before a
// claim succeeds: a thread that comes after the round's last claim may already see round
// r + 2's fields in pub_of(r), and must not work on them as round r's. A shard still applying
// round r - 1 is left to the thread applying it, which comes to round r next.
static void work(replay_par_t *p, shard_thread_t *th, uint64_t r) {
    const unsigned np = p->n_parts, ns = p->n_shards, nt = p->n_threads;
    const unsigned t = (unsigned)(th - p->threads);
    if (t == p->idle)
        return;
    const uint64_t t_start = p->timing ? stage_clock_ns() : 0;
    for (unsigned k = 0; k < np; k++) {
        unsigned q = (t + k) % np;
        if (!claim(&p->part_round[r & 1][q], r - 2, r))
            continue;
        list_part(p, r, q);
        ww_arrive(&p->parted[r & 1], round_target(r, np));
    }
    uint64_t t0 = p->timing ? stage_clock_ns() : 0;
    ww_wait_reach(&p->parted[r & 1], round_target(r, np));
    if (p->timing)
        th->ns_parted += stage_clock_ns() - t0;
    bool noted = false;
    for (unsigned k = 0; k < nt; k++) // thread t's shards, then t + 1's, ...
        for (unsigned s = (t + k) % nt; s < ns; s += nt) {
            if (atomic_load_explicit(&p->shard_done[s], memory_order_acquire) != r - 1 ||
                !claim(&p->shard_round[s], r - 1, r))
                continue;
            if (p->timing && !noted) { // note_spreads reads them once `finished` says the round ended
                noted = true;
                atomic_store_explicit(&th->at_start, t_start, memory_order_relaxed);
                atomic_store_explicit(&th->at_free, th->free_since, memory_order_relaxed);
                atomic_store_explicit(&th->at_parted, t0, memory_order_relaxed);
                atomic_store_explicit(&th->at_round, r, memory_order_relaxed);
            }
            apply_shard(p, s, r);
            if (p->timing)
                atomic_store_explicit(&th->at_end, stage_clock_ns(), memory_order_relaxed);
            if (t == p->slow)
                nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
            atomic_store_explicit(&p->shard_done[s], r, memory_order_release);
            ww_arrive(&p->finished[r & 1], round_target(r, ns));
        }
    if (p->timing)
        th->free_since = stage_clock_ns();
}

static void *shard_main(void *arg) {
    shard_thread_t *th = arg;
    replay_par_t *p = th->p;
    (void)pthread_setname_np(pthread_self(), "hp-shard"); // HEAPPROF_STAGE_TIMES=2, perf
    const unsigned t = (unsigned)(th - p->threads);
    uint64_t done = 0; // rounds this thread went through
    for (;;) {
        uint64_t t0 = p->timing ? stage_clock_ns() : 0;
        ww_wait(&p->go, (uint32_t)done);
        // The round before the stop flag: replay_par_finish sets stop, then raises `go` once
        // more to wake everyone. Read the other way round, a thread that found stop still unset
        // and then that last `go` went on to a round that was never published, and waited for
        // it for ever (test_replay_par hung at the finish's join, session 21). Read this way, a
        // `go` of the finish's makes the stop flag read after it set (both sequentially
        // consistent).
        uint32_t go = atomic_load(&p->go.v);
        if (t == p->slow) // tests: the finish may come between the two reads
            nanosleep(&(struct timespec){.tv_nsec = 200000}, NULL);
        if (atomic_load(&p->stop))
            break;
        uint64_t t1 = p->timing ? stage_clock_ns() : 0;
        // every round in turn, also those others did while this thread was away: a shard of
        // round r whose r - 1 this thread applied is its to take (work)
        while ((uint32_t)done != go)
            work(p, th, ++done);
        if (p->timing) {
            th->ns_go += t1 - t0;
            th->ns_work += stage_clock_ns() - t1;
        }
    }
    return NULL;
}

// A test knob's number (HEAPPROF_TEST_REPLAY_*), UINT_MAX where unset: tests only, no warning.
static unsigned test_knob(const char *name) {
    const char *v = getenv(name);
    return v && *v ? (unsigned)strtoul(v, NULL, 10) : UINT_MAX;
}

// Starts one of replay's threads (small stacks: none recurses). False if it could not be
// made: the caller's thread then does its work.
static bool start_thread(replay_par_t *p, pthread_t *thread, void *(*fn)(void *), void *arg) {
    if (p->make_left == 0)
        return false;
    pthread_attr_t attr;
    bool attr_ok = pthread_attr_init(&attr) == 0;
    if (attr_ok)
        (void)pthread_attr_setstacksize(&attr, WORKER_STACK_BYTES);
    bool made = pthread_create(thread, attr_ok ? &attr : NULL, fn, arg) == 0;
    if (attr_ok)
        pthread_attr_destroy(&attr);
    if (made && p->make_left != UINT_MAX)
        p->make_left--;
    return made;
}

replay_par_t *replay_par_new(replay_t *into, unsigned mode, unsigned n_threads,
                             replay_keep_fn keep, void *keep_ctx) {
    replay_par_t *p = xcalloc(1, sizeof *p);
    if (n_threads < 1)
        n_threads = 1;
    if (n_threads > REPLAY_PAR_THREADS_MAX)
        n_threads = REPLAY_PAR_THREADS_MAX;
    while (n_threads & (n_threads - 1))
        n_threads &= n_threads - 1;
    p->into = into;
    p->n_shards = n_threads * shards_env();
    if (p->n_shards > REPLAY_SHARDS_MAX)
        p->n_shards = REPLAY_SHARDS_MAX;
    while ((1u << p->shard_bits) < p->n_shards)
        p->shard_bits++;
    p->keep = keep;
    p->keep_ctx = keep_ctx;
    p->round_min = round_min_env();
    p->timing = stage_times_level() >= 2;
    p->idle = test_knob("HEAPPROF_TEST_REPLAY_IDLE");
    p->slow = test_knob("HEAPPROF_TEST_REPLAY_SLOW");
    p->make_left = test_knob("HEAPPROF_TEST_REPLAY_MAKE");
    p->round_max = ROUND_MAX;
    p->sites = mode & (REPLAY_SITES | REPLAY_DHAT);
    p->dhat = mode & REPLAY_DHAT;
    p->depth = p->sites ? depth_env() : DEPTH_TOTALS;
    const bool pfw = p->sites && prefetchw_env();
    for (unsigned s = 0; s < p->n_shards; s++) {
        // with sites the shards never ask keep: replay_shard_find reads the verdicts itself
        p->shards[s] = keep && !p->sites ? replay_new(verdict_keep, p) : replay_new(NULL, NULL);
        replay_set_mode(p->shards[s], mode);
        replay_set_shard(p->shards[s], p->shard_bits);
        replay_shard_set_depth(p->shards[s], p->depth);
        replay_shard_prefetch_results(p->shards[s], pfw);
    }
    pthread_mutex_init(&p->lock, NULL);
    pthread_cond_init(&p->scan_go, NULL);
    pthread_cond_init(&p->scanned, NULL);
    p->n_threads = 1; // the caller's
    for (unsigned i = 1; i < n_threads; i++) {
        p->threads[i].p = p;
        if (!start_thread(p, &p->threads[i].thread, shard_main, &p->threads[i]))
            break;
        p->n_threads++;
    }
    // with sites and every other thread made, a thread of its own for shard 0 too: the
    // caller's thread then lists the next round while the shards work (complete_rounds)
    p->threads[0].p = p; // the others' was set before they started, and they read it at once
    p->caller_works = true;
    if (p->sites && p->n_threads == n_threads && n_threads > 1 &&
        start_thread(p, &p->threads[0].thread, shard_main, &p->threads[0]))
        p->caller_works = false;
    // a part a thread that works on rounds (set before the first round starts: the others
    // read it once `go` tells them of one)
    p->n_parts = p->n_threads;
    for (unsigned q = 0; q < REPLAY_PAR_THREADS_MAX; q++) // round 1's claims move them from -1
        atomic_init(&p->part_round[1][q], UINT64_MAX);
    if (p->n_threads < 2) // alone, a thread that claims nothing would leave the round undone
        p->idle = UINT_MAX;
    if (p->sites) { // the apply parts once growth is known (start_apply)
        scanner_start(p, SCAN_ORDER, 0);
        scanner_start(p, SCAN_PEAK, 0);
    }
    set_spin(p);
    return p;
}

// The sites' figures on their apply threads, started before the first round (or at the finish
// of a replay that had none), once replay_par_set_growth has said whether growth's two passes
// run beside them: 1 thread with growth or below 4 replay threads, else 2, or HEAPPROF_REPLAY_APPLY.
// Each apply thread reads only its sites' events, so one more splits the work but adds a
// thread beside the others. c_churn at 8 shards (session 13): 2 parts ~39 instructions an
// event each, 1 part ~63, the order pass ~49, growth's links ~59; `report` (growth on) on
// 100 M events on 16 cores, rounds of 131,072 at depth 3, medians of 3: 1.41 s with one apply
// thread, 1.50 s with two (CPU 14.7 s against 16.1).
static void start_apply(replay_par_t *p) {
    if (!p->sites || p->apply_started)
        return;
    p->apply_started = true;
    replay_scan_split(p->into, apply_parts_env(p->growth || p->n_threads < 4 ? 1 : 2));
    for (unsigned k = 0; k < replay_scan_parts(p->into); k++)
        scanner_start(p, SCAN_APPLY, k);
    set_spin(p);
}

// One scan of round k, from buf[k % depth] (and the site_of of the D - 1 rounds before it).
static void scan_round(replay_par_t *p, const scanner_t *sc, uint64_t k) {
    round_buf_t *b = &p->buf[k % p->depth];
    if (sc->kind == SCAN_GROWTH) {
        growth_scan_links(p->growth, b->ev, b->n, b->found, b->cw, k);
    } else if (sc->kind == SCAN_TIMELINE) {
        timeline_scan(p->timeline, &b->sr, p->dhat);
    } else if (sc->kind == SCAN_GROWTH_CHAINS) {
        growth_scan_chains(p->growth, b->ev, b->n, b->found, b->cw, k);
    } else if (sc->kind == SCAN_APPLY) {
        replay_scan_apply(p->into, sc->part, &b->sr);
    } else if (sc->kind == SCAN_PEAK) {
        replay_scan_peak(p->into, &b->sr);
    } else {
        // buf[j] holds round k's or one of the D - 1 before it, each round's site_of at its
        // slot; none grows while this scan runs (run_sites_round waits for it first)
        uint32_t *site_of[REPLAY_DEPTH_MAX];
        for (unsigned j = 0; j < p->depth; j++)
            site_of[j] = p->buf[j].site_of;
        replay_scan_order(p->into, &b->sr, site_of);
    }
}

// Round k of sc is scanned: wakes whoever waits for it, and after an order, peak or growth's
// links pass the scans after them, whose turn it may be. Called with p->lock held.
static void scan_mark_done(replay_par_t *p, scanner_t *sc, uint64_t k) {
    sc->done = k;
    pthread_cond_broadcast(&p->scanned);
    if (sc->kind == SCAN_ORDER || sc->kind == SCAN_PEAK || sc->kind == SCAN_GROWTH)
        pthread_cond_broadcast(&p->scan_go);
}

// The rounds both the order and the peak finished. Call with the lock held.
static uint64_t ordered_done(const replay_par_t *p) {
    uint64_t a = p->scanners[SCAN_ORDER].done, b = p->scanners[SCAN_PEAK].done;
    return a < b ? a : b;
}

// The rounds a scanner may scan: those the shards finished, or for the sites' apply those the
// order and the peak finished, for growth's chains those its links finished, for the timeline
// those the order finished (it reads the order's ops). Call with the lock held.
static uint64_t scan_avail(const replay_par_t *p, const scanner_t *sc) {
    return sc->kind == SCAN_APPLY            ? ordered_done(p)
           : sc->kind == SCAN_GROWTH_CHAINS ? p->scanners[p->growth_links].done
           : sc->kind == SCAN_TIMELINE      ? p->scanners[SCAN_ORDER].done
                                            : p->ready;
}

static void *scan_main(void *arg) {
    scanner_t *sc = arg;
    replay_par_t *p = sc->p;
    static const char *const names[] = {[SCAN_ORDER] = "hp-scan-order", [SCAN_PEAK] = "hp-scan-peak",
                                        [SCAN_APPLY] = "hp-scan-apply",
                                        [SCAN_GROWTH] = "hp-growth-links",
                                        [SCAN_GROWTH_CHAINS] = "hp-growth-chain",
                                        [SCAN_TIMELINE] = "hp-timeline"};
    (void)pthread_setname_np(pthread_self(), names[sc->kind]); // HEAPPROF_STAGE_TIMES=2, perf
    pthread_mutex_lock(&p->lock);
    uint64_t t0 = p->timing ? stage_clock_ns() : 0;
    for (;;) {
        // the order's rounds come to the apply threads before the stop (growth's links' to its
        // chains): they stop after them
        while (!p->scan_stop && sc->done == scan_avail(p, sc))
            pthread_cond_wait(&p->scan_go, &p->lock);
        if (sc->done == scan_avail(p, sc) && scan_avail(p, sc) == p->ready)
            break; // stopped, and every round scanned
        if (sc->done == scan_avail(p, sc)) { // the scan before it is still at work
            pthread_cond_wait(&p->scan_go, &p->lock);
            continue;
        }
        uint64_t k = sc->done + 1;
        pthread_mutex_unlock(&p->lock);
        uint64_t t1 = p->timing ? stage_clock_ns() : 0;
        scan_round(p, sc, k);
        if (p->timing) {
            uint64_t t2 = stage_clock_ns();
            sc->ns_wait += t1 - t0;
            sc->ns_work += t2 - t1;
            t0 = t2;
        }
        pthread_mutex_lock(&p->lock);
        scan_mark_done(p, sc, k);
    }
    pthread_mutex_unlock(&p->lock);
    return NULL;
}

// Starts a scanner on a thread of its own; if none can be made, the caller's thread runs its
// scans after each round (slower, the same figures).
static void scanner_start(replay_par_t *p, unsigned kind, unsigned part) {
    scanner_t *sc = &p->scanners[p->n_scanners++];
    *sc = (scanner_t){.p = p, .kind = kind, .part = part};
    sc->threaded = start_thread(p, &sc->thread, scan_main, sc);
}

// Waits until every scan has finished round `upto`. Call with the lock held.
static void wait_scans(replay_par_t *p, uint64_t upto) {
    for (unsigned i = 0; i < p->n_scanners; i++)
        while (p->scanners[i].done < upto)
            pthread_cond_wait(&p->scanned, &p->lock);
}

// Publishes round `round` over the pieces p->seg_list[0..n_segs) (n events in all) and the
// batches p->gone it takes the last events of (the pieces move to its pub_round, the batches
// to its round buffer (sites) or run_gone (totals), so the next round can be listed
// meanwhile); the caller's thread works on its share if it has one. No lock: the round is
// written before `go` changes, and read by the others after. Round round - 2 must be complete.
static void publish_round(replay_par_t *p, size_t n_segs, size_t n, uint64_t round) {
    pub_round_t *pr = pub_of(p, round);
    round_seg_t *segs = pr->segs;
    size_t seg_cap = pr->seg_cap;
    pr->segs = p->seg_list;
    pr->seg_cap = p->seg_cap;
    p->seg_list = segs;
    p->seg_cap = seg_cap;
    pr->n_segs = n_segs;
    pr->n = n;
    if (p->sites) {
        // the round's events stay where they are until its scans are done: its buffer keeps
        // the batches (give_back_round)
        round_buf_t *b = &p->buf[round % p->depth];
        if (p->n_gone) {
            b->gone = xgrow(b->gone, &b->gone_cap, b->n_gone + p->n_gone, sizeof *b->gone);
            memcpy(b->gone + b->n_gone, p->gone, p->n_gone * sizeof *b->gone);
            b->n_gone += p->n_gone;
        }
    } else {
        void **gone = p->run_gone;
        size_t gone_cap = p->run_gone_cap;
        p->run_gone = p->gone;
        p->run_gone_cap = p->gone_cap;
        p->n_run_gone = p->n_gone;
        p->gone = gone;
        p->gone_cap = gone_cap;
    }
    p->n_gone = 0;
    p->round = round;
    if (p->timing)
        pr->at_go = stage_clock_ns();
    atomic_store(&p->go.v, (uint32_t)round);
    ww_wake(&p->go);
    if (p->caller_works) {
        uint64_t t0 = p->timing ? stage_clock_ns() : 0;
        work(p, &p->threads[0], round);
        if (p->timing)
            p->threads[0].ns_work += stage_clock_ns() - t0;
    }
}

// Gives back the batches of the round buffer b held: every scan must be done with its round.
static void give_back_round(replay_par_t *p, round_buf_t *b) {
    for (size_t i = 0; i < b->n_gone; i++)
        p->batch_done(p->batch_ctx, b->gone[i]);
    b->n_gone = 0;
}

// HEAPPROF_STAGE_TIMES=2: round r's shard threads' start lags and the spreads of their
// barrier arrivals and ends (each thread wrote its times before it arrived at `finished`; one
// already at round r + 1 is left out).
static void note_spreads(replay_par_t *p, uint64_t r) {
    uint64_t lag_sum = 0, lag_max = 0, part_lo = UINT64_MAX, part_hi = 0, end_lo = UINT64_MAX,
             end_hi = 0;
    const uint64_t at_go = pub_of(p, r)->at_go;
    unsigned n = 0;
    for (unsigned i = 0; i < p->n_threads; i++) {
        shard_thread_t *th = &p->threads[i];
        // a thread that applied no shard of this round (or has not said so yet) is left out
        if (atomic_load_explicit(&th->at_round, memory_order_relaxed) != r)
            continue;
        uint64_t start = atomic_load_explicit(&th->at_start, memory_order_relaxed),
                 free = atomic_load_explicit(&th->at_free, memory_order_relaxed),
                 parted = atomic_load_explicit(&th->at_parted, memory_order_relaxed),
                 end = atomic_load_explicit(&th->at_end, memory_order_relaxed);
        // from when it could have started: the round's publication, or if it was still at the
        // round before then (the next is published while one runs), its end of that
        const uint64_t from = free > at_go ? free : at_go;
        uint64_t lag = start > from ? start - from : 0;
        n++;
        lag_sum += lag;
        lag_max = lag > lag_max ? lag : lag_max;
        part_lo = parted < part_lo ? parted : part_lo;
        part_hi = parted > part_hi ? parted : part_hi;
        end_lo = end < end_lo ? end : end_lo;
        end_hi = end > end_hi ? end : end_hi;
    }
    if (!n)
        return;
    p->ns_lag_mean += lag_sum / n;
    p->ns_lag_max += lag_max;
    p->ns_parted_spread += part_hi - part_lo;
    p->ns_end_spread += end_hi - end_lo;
}

// Waits until every published round up to `upto` is complete; then each goes to its scans
// (sites: the caller's thread runs those that have no thread) or gives back the batches it
// copied from (totals). Rounds complete in order: each shard applies them in turn.
static void complete_rounds(replay_par_t *p, uint64_t upto) {
    if (upto > p->round)
        upto = p->round;
    while (p->complete < upto) {
        const uint64_t k = p->complete + 1;
        uint64_t t0 = p->timing ? stage_clock_ns() : 0;
        ww_wait_reach(&p->finished[k & 1], round_target(k, p->n_shards));
        if (p->timing) {
            p->ns_wait_shards += stage_clock_ns() - t0;
            note_spreads(p, k);
        }
        p->complete = k;
        if (!p->sites) {
            for (size_t i = 0; i < p->n_run_gone; i++)
                p->batch_done(p->batch_ctx, p->run_gone[i]);
            p->n_run_gone = 0;
            continue;
        }
        pthread_mutex_lock(&p->lock);
        p->ready = k;
        pthread_cond_broadcast(&p->scan_go);
        pthread_mutex_unlock(&p->lock);
        for (unsigned i = 0; i < p->n_scanners; i++) {
            scanner_t *sc = &p->scanners[i];
            if (sc->threaded)
                continue;
            pthread_mutex_lock(&p->lock);
            while (scan_avail(p, sc) < k) // an apply after an order on its own thread
                pthread_cond_wait(&p->scanned, &p->lock);
            pthread_mutex_unlock(&p->lock);
            scan_round(p, sc, k);
            pthread_mutex_lock(&p->lock);
            scan_mark_done(p, sc, k);
            pthread_mutex_unlock(&p->lock);
        }
    }
}

// One round of n events in seg_list with sites: published once round k - 2 is complete (its
// pub_round is k's), so the shards find round k while they may still finish round k - 1 and
// the scans of rounds k - D + 1 .. k - 2 may still run; then round k - 1 goes to the scans,
// and the caller's thread goes on to list round k + 1.
static void run_sites_round(replay_par_t *p, size_t n_segs, size_t n) {
    start_apply(p);
    uint64_t k = p->round + 1;
    complete_rounds(p, k - 2); // usually done already: the caller completed it after k - 1
    const unsigned d = p->depth;
    round_buf_t *b = &p->buf[k % d];
    const size_t n_ops = 2 * n;
    bool grow = b->ev_cap < n || b->found_cap < n || b->site_of_cap < n || b->ops_cap < n_ops ||
                b->bump_cap < n + 1 || (p->growth && b->cw_cap < n) ||
                (p->keep && b->verdict_cap < n);
    // b was round k - D's: its scans must be done with it. To grow it, every scan must be done
    // (the order's scans of rounds k - D + 1 .. k - 1 read b's site_of, and all read the
    // pointers of every buf's), so round k - 1 too; rounds grow rarely, at the start.
    uint64_t t0 = p->timing ? stage_clock_ns() : 0;
    if (grow)
        complete_rounds(p, k - 1);
    pthread_mutex_lock(&p->lock);
    wait_scans(p, grow ? k - 1 : k >= d ? k - d : 0);
    pthread_mutex_unlock(&p->lock);
    if (p->timing)
        p->ns_wait_scans += stage_clock_ns() - t0;
    give_back_round(p, b); // round k - D's batches: its scans are done
    if (grow) {
        if (b->ev_cap < n)
            b->ev = xgrow(b->ev, &b->ev_cap, n, sizeof *b->ev);
        if (b->found_cap < n)
            b->found = xgrow(b->found, &b->found_cap, n, sizeof *b->found);
        if (b->site_of_cap < n)
            b->site_of = xgrow(b->site_of, &b->site_of_cap, n, sizeof *b->site_of);
        if (p->growth && b->cw_cap < n)
            b->cw = xgrow(b->cw, &b->cw_cap, n, sizeof *b->cw);
        if (p->keep && b->verdict_cap < n)
            b->verdict = xgrow(b->verdict, &b->verdict_cap, n, sizeof *b->verdict);
        if (b->ops_cap < n_ops)
            b->ops = xgrow(b->ops, &b->ops_cap, n_ops, sizeof *b->ops);
        if (b->bump_cap < n + 1)
            b->bump = xgrow(b->bump, &b->bump_cap, n + 1, sizeof *b->bump);
    }
    b->n = n;
    b->round = k;
    pub_round_t *pr = pub_of(p, k); // round k - 2's, complete
    pr->rptr = b->ev;
    b->sr = (replay_scan_round_t){.ev = b->ev, .n = n, .round = k, .found = b->found,
                                  .verdict = p->keep ? b->verdict : NULL,
                                  .site_of = b->site_of, .ops = b->ops,
                                  .bump = b->bump};
    if (p->keep)
        set_verdicts(p, b->verdict, n_segs);
    if (p->growth) // round k - D's, which growth keeps until its scan of round k
        pr->gfix = growth_scan_fixes(p->growth, k, &pr->n_gfix);
    publish_round(p, n_segs, n, k);
    // the caller's thread that worked on round k waits for it; else round k - 1 goes to the
    // scans now, while the shard threads that are done with it go on with round k (round k,
    // at the next round, or the finish)
    complete_rounds(p, p->caller_works ? k : k - 1);
}

// One round of n events in seg_list: all shards in parallel, then the ordered scan for the
// peak (totals) or the scans' turn (sites).
static void run_round(replay_par_t *p, size_t n_segs, size_t n) {
    if (p->sites) {
        run_sites_round(p, n_segs, n);
        return;
    }
    if (p->steps_cap < n)
        p->steps = xgrow(p->steps, &p->steps_cap, n, sizeof *p->steps);
    if (p->tev_cap < n)
        p->tev = xgrow(p->tev, &p->tev_cap, n, sizeof *p->tev);
    if (p->keep) {
        if (p->verdict_cap < n)
            p->verdict = xgrow(p->verdict, &p->verdict_cap, n, sizeof *p->verdict);
        set_verdicts(p, p->verdict, n_segs);
    }
    publish_round(p, n_segs, n, p->round + 1);
    complete_rounds(p, p->round); // one round at a time: the steps are read next

    // the live totals event by event, in stream order: a peak is taken where a counted
    // allocation strictly exceeds it, as replay.c does, so it is the first moment of the maximum
    const reader_event_t *ev = p->tev;
    uint64_t live = p->live_bytes, blocks = p->live_blocks, peak = p->peak_bytes;
    for (size_t i = 0; i < n; i++) {
        const replay_step_t *s = &p->steps[i];
        live += s->live_bytes;
        blocks += (uint64_t)(int64_t)(int32_t)s->live_blocks;
        if (s->counted_alloc && live > peak) {
            peak = live;
            p->peak_blocks = blocks;
            p->peak_time_ns = ev[i].time_ns;
        }
    }
    p->live_bytes = live;
    p->live_blocks = blocks;
    p->peak_bytes = peak;
}

// Runs one round over the oldest waiting events, at most round_max of them: lists their
// pieces, runs it; the batches whose last events it took go back once it is done with them.
static void next_round(replay_par_t *p) {
    size_t want = p->n_pend_ev < p->round_max ? p->n_pend_ev : p->round_max, n = 0, n_segs = 0;
    while (n < want) {
        pend_t *q = &p->pend[p->pend_head];
        size_t k = q->n < want - n ? q->n : want - n;
        if (n_segs == p->seg_cap)
            p->seg_list = xgrow(p->seg_list, &p->seg_cap, n_segs + 1, sizeof *p->seg_list);
        const reader_event_t *ev = q->ev ? q->ev : p->held + q->held_off;
        p->seg_list[n_segs++] = (round_seg_t){.ev = ev, .at = n, .n = k};
        n += k;
        if (k < q->n) { // the rest waits for the next round
            if (q->ev)
                q->ev += k;
            else
                q->held_off += k;
            q->n -= k;
            break;
        }
        if (q->batch) {
            if (p->n_gone == p->gone_cap)
                p->gone = xgrow(p->gone, &p->gone_cap, p->n_gone + 1, sizeof *p->gone);
            p->gone[p->n_gone++] = q->batch;
        }
        p->pend_head++;
    }
    p->n_pend_ev -= n;
    run_round(p, n_segs, n); // its batches go back once it is done with them (complete_rounds)
    if (p->pend_head == p->n_pend) {
        p->pend_head = p->n_pend = 0;
        p->n_held = 0;
    }
}

static void pend_add(replay_par_t *p, const reader_event_t *ev, size_t n, void *batch) {
    if (p->n_pend == p->pend_cap) {
        if (p->pend_head) { // move the waiting ones to the front
            memmove(p->pend, p->pend + p->pend_head, (p->n_pend - p->pend_head) * sizeof *p->pend);
            p->n_pend -= p->pend_head;
            p->pend_head = 0;
        } else {
            p->pend = xgrow(p->pend, &p->pend_cap, p->n_pend + 1, sizeof *p->pend);
        }
    }
    p->pend[p->n_pend++] = (pend_t){.ev = ev, .n = n, .batch = batch};
    p->n_pend_ev += n;
}

void replay_par_events(replay_par_t *p, const reader_event_t *ev, size_t n) {
    if (n == 0)
        return;
    pend_add(p, ev, n, NULL);
    while (p->n_pend_ev && p->n_pend_ev >= p->round_min)
        next_round(p);
    complete_rounds(p, p->round); // a round in flight may still read held, or ev
    if (p->sites) {
        // and its scans read them where they lie: all done before ev goes back to the caller
        // and held changes (this path is the tests' and the one-off callers': kept batches,
        // replay_par_events_kept, are analyze's)
        pthread_mutex_lock(&p->lock);
        wait_scans(p, p->round);
        pthread_mutex_unlock(&p->lock);
    }
    if (p->n_pend == p->pend_head)
        return;
    // what is left of ev waits, copied, for the next round (the rest of p->pend is either
    // kept batches or already copied)
    pend_t *q = &p->pend[p->n_pend - 1];
    // what was held and has gone into rounds makes room first: the held events still waiting
    // move to the front (fewer than a round's)
    size_t from = p->n_held;
    for (size_t i = p->pend_head; i < p->n_pend - 1; i++)
        if (!p->pend[i].ev) {
            from = p->pend[i].held_off;
            break;
        }
    if (from) {
        memmove(p->held, p->held + from, (p->n_held - from) * sizeof *p->held);
        for (size_t i = p->pend_head; i < p->n_pend - 1; i++)
            p->pend[i].held_off -= p->pend[i].ev ? 0 : from;
        p->n_held -= from;
    }
    p->held = xgrow(p->held, &p->held_cap, p->n_held + q->n, sizeof *p->held);
    memcpy(p->held + p->n_held, q->ev, q->n * sizeof *q->ev);
    q->ev = NULL;
    q->held_off = p->n_held;
    p->n_held += q->n;
}

void replay_par_events_kept(replay_par_t *p, const reader_event_t *ev, size_t n, void *batch) {
    if (n == 0) {
        p->batch_done(p->batch_ctx, batch);
        return;
    }
    pend_add(p, ev, n, batch);
    while (p->n_pend_ev && p->n_pend_ev >= p->round_min)
        next_round(p);
}

void replay_par_set_batch_done(replay_par_t *p, replay_batch_done_fn done, void *ctx) {
    p->batch_done = done;
    p->batch_ctx = ctx;
}

void replay_par_set_growth(replay_par_t *p, growth_t *g) {
    p->growth = g;
    growth_scan_start(g, p->depth);
    for (unsigned s = 0; s < p->n_shards; s++)
        replay_shard_keep_words(p->shards[s]);
    // beside the sites' scans: they share what the shards found
    p->growth_links = p->n_scanners;
    scanner_start(p, SCAN_GROWTH, 0);
    scanner_start(p, SCAN_GROWTH_CHAINS, 0);
    set_spin(p);
}

void replay_par_set_timeline(replay_par_t *p, timeline_t *tl) {
    if (!p->sites)
        return; // the timeline reads the sites' ops
    p->timeline = tl;
    scanner_start(p, SCAN_TIMELINE, 0);
    set_spin(p);
}

void replay_par_set_depth(replay_par_t *p, unsigned depth) {
    if (!p->sites)
        return; // one round at a time: the caller's thread adds up the steps before the next
    p->depth = depth < 2 ? 2 : depth > REPLAY_DEPTH_MAX ? REPLAY_DEPTH_MAX : depth;
    for (unsigned s = 0; s < p->n_shards; s++)
        replay_shard_set_depth(p->shards[s], p->depth);
    if (p->growth)
        growth_scan_start(p->growth, p->depth);
}

unsigned replay_par_depth(const replay_par_t *p) { return p->depth; }

void replay_par_set_round(replay_par_t *p, size_t min_events, size_t max_events) {
    p->round_max = max_events ? max_events : 1;
    if (p->round_max > ROUND_MAX)
        p->round_max = ROUND_MAX;
    p->round_min = min_events < p->round_max ? min_events : p->round_max;
}

// HEAPPROF_STAGE_TIMES=2: what each of replay's threads waited for, summed over its rounds (s):
// where a stage waits on another, the bound is the hand-over, not the work.
static void print_waits(const replay_par_t *p) {
    static const char *const kinds[] = {[SCAN_ORDER] = "order", [SCAN_PEAK] = "peak",
                                        [SCAN_APPLY] = "apply", [SCAN_GROWTH] = "growth-links",
                                        [SCAN_GROWTH_CHAINS] = "growth-chains",
                                        [SCAN_TIMELINE] = "timeline"};
    fprintf(stderr, "replay waits: %llu rounds; the caller %s, waited %.3f s for the scans of "
                    "round k - %u, %.3f for the shard threads\n",
            (unsigned long long)p->round,
            p->caller_works ? "works on shards (thread 0)" : "lists rounds", p->ns_wait_scans / 1e9,
            p->depth, p->ns_wait_shards / 1e9);
    double r = p->round ? (double)p->round : 1;
    fprintf(stderr, "replay waits: a round's shard threads started %.1f us after it was published "
                    "or they were done with the one before (the last %.1f), reached the partition's barrier within %.1f us of the "
                    "first and finished within %.1f us of the first (means a round)\n",
            p->ns_lag_mean / r / 1e3, p->ns_lag_max / r / 1e3, p->ns_parted_spread / r / 1e3,
            p->ns_end_spread / r / 1e3);
    for (unsigned i = 0; i < p->n_threads; i++) {
        const shard_thread_t *th = &p->threads[i];
        fprintf(stderr, "replay waits: shard thread %u worked %.3f s, waited %.3f for a round, "
                        "%.3f at the partition\n",
                i, th->ns_work / 1e9, th->ns_go / 1e9, th->ns_parted / 1e9);
    }
    for (unsigned i = 0; i < p->n_scanners; i++) {
        const scanner_t *sc = &p->scanners[i];
        fprintf(stderr, "replay waits: scan %s %u worked %.3f s, waited %.3f\n", kinds[sc->kind],
                sc->part, sc->ns_work / 1e9, sc->ns_wait / 1e9);
    }
}

void replay_par_finish(replay_par_t *p) {
    while (p->n_pend_ev)
        next_round(p);
    complete_rounds(p, p->round);
    start_apply(p); // no round ran: the merge still wants the parts it splits into
    atomic_store(&p->stop, true);
    atomic_fetch_add(&p->go.v, 1);
    ww_wake(&p->go);
    pthread_mutex_lock(&p->lock);
    p->scan_stop = true; // the scans finish the rounds they were given first
    pthread_cond_broadcast(&p->scan_go);
    pthread_mutex_unlock(&p->lock);
    for (unsigned i = p->caller_works ? 1 : 0; i < p->n_threads; i++)
        pthread_join(p->threads[i].thread, NULL);
    for (unsigned i = 0; i < p->n_scanners; i++)
        if (p->scanners[i].threaded)
            pthread_join(p->scanners[i].thread, NULL);
    // every scan is done: the rounds still holding batches, oldest first (batches go back in
    // the order they came)
    if (p->sites)
        for (uint64_t k = p->round >= p->depth ? p->round - p->depth + 1 : 0; k <= p->round; k++)
            give_back_round(p, &p->buf[k % p->depth]);
    if (p->timing)
        print_waits(p);
    for (unsigned s = 0; s < p->n_shards; s++) {
        if (!p->sites)
            replay_merge_shard(p->into, p->shards[s]);
        replay_free(p->shards[s]);
    }
    if (!p->sites) // with sites the scans kept every figure in `into` itself
        replay_set_peak(p->into, p->peak_bytes, p->peak_blocks, p->peak_time_ns);
    else
        replay_scan_merge(p->into);
    for (unsigned k = 0; k < 2; k++) {
        for (unsigned q = 0; q < p->n_parts; q++) {
            free(p->pub[k].parts[q].idx);
            free(p->pub[k].parts[q].evp);
        }
        free(p->pub[k].segs);
    }
    pthread_mutex_destroy(&p->lock);
    pthread_cond_destroy(&p->scan_go);
    pthread_cond_destroy(&p->scanned);
    for (unsigned k = 0; k < REPLAY_DEPTH_MAX; k++) {
        round_buf_t *b = &p->buf[k];
        free(b->ev);
        free(b->gone);
        free(b->found);
        free(b->site_of);
        free(b->cw);
        free(b->verdict);
        free(b->ops);
        free(b->bump);
    }
    free(p->steps);
    free(p->verdict);
    free(p->tev);
    free(p->seg_list);
    free(p->run_gone);
    free(p->pend);
    free(p->gone);
    free(p->held);
    free(p);
}
