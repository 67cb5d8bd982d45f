// SPDX-License-Identifier: MIT
// replay_par against the one-thread replay: the same totals, field for field, over hand-made
// cases where blocks, frees, reallocs, double allocations and peaks cross from one round to the
// next and from one shard to another, and over random streams with 2-16 threads, rounds of 1 to
// 16384 events and batches of random sizes, with and without a filter, each batch given either
// to be copied (replay_par_events) or kept until replay_par gives it back (_kept).
#include "model/replay_par.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

// Block serials in different shards: groups of 64 serials go round the shards.
#define SHARD_A(i) (0x40 * 0 + 1 + (i))
#define SHARD_B(i) (0x40 * 1 + 1 + (i))

static reader_event_t alloc_ev(uint64_t t, uint32_t tid, uint64_t addr, uint64_t size) {
    return (reader_event_t){.kind = READER_ALLOC,
                            .sub = READER_MALLOC,
                            .tid = tid,
                            .time_ns = t,
                            .stack = 1 + addr % 5,
                            .addr = addr,
                            .size = size};
}

static reader_event_t free_ev(uint64_t t, uint32_t tid, uint64_t addr) {
    return (reader_event_t){.kind = READER_FREE, .tid = tid, .time_ns = t, .addr = addr};
}

static reader_event_t alloc_at(uint64_t t, uint32_t tid, uint64_t addr, uint64_t size,
                               uint64_t stack) {
    reader_event_t e = alloc_ev(t, tid, addr, size);
    e.stack = stack;
    return e;
}

static void one_thread(replay_totals_t *out, const reader_event_t *ev, size_t n,
                       replay_keep_fn keep) {
    replay_t *rp = replay_new(keep, NULL);
    replay_events(rp, ev, n);
    *out = *replay_totals(rp);
    replay_free(rp);
}

// Batches given to replay_par_events_kept: each a copy of its own, freed when replay_par gives
// it back (so a read after that is a use after free under ASan), in the order given.
typedef struct kept {
    reader_event_t *ev;
    uint64_t seq;
} kept_t;

typedef struct kept_log {
    uint64_t given, back; // batches given, given back
    bool in_order;
} kept_log_t;

static void kept_done(void *ctx, void *batch) {
    kept_log_t *log = ctx;
    kept_t *k = batch;
    log->in_order &= k->seq == log->back;
    log->back++;
    free(k->ev);
    free(k);
}

// Feeds ev[0..n) to p as replay_par_events does, or (by the seed's bit) as a kept batch.
static void feed(replay_par_t *p, kept_log_t *log, const reader_event_t *ev, size_t n,
                 uint64_t seed) {
    if (!(seed >> 40 & 1)) {
        replay_par_events(p, ev, n);
        return;
    }
    kept_t *k = malloc(sizeof *k);
    k->ev = malloc(n * sizeof *ev);
    memcpy(k->ev, ev, n * sizeof *ev);
    k->seq = log->given++;
    replay_par_events_kept(p, k->ev, n, k);
}

static void feed_start(replay_par_t *p, kept_log_t *log) {
    *log = (kept_log_t){.in_order = true};
    replay_par_set_batch_done(p, kept_done, log);
}

static void feed_check(const kept_log_t *log) {
    cr_expect_eq(log->back, log->given, "every kept batch given back");
    cr_expect(log->in_order, "kept batches given back in order");
}

// Feeds ev in batches of `batch` events (0: random sizes) to replay_par with the given threads
// and rounds of at most round_max events.
static void parallel(replay_totals_t *out, const reader_event_t *ev, size_t n,
                     replay_keep_fn keep, unsigned threads, size_t round_min, size_t round_max,
                     size_t batch, uint64_t seed) {
    replay_t *rp = replay_new(keep, NULL);
    replay_par_t *p = replay_par_new(rp, 0, threads, keep, NULL);
    replay_par_set_round(p, round_min, round_max);
    kept_log_t log;
    feed_start(p, &log);
    size_t i = 0;
    while (i < n) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = batch ? batch : 1 + (size_t)(seed >> 33) % 3000;
        if (k > n - i)
            k = n - i;
        feed(p, &log, ev + i, k, seed);
        i += k;
    }
    replay_par_finish(p);
    feed_check(&log);
    *out = *replay_totals(rp);
    replay_free(rp);
}

static void expect_same(const replay_totals_t *want, const replay_totals_t *got, const char *what) {
    cr_expect_eq(got->n_blocks, want->n_blocks, "%s: n_blocks", what);
    cr_expect_eq(got->n_bytes, want->n_bytes, "%s: n_bytes", what);
    cr_expect_eq(got->n_frees, want->n_frees, "%s: n_frees", what);
    cr_expect_eq(got->n_events, want->n_events, "%s: n_events", what);
    cr_expect_eq(got->live_bytes, want->live_bytes, "%s: live_bytes", what);
    cr_expect_eq(got->live_blocks, want->live_blocks, "%s: live_blocks", what);
    cr_expect_eq(got->peak_bytes, want->peak_bytes, "%s: peak_bytes", what);
    cr_expect_eq(got->peak_blocks, want->peak_blocks, "%s: peak_blocks", what);
    cr_expect_eq(got->peak_time_ns, want->peak_time_ns, "%s: peak_time_ns", what);
    cr_expect_eq(got->n_threads, want->n_threads, "%s: n_threads", what);
    cr_expect_eq(got->last_time_ns, want->last_time_ns, "%s: last_time_ns", what);
    cr_expect_eq(got->n_unknown_frees, want->n_unknown_frees, "%s: unknown frees", what);
    cr_expect_eq(got->n_double_allocs, want->n_double_allocs, "%s: double allocs", what);
    // and every field, the ones a later change adds included
    cr_expect(memcmp(got, want, sizeof *got) == 0, "%s: totals differ", what);
}

// Rounds of two events, two shards: the first maximum (150) is reached in round 1 and reached
// again, in the other shard, in round 2 (not a new peak); the new one (151) is in round 3.
Test(replay_par, peak_is_the_first_moment_across_rounds_and_shards) {
    reader_event_t ev[] = {
        alloc_ev(1, 1, SHARD_A(0), 100), alloc_ev(2, 1, SHARD_B(0), 50), // 150 at t=2
        free_ev(3, 2, SHARD_A(0)),       alloc_ev(4, 2, SHARD_B(1), 100), // 150 at t=4: a tie
        alloc_ev(5, 1, SHARD_A(1), 1),   free_ev(6, 1, SHARD_A(1)),       // 151 at t=5
        free_ev(7, 1, SHARD_B(0)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    replay_totals_t got;
    parallel(&got, ev, n, NULL, 2, 2, 2, 1, 0);
    cr_assert_eq(got.peak_bytes, 151);
    cr_assert_eq(got.peak_blocks, 3);
    cr_assert_eq(got.peak_time_ns, 5);
    cr_assert_eq(got.live_bytes, 100);
    cr_assert_eq(got.live_blocks, 1);
    cr_assert_eq(got.n_frees, 3);
    cr_assert_eq(got.n_threads, 2);
    replay_totals_t want;
    one_thread(&want, ev, n, NULL);
    expect_same(&want, &got, "hand-made");
    // with the first 150 cut off, the tie at t=4 is the first moment of 150... until t=5
    parallel(&got, ev + 2, 3, NULL, 2, 1, 1, 1, 0);
    one_thread(&want, ev + 2, 3, NULL);
    expect_same(&want, &got, "tail");
}

// A block freed rounds after it was made, a realloc whose halves fall in different shards and
// rounds, an allocation at an address still live from an earlier round, and a free of a block
// never seen: the same counts as on one thread, and the exact ones below.
Test(replay_par, blocks_cross_rounds_and_shards) {
    reader_event_t ev[] = {
        alloc_ev(1, 1, SHARD_A(0), 10),
        alloc_ev(2, 1, SHARD_B(0), 20),
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 3,
         .addr = SHARD_A(0)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 4, .stack = 2,
         .addr = SHARD_B(5), .old_addr = SHARD_A(0), .size = 300}, // 320 live: the peak
        alloc_ev(5, 3, SHARD_B(0), 7), // B(0) still live: a double alloc, 20 replaced by 7
        free_ev(6, 4, SHARD_A(9)),     // never allocated
        free_ev(7, 1, SHARD_B(5)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    replay_totals_t want, got;
    one_thread(&want, ev, n, NULL);
    cr_assert_eq(want.peak_bytes, 320);
    cr_assert_eq(want.n_double_allocs, 1);
    cr_assert_eq(want.n_unknown_frees, 1);
    cr_assert_eq(want.n_events, 6);
    for (unsigned threads = 2; threads <= 16; threads *= 2)
        for (size_t round = 1; round <= n; round++) {
            parallel(&got, ev, n, NULL, threads, round, round, 1, 0);
            expect_same(&want, &got, "crossing");
        }
    cr_expect_eq(got.live_bytes, 7);
    cr_expect_eq(got.n_threads, 3); // 1, 3 and 4 (whose free was of no known block)
}

static bool keep_even_stacks(void *ctx, const reader_event_t *ev) {
    (void)ctx;
    return ev->stack % 2 == 0;
}

// Random churn over 4096 serials (64 groups: every shard) by 6 threads (tid 0 among them):
// allocations (some at live addresses), frees (some of dead ones, some measured for touch),
// reallocs in two halves, calloc blocks, module events, live blocks measured as at exit.
static size_t random_stream(reader_event_t *ev, size_t cap, uint64_t seed) {
    enum { SLOTS = 4096 };
    static uint64_t live[SLOTS], live_size[SLOTS];
    memset(live, 0, sizeof live);
    size_t n = 0;
    uint64_t t = 0;
    while (n + 2 <= cap) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = seed >> 16;
        uint64_t addr = 1 + r % SLOTS;
        uint32_t tid = (uint32_t)((r >> 12) % 6);
        unsigned what = (unsigned)((r >> 20) % 100);
        uint64_t size = (r >> 28) % 3000;
        t += (r >> 40) % 3; // ties in time too
        if (what < 3) {
            ev[n++] = (reader_event_t){.kind = READER_MODULE_LOAD, .tid = tid, .time_ns = t};
        } else if (what < 8) { // an allocation whatever is live there
            ev[n++] = alloc_ev(t, tid, addr, size);
            live[addr - 1] = 1;
            live_size[addr - 1] = size;
        } else if (what < 14) { // a realloc of a live block to another address
            if (!live[addr - 1])
                continue;
            uint64_t to = 1 + (r >> 33) % SLOTS;
            if (live[to - 1] && to != addr)
                continue;
            ev[n++] = (reader_event_t){.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC,
                                       .tid = tid, .time_ns = t, .addr = addr};
            ev[n++] = (reader_event_t){.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = tid,
                                       .time_ns = t + 1, .stack = 1 + (r >> 50) % 9,
                                       .addr = to, .old_addr = addr, .size = size};
            live[addr - 1] = 0;
            live[to - 1] = 1;
            live_size[to - 1] = size;
        } else if (what >= 96 && live[addr - 1]) { // measured at exit (issue #23): stays live
            reader_event_t e = free_ev(t, tid, addr);
            e.kind = READER_TOUCH_LIVE;
            e.touch = (uint8_t)(1 + (r >> 45) % 4);
            e.touched = (r >> 33) % 4000;
            e.touched_nz = (r >> 44) % 2000;
            ev[n++] = e;
        } else if ((live[addr - 1] || what < 18) && what % 7 == 1) { // a sized free (issue #21)
            reader_event_t e = free_ev(t, tid, addr);
            e.flags = READER_FREE_SIZED;
            e.size = (r >> 46) % 4 ? live_size[addr - 1] : (r >> 33) % 3000; // 1 in 4 mismatch
            ev[n++] = e;
            live[addr - 1] = 0;
        } else if (live[addr - 1] || what < 18) { // a free (of a dead block: unknown)
            reader_event_t e = free_ev(t, tid, addr);
            if (what % 3 == 0) {
                e.touch = (uint8_t)(1 + (r >> 45) % 4);
                e.touched = (r >> 33) % 4000;
                e.touched_nz = (r >> 44) % 2000;
            }
            ev[n++] = e;
            live[addr - 1] = 0;
        } else {
            reader_event_t e = alloc_ev(t, tid, addr, size);
            e.stack = 1 + (r >> 50) % 9;
            if (what % 4 == 0)
                e.sub = READER_CALLOC;
            ev[n++] = e;
            live[addr - 1] = 1;
            live_size[addr - 1] = size;
        }
    }
    return n;
}

Test(replay_par, random_streams_match_one_thread) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}, {16384, 1u << 20}};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        size_t n = random_stream(ev, N, seed);
        for (int filtered = 0; filtered < 2; filtered++) {
            replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
            replay_totals_t want, got;
            one_thread(&want, ev, n, keep);
            cr_assert(want.n_double_allocs > 0 && want.n_unknown_frees > 0 && want.touch_blocks > 0);
            cr_assert(want.touch_live_blocks > 0 && want.touch_pages_blocks > 0);
            cr_assert(want.n_sized_mismatches > 0 && want.n_sized_frees > want.n_sized_mismatches);
            for (unsigned threads = 2; threads <= 16; threads *= 2)
                for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                    // small rounds on a short prefix (each round is a hand-over of threads)
                    size_t m = rounds[k][1] < 64 ? n / 40 : n;
                    if (m != n)
                        one_thread(&want, ev, m, keep);
                    // shards a thread: 1, 2 at 4 threads (8 shards), 4 at 16 (64, the most)
                    setenv("HEAPPROF_REPLAY_SHARDS", threads == 16 ? "4" : threads == 4 ? "2" : "1",
                           1);
                    parallel(&got, ev, m, keep, threads, rounds[k][0], rounds[k][1], 0,
                             seed * 31 + k);
                    unsetenv("HEAPPROF_REPLAY_SHARDS");
                    char what[96];
                    snprintf(what, sizeof what, "seed %llu, filter %d, %u threads, rounds %zu",
                             (unsigned long long)seed, filtered, threads, rounds[k][1]);
                    expect_same(&want, &got, what);
                    if (m != n)
                        one_thread(&want, ev, n, keep);
                }
        }
    }
}

// Fewer threads than asked for (a count that is not a power of two) still gives the same totals.
Test(replay_par, thread_counts_round_down_to_a_power_of_two) {
    enum { N = 20000 };
    static reader_event_t ev[N];
    size_t n = random_stream(ev, N, 99);
    replay_totals_t want, got;
    one_thread(&want, ev, n, NULL);
    unsigned counts[] = {1, 3, 5, 12, 100};
    for (size_t i = 0; i < sizeof counts / sizeof counts[0]; i++) {
        parallel(&got, ev, n, NULL, counts[i], 7, 300, 0, i);
        expect_same(&want, &got, "odd thread count");
    }
}

// ---- per-site figures (REPLAY_SITES, REPLAY_DHAT): shards find, one thread scans in order,
// the sites' own figures on 2 threads from 4 shards on, 1 below (HEAPPROF_REPLAY_APPLY: 1-16) ----

static replay_t *one_thread_rp(const reader_event_t *ev, size_t n, unsigned mode,
                               replay_keep_fn keep) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, mode);
    replay_events(rp, ev, n);
    return rp;
}

// The rounds in flight the hand-made per-site cases run at (replay_par_set_depth): with rounds
// of one event a block's site stays open for up to 8 rounds.
static const unsigned depths[] = {2, 3, 4, 8};
#define N_DEPTHS (sizeof depths / sizeof depths[0])

// tl: a timeline fed by the replay's scan too (replay_par_set_timeline), or NULL.
static replay_t *parallel_rp_timeline(const reader_event_t *ev, size_t n, unsigned mode,
                                      replay_keep_fn keep, unsigned threads, size_t round_min,
                                      size_t round_max, size_t batch, uint64_t seed,
                                      unsigned depth, timeline_t *tl) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, mode);
    replay_par_t *p = replay_par_new(rp, mode, threads, keep, NULL);
    replay_par_set_depth(p, depth);
    cr_assert_eq(replay_par_depth(p), depth);
    replay_par_set_round(p, round_min, round_max);
    if (tl)
        replay_par_set_timeline(p, tl);
    kept_log_t log;
    feed_start(p, &log);
    for (size_t i = 0; i < n;) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = batch ? batch : 1 + (size_t)(seed >> 33) % 3000;
        if (k > n - i)
            k = n - i;
        feed(p, &log, ev + i, k, seed);
        i += k;
    }
    replay_par_finish(p);
    feed_check(&log);
    return rp;
}

static replay_t *parallel_rp(const reader_event_t *ev, size_t n, unsigned mode,
                             replay_keep_fn keep, unsigned threads, size_t round_min,
                             size_t round_max, size_t batch, uint64_t seed, unsigned depth) {
    return parallel_rp_timeline(ev, n, mode, keep, threads, round_min, round_max, batch, seed,
                                depth, NULL);
}

// Every total and every site's every figure, in the same site order.
static void expect_same_sites(replay_t *want, replay_t *got, const char *what) {
    expect_same(replay_totals(want), replay_totals(got), what);
    cr_assert_eq(replay_n_sites(got), replay_n_sites(want), "%s: sites", what);
    for (size_t i = 0; i < replay_n_sites(want); i++) {
        replay_site_t a, b;
        replay_site(want, i, &a);
        replay_site(got, i, &b);
        cr_expect_eq(b.stack, a.stack, "%s: site %zu's stack", what, i);
        cr_expect_eq(b.bytes, a.bytes, "%s: site %zu's bytes", what, i);
        cr_expect_eq(b.max_bytes, a.max_bytes, "%s: site %zu's max", what, i);
        cr_expect_eq(b.peak_bytes, a.peak_bytes, "%s: site %zu's bytes at the peak", what, i);
        cr_expect_eq(b.lifetime_ns, a.lifetime_ns, "%s: site %zu's lifetimes", what, i);
        cr_expect_eq(b.temp_blocks, a.temp_blocks, "%s: site %zu's temporaries", what, i);
        cr_expect(memcmp(&a, &b, sizeof a) == 0, "%s: site %zu differs", what, i);
    }
}

// Rounds of one event, two shards: a realloc whose halves are in different shards and rounds
// keeps the old block's site, though that site was not known to either shard when it stored
// the block; a temporary freed a round later; a double allocation across rounds; DHAT's last
// moment of a tie in a later round.
Test(replay_par, sites_cross_rounds_and_shards) {
    reader_event_t ev[] = {
        alloc_ev(1, 1, SHARD_A(0), 10), // site of stack 1 + A(0) % 5
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 2,
         .addr = SHARD_A(0)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 3, .stack = 77,
         .addr = SHARD_B(3), .old_addr = SHARD_A(0), .size = 40}, // stays with A(0)'s site
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 4,
         .addr = SHARD_B(3)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 5, .stack = 78,
         .addr = SHARD_A(7), .old_addr = SHARD_B(3), .size = 50}, // and again, back in A
        free_ev(6, 1, SHARD_A(7)),        // its thread allocated nothing since: temporary
        alloc_ev(7, 2, SHARD_B(9), 50),   // 50 live again: a tie (DHAT moves its peak here)
        alloc_ev(8, 2, SHARD_B(9), 20),   // at a live address: double alloc, 20 live
        free_ev(9, 2, SHARD_B(9)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT) {
        replay_t *want = one_thread_rp(ev, n, mode, NULL);
        cr_assert_eq(replay_n_sites(want), 2); // 77 and 78 never became sites
        cr_assert_eq(replay_totals(want)->peak_time_ns, mode & REPLAY_DHAT ? 7 : 5);
        for (size_t d = 0; d < N_DEPTHS; d++)
            for (unsigned threads = 2; threads <= 8; threads *= 2)
                for (size_t round = 1; round <= 4; round++) {
                    replay_t *got =
                        parallel_rp(ev, n, mode, NULL, threads, round, round, 1, 0, depths[d]);
                    expect_same_sites(want, got, mode & REPLAY_DHAT ? "dhat" : "sites");
                    replay_site_t s;
                    replay_site(got, 0, &s);
                    cr_expect_eq(s.temp_blocks, 1);
                    cr_expect_eq(s.bytes, 100);
                    replay_free(got);
                }
        replay_free(want);
    }
}

// The shards find round k + 1 while the scan of round k runs, so a block's site may be open
// for two rounds: marks of two rounds live in the shards at once, told apart by the round's
// parity. Rounds of two events: A is made at index 1 of round 1, freed and made again (another
// site) at index 1 of round 2, freed in round 3 (round 1's fix must leave round 2's block
// alone), made a third time in round 3 and freed by another thread in round 5; a realloc's
// halves a round apart keep a site that was open when each half was found.
Test(replay_par, sites_open_for_two_rounds) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_B(1), 5, 9),  // round 1
        alloc_at(2, 1, SHARD_A(0), 10, 1), //   index 1: A, site of stack 1
        free_ev(3, 1, SHARD_A(0)),         // round 2
        alloc_at(4, 2, SHARD_A(0), 20, 2), //   index 1 again: A, site of stack 2
        free_ev(5, 2, SHARD_A(0)),         // round 3: a temporary of site 2
        alloc_at(6, 3, SHARD_A(0), 30, 3), //   index 1: A, site of stack 3
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 7,
         .addr = SHARD_B(1)},                                      // round 4
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 8, .stack = 7,
         .addr = SHARD_B(2), .old_addr = SHARD_B(1), .size = 50}, //   stays with stack 9
        free_ev(9, 4, SHARD_A(0)),         // round 5: made by thread 3, freed by 4
        free_ev(10, 4, SHARD_B(2)),
        alloc_at(11, 4, SHARD_B(2), 1, 9),
    };
    size_t n = sizeof ev / sizeof ev[0];
    for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT) {
        replay_t *want = one_thread_rp(ev, n, mode, NULL);
        cr_assert_eq(replay_n_sites(want), 4);
        for (size_t d = 0; d < N_DEPTHS; d++)
            for (unsigned threads = 2; threads <= 4; threads *= 2)
                for (size_t round = 1; round <= 3; round++) {
                    replay_t *got =
                        parallel_rp(ev, n, mode, NULL, threads, round, round, 1, 0, depths[d]);
                    expect_same_sites(want, got, "open for two rounds");
                    replay_free(got);
                }
        replay_free(want);
    }
}

Test(replay_par, random_streams_match_one_thread_per_site) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}, {16384, 1u << 20}};
    for (uint64_t seed = 1; seed <= 2; seed++) {
        size_t n = random_stream(ev, N, seed);
        for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT)
            for (int filtered = 0; filtered < 2; filtered++) {
                replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
                // the sites' figures on 1, 2 and 4 threads (2 shards, 4, 16 with
                // HEAPPROF_REPLAY_APPLY=4)
                for (unsigned threads = 2; threads <= 16; threads *= threads == 4 ? 4 : 2)
                    for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                        if (threads == 16)
                            setenv("HEAPPROF_REPLAY_APPLY", "4", 1);
                        if (threads == 4) // 16 shards, taken by 4 threads as they come
                            setenv("HEAPPROF_REPLAY_SHARDS", "4", 1);
                        size_t m = rounds[k][1] < 64 ? n / 40 : n;
                        replay_t *want = one_thread_rp(ev, m, mode, keep);
                        replay_t *got = parallel_rp(ev, m, mode, keep, threads, rounds[k][0],
                                                    rounds[k][1], 0, seed * 31 + k, 2);
                        unsetenv("HEAPPROF_REPLAY_SHARDS");
                        char what[112];
                        snprintf(what, sizeof what,
                                 "seed %llu, mode %u, filter %d, %u threads, rounds %zu",
                                 (unsigned long long)seed, mode, filtered, threads, rounds[k][1]);
                        expect_same_sites(want, got, what);
                        replay_free(want);
                        replay_free(got);
                        unsetenv("HEAPPROF_REPLAY_APPLY");
                    }
            }
    }
}

// ---- growth chains (growth.c) in the ordered scan, its words in the shards ----

// Vectors growing on 6 threads (tid 0 among them), each by realloc (moving or in place) or by
// allocate-copy-free (the new block, up to 3 other allocations of the thread, then the free of
// the old one), over 4096 serials (every shard); ended by a free on their own or another thread;
// among them short-lived blocks, frees of unknown blocks, allocations at live addresses (a
// vector's block replaced), touch measures and module events.
static size_t growth_stream(reader_event_t *ev, size_t cap, uint64_t seed) {
    enum { SLOTS = 4096, THREADS = 6 };
    static uint8_t live[SLOTS];
    memset(live, 0, sizeof live);
    struct vec {
        uint64_t addr, size, stack, old; // old: the block a copy step still has to free
        unsigned pending;                // allocations of noise before that free
        bool active, by_copy;
    } vec[THREADS];
    memset(vec, 0, sizeof vec);
    size_t n = 0;
    uint64_t t = 0;
    while (n + 4 <= cap) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        uint64_t r = seed >> 16;
        uint32_t tid = (uint32_t)((r >> 3) % THREADS);
        struct vec *v = &vec[tid];
        unsigned what = (unsigned)((r >> 20) % 100);
        uint64_t addr = 1 + (r >> 33) % SLOTS;
        t += (r >> 45) % 4;
        if (v->old && (v->pending == 0 || what < 40)) { // the copy step's free of the old block
            ev[n++] = free_ev(t, tid, v->old);
            live[v->old - 1] = 0;
            v->old = 0;
        } else if (what < 2) {
            ev[n++] = (reader_event_t){.kind = READER_MODULE_LOAD, .tid = tid, .time_ns = t};
        } else if (what < 3) { // the thread ends; its tid goes on (a TLS destructor, a reuse)
            ev[n++] = (reader_event_t){.kind = READER_THREAD_END, .tid = tid, .time_ns = t};
        } else if (what < 10) { // noise: an allocation wherever, a live block's address too
            reader_event_t e = alloc_ev(t, tid, addr, (r >> 50) % 500);
            e.stack = 20 + (r >> 58) % 4;
            ev[n++] = e;
            live[addr - 1] = 1;
            if (v->pending)
                v->pending--;
        } else if (what < 18) { // noise: a free of whatever is there (a vector's block too)
            reader_event_t e = free_ev(t, tid, addr);
            if (what % 3 == 0) {
                e.touch = (uint8_t)(1 + (r >> 45) % 4);
                e.touched = (r >> 33) % 400;
            }
            ev[n++] = e;
            live[addr - 1] = 0;
        } else if (!v->active) { // a new vector
            if (live[addr - 1])
                continue;
            v->active = true;
            v->by_copy = what % 2;
            v->addr = addr;
            v->stack = 1 + (r >> 56) % 9;
            v->size = what % 3 == 0 ? 4 * 16 + 32 : 8 * (1 + (r >> 50) % 4); // a hashbrown start
            reader_event_t e = alloc_ev(t, tid, addr, v->size);
            e.stack = v->stack;
            ev[n++] = e;
            live[addr - 1] = 1;
        } else if (what < 30) { // the vector ends: freed here or on another thread
            uint32_t by = what % 2 ? tid : (uint32_t)((r >> 7) % THREADS);
            ev[n++] = free_ev(t, by, v->addr);
            live[v->addr - 1] = 0;
            v->active = false;
        } else { // the vector grows
            uint64_t size = what < 70 ? 2 * v->size : what < 85 ? v->size + 24 : v->size / 2;
            if (v->by_copy && !v->old) {
                if (live[addr - 1])
                    continue;
                reader_event_t e = alloc_ev(t, tid, addr, size);
                e.stack = v->stack;
                ev[n++] = e;
                live[addr - 1] = 1;
                v->old = v->addr;
                v->pending = (unsigned)(r >> 60) % 4;
            } else if (!v->by_copy) {
                uint64_t to = what % 4 == 0 ? v->addr : addr; // in place, or moved
                if (to != v->addr && live[to - 1])
                    continue;
                ev[n++] = (reader_event_t){.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC,
                                           .tid = tid, .time_ns = t, .addr = v->addr};
                ev[n++] = (reader_event_t){.kind = READER_ALLOC, .sub = READER_REALLOC,
                                           .tid = tid, .time_ns = t + 1, .stack = 30 + tid,
                                           .addr = to, .old_addr = v->addr, .size = size};
                live[v->addr - 1] = 0;
                live[to - 1] = 1;
            } else {
                continue;
            }
            v->addr = v->by_copy ? addr : ev[n - 1].addr;
            v->size = size;
        }
    }
    return n;
}

static growth_t *growth_one_thread(const reader_event_t *ev, size_t n, replay_keep_fn keep,
                                   uint64_t short_ns) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    growth_t *g = growth_new(short_ns);
    growth_attach(g, rp);
    replay_events(rp, ev, n);
    growth_finish(g);
    replay_free(rp);
    return g;
}

// depth: set after growth joins (replay_par_set_depth passes it on) at odd depths, before at
// even ones, so both orders are used.
static growth_t *growth_parallel(const reader_event_t *ev, size_t n, replay_keep_fn keep,
                                 uint64_t short_ns, unsigned threads, size_t round_min,
                                 size_t round_max, uint64_t seed, unsigned depth) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    growth_t *g = growth_new(short_ns);
    replay_par_t *p = replay_par_new(rp, REPLAY_SITES, threads, keep, NULL);
    if (!(depth & 1))
        replay_par_set_depth(p, depth);
    replay_par_set_growth(p, g);
    if (depth & 1)
        replay_par_set_depth(p, depth);
    replay_par_set_round(p, round_min, round_max);
    kept_log_t log;
    feed_start(p, &log);
    for (size_t i = 0; i < n;) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = 1 + (size_t)(seed >> 33) % 3000;
        if (k > n - i)
            k = n - i;
        feed(p, &log, ev + i, k, seed);
        i += k;
    }
    replay_par_finish(p);
    feed_check(&log);
    growth_finish(g);
    replay_free(rp);
    return g;
}

// Every growth figure of every site, in the same order, and the short-lived counts of every
// stack the streams use.
static void expect_same_growth(const growth_t *want, const growth_t *got, const char *what) {
    cr_assert_eq(growth_n_sites(got), growth_n_sites(want), "%s: growth sites", what);
    for (size_t i = 0; i < growth_n_sites(want); i++) {
        const growth_site_t *a = growth_site(want, i), *b = growth_site(got, i);
        cr_expect_eq(b->stack, a->stack, "%s: growth site %zu's stack", what, i);
        cr_expect_eq(b->n_chains, a->n_chains, "%s: growth site %zu's chains", what, i);
        cr_expect_eq(b->n_steps, a->n_steps, "%s: growth site %zu's steps", what, i);
        cr_expect_eq(b->bytes_copied, a->bytes_copied, "%s: growth site %zu's copies", what, i);
        cr_expect(memcmp(a, b, sizeof *a) == 0, "%s: growth site %zu differs", what, i);
    }
    for (uint64_t stack = 0; stack < 64; stack++) {
        growth_short_t a = growth_short_of(want, stack), b = growth_short_of(got, stack);
        cr_expect(a.blocks == b.blocks && a.bytes == b.bytes, "%s: stack %llu's short-lived",
                  what, (unsigned long long)stack);
    }
}

// A realloc chain whose halves move between shards and rounds, and an allocate-copy-free chain
// whose new block is made in one round, joins the chain in the next (a shard's words fixed a
// round later) and is freed by another thread in the round after: one round of one event.
Test(replay_par, growth_chains_cross_rounds_and_shards) {
    reader_event_t ev[] = {
        alloc_ev(1, 1, SHARD_A(0), 8),
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 2,
         .addr = SHARD_A(0)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 3, .stack = 77,
         .addr = SHARD_B(3), .old_addr = SHARD_A(0), .size = 16},
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 4,
         .addr = SHARD_B(3)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 5, .stack = 78,
         .addr = SHARD_A(7), .old_addr = SHARD_B(3), .size = 32},
        alloc_at(6, 2, SHARD_A(10), 100, 50),
        alloc_at(7, 2, SHARD_B(7), 200, 50),  // the copy
        free_ev(8, 2, SHARD_A(10)),           // links A(10) -> B(7)
        alloc_at(9, 2, SHARD_A(12), 400, 51), // another stack: no link to B(7)
        alloc_at(10, 2, SHARD_B(2), 400, 50), // the second copy
        free_ev(11, 2, SHARD_B(7)),           // links B(7) -> B(2): two copy steps
        free_ev(12, 3, SHARD_B(2)),       // ended on another thread
        free_ev(13, 1, SHARD_A(7)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    growth_t *want = growth_one_thread(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS);
    cr_assert_eq(growth_n_sites(want), 2);
    cr_assert_eq(growth_site(want, 0)->bytes_copied, 300); // the copy chain: 100 + 200
    cr_assert_eq(growth_site(want, 1)->n_realloc_steps, 2);
    for (size_t d = 0; d < N_DEPTHS; d++)
        for (unsigned threads = 2; threads <= 8; threads *= 2)
            for (size_t round = 1; round <= 4; round++) {
                growth_t *got = growth_parallel(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS, threads,
                                                round, round, 0, depths[d]);
                expect_same_growth(want, got, "crossing");
                growth_free(got);
            }
    growth_free(want);
}

// Growth's scan in two passes (growth_scan_links decides, growth_scan_chains links): the
// realloc halves of two threads interleaved, each half in another round (the chains' pass
// keeps each thread's pending block itself), and a copy step's free that is short-lived too
// (both told in one event's bits); rounds of 1 to 4 events, so every pair of halves and every
// copy step crosses a round in some run.
Test(replay_par, growth_two_passes_interleaved_threads) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_A(0), 8, 40),
        alloc_at(2, 2, SHARD_B(0), 8, 41),
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 3,
         .addr = SHARD_A(0)},
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 2, .time_ns = 4,
         .addr = SHARD_B(0)},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 2, .time_ns = 5, .stack = 79,
         .addr = SHARD_A(5), .old_addr = SHARD_B(0), .size = 16}, // thread 2's chain
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 6, .stack = 78,
         .addr = SHARD_B(5), .old_addr = SHARD_A(0), .size = 16}, // thread 1's chain
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 7,
         .addr = SHARD_B(5)},
        alloc_at(8, 3, SHARD_A(20), 100, 50),
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 9, .stack = 78,
         .addr = SHARD_A(6), .old_addr = SHARD_B(5), .size = 32}, // thread 1's again
        alloc_at(10, 3, SHARD_B(20), 200, 50), // the copy
        free_ev(11, 3, SHARD_A(20)),           // a copy step, and short-lived
        alloc_at(12, 3, SHARD_A(21), 400, 50), // the second copy
        free_ev(13, 3, SHARD_B(20)),           // a copy step
        free_ev(14, 2, SHARD_A(5)),            // the chains end, freed by their threads
        free_ev(15, 1, SHARD_A(6)),
        free_ev(16, 1, SHARD_A(21)), // and by another thread
    };
    size_t n = sizeof ev / sizeof ev[0];
    growth_t *want = growth_one_thread(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS);
    cr_assert_eq(growth_n_sites(want), 3);
    cr_assert(growth_short_of(want, 50).blocks >= 1);
    for (size_t d = 0; d < N_DEPTHS; d++)
        for (unsigned threads = 2; threads <= 8; threads *= 2)
            for (size_t round = 1; round <= 4; round++) {
                growth_t *got = growth_parallel(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS, threads,
                                                round, round, 0, depths[d]);
                expect_same_growth(want, got, "two passes");
                growth_free(got);
            }
    growth_free(want);
}

// The sites' peak on its own thread (replay_scan_peak): each event's epoch is handed to the
// apply threads relative to the round's first, so a peak in the last event of a round and a
// site's first change after it in the next (its snapshot), and a tie at the peak's level in a
// later round (DHAT moves its peak there, the first moment does not), on 1, 2 and 4 parts.
Test(replay_par, sites_peak_epochs_across_rounds) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_A(0), 10, 1),
        alloc_at(2, 1, SHARD_B(0), 20, 2),
        alloc_at(3, 2, SHARD_A(1), 30, 3), // 60: the peak, last event of a round of 3
        free_ev(4, 2, SHARD_B(0)),         // site 2's first change after it: 20 at the peak
        alloc_at(5, 1, SHARD_B(1), 5, 2),  // 45
        alloc_at(6, 1, SHARD_A(2), 15, 1), // 60 again: a tie
        free_ev(7, 1, SHARD_A(0)),
        alloc_at(8, 2, SHARD_B(2), 4, 3),
        free_ev(9, 2, SHARD_A(1)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT) {
        replay_t *want = one_thread_rp(ev, n, mode, NULL);
        cr_assert_eq(replay_totals(want)->peak_time_ns, mode & REPLAY_DHAT ? 6 : 3);
        for (size_t d = 0; d < N_DEPTHS; d++)
            for (unsigned threads = 2; threads <= 8; threads *= 2)
                for (size_t round = 1; round <= 4; round++) {
                    // 1 part at 2 shards, 2 at 4, 4 at 8
                    setenv("HEAPPROF_REPLAY_APPLY", threads == 8 ? "4" : "", 1);
                    replay_t *got =
                        parallel_rp(ev, n, mode, NULL, threads, round, round, 1, 0, depths[d]);
                    expect_same_sites(want, got, mode & REPLAY_DHAT ? "dhat epochs" : "epochs");
                    replay_free(got);
                }
        unsetenv("HEAPPROF_REPLAY_APPLY");
        replay_free(want);
    }
}

// A thread's recent allocation freed by another thread, or replaced at its address by one, is
// gone for its allocator's copy step (growth_scan's ring entry, marked from another thread's
// event): each would have been a chain's second copy step, which makes it count; a block older
// than its allocator's last GROWTH_WINDOW allocations freed by another thread; and a two-step
// copy chain among them, which alone counts.
Test(replay_par, growth_recent_block_gone_on_another_thread) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_A(20), 50, 50),
        alloc_at(2, 1, SHARD_A(0), 100, 50),
        free_ev(3, 1, SHARD_A(20)),          // links A(20) -> A(0)
        alloc_at(4, 1, SHARD_B(0), 200, 50), // a copy of A(0) ...
        free_ev(5, 2, SHARD_B(0)),           // ... freed by thread 2
        free_ev(6, 1, SHARD_A(0)),           // no link: B(0) is gone
        alloc_at(7, 1, SHARD_A(21), 50, 52),
        alloc_at(8, 1, SHARD_A(1), 100, 52),
        free_ev(9, 1, SHARD_A(21)),           // links A(21) -> A(1)
        alloc_at(10, 1, SHARD_B(1), 200, 52), // a copy of A(1) ...
        alloc_at(11, 3, SHARD_B(1), 300, 53), // ... replaced by thread 3, no free
        free_ev(12, 1, SHARD_A(1)),           // no link
        alloc_at(13, 1, SHARD_A(2), 100, 54), // out of thread 1's window after four more
        alloc_at(14, 1, SHARD_B(10), 8, 55),
        alloc_at(15, 1, SHARD_B(11), 8, 56),
        alloc_at(16, 1, SHARD_B(12), 8, 57),
        alloc_at(17, 1, SHARD_B(13), 8, 58),
        free_ev(18, 2, SHARD_A(2)),
        alloc_at(19, 1, SHARD_A(3), 100, 60),
        alloc_at(20, 1, SHARD_B(3), 200, 60),
        free_ev(21, 1, SHARD_A(3)), // links A(3) -> B(3)
        alloc_at(22, 1, SHARD_A(4), 400, 60),
        free_ev(23, 1, SHARD_B(3)), // links B(3) -> A(4)
        free_ev(24, 2, SHARD_A(4)),
    };
    size_t n = sizeof ev / sizeof ev[0];
    growth_t *want = growth_one_thread(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS);
    cr_assert_eq(growth_n_sites(want), 1);
    cr_assert_eq(growth_site(want, 0)->stack, 60);
    cr_assert_eq(growth_site(want, 0)->bytes_copied, 300);
    for (size_t d = 0; d < N_DEPTHS; d++)
        for (unsigned threads = 2; threads <= 8; threads *= 2)
            for (size_t round = 1; round <= 4; round++) {
                growth_t *got = growth_parallel(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS, threads,
                                                round, round, 0, depths[d]);
                expect_same_growth(want, got, "gone");
                growth_free(got);
            }
    growth_free(want);
}

// A thread's growth state goes at its end, in the one-thread pass and the scans alike. Three
// threads grow a vector by allocate-copy-free, two steps each (a chain counts from its second
// step); thread 2's second step is freed after its THREAD_END, from a fresh state, so it links
// nothing and stack 20 has no chain; tid 1 comes back (a reused id) and allocates at the same
// stack before the old thread's last block is freed: a new thread, whose recent allocations do
// not include that vector, so no third step. At the end only the states of thread 3 and of
// tid 1's new thread are held, and every figure is the one-thread pass's.
Test(replay_par, growth_lets_ended_threads_go) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_A(0), 100, 10),
        alloc_at(2, 1, SHARD_B(0), 200, 10),
        free_ev(3, 1, SHARD_A(0)),           // thread 1's first step
        alloc_at(4, 1, SHARD_A(4), 400, 10),
        free_ev(5, 1, SHARD_B(0)),           // and its second: stack 10's chain
        alloc_at(6, 2, SHARD_B(5), 100, 20),
        alloc_at(7, 2, SHARD_A(5), 200, 20),
        free_ev(8, 2, SHARD_B(5)),           // thread 2's first step
        alloc_at(9, 2, SHARD_B(6), 400, 20),
        {.kind = READER_THREAD_END, .tid = 2, .time_ns = 10},
        free_ev(11, 2, SHARD_A(5)),          // after its end: no second step
        alloc_at(12, 3, SHARD_A(7), 100, 30),
        alloc_at(13, 3, SHARD_B(7), 200, 30),
        free_ev(14, 3, SHARD_A(7)),
        alloc_at(15, 3, SHARD_A(8), 400, 30),
        free_ev(16, 3, SHARD_B(7)),          // stack 30's chain
        {.kind = READER_THREAD_END, .tid = 1, .time_ns = 17},
        alloc_at(18, 1, SHARD_A(9), 800, 10), // tid 1 again, at stack 10
        free_ev(19, 1, SHARD_A(4)),           // the old thread's vector: no third step
        free_ev(20, 1, SHARD_A(9)),
        free_ev(21, 3, SHARD_B(6)),
        free_ev(22, 3, SHARD_A(8)),
        {.kind = READER_THREAD_END, .tid = 2, .time_ns = 23}, // the state event 11 made goes too
    };
    size_t n = sizeof ev / sizeof ev[0];
    growth_t *want = growth_one_thread(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS);
    cr_assert_eq(growth_threads_held(want), 2, "held %zu", growth_threads_held(want));
    cr_assert_eq(growth_n_sites(want), 2);
    cr_assert_null(growth_site_of(want, 20));
    cr_assert_eq(growth_site_of(want, 10)->n_steps, 2);
    cr_assert_eq(growth_site_of(want, 30)->n_steps, 2);
    for (size_t d = 0; d < N_DEPTHS; d++)
        for (unsigned threads = 2; threads <= 8; threads *= 2)
            for (size_t round = 1; round <= 5; round += 2) {
                growth_t *got = growth_parallel(ev, n, NULL, GROWTH_DEFAULT_SHORT_NS, threads,
                                                round, round, 0, depths[d]);
                expect_same_growth(want, got, "ended threads");
                cr_assert_eq(growth_threads_held(got), 2, "held %zu at %u threads, rounds of %zu",
                             growth_threads_held(got), threads, round);
                growth_free(got);
            }
    growth_free(want);
}

Test(replay_par, random_growth_matches_one_thread) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}, {16384, 1u << 20}};
    for (uint64_t seed = 1; seed <= 3; seed++) {
        size_t n = growth_stream(ev, N, seed);
        for (int filtered = 0; filtered < 2; filtered++) {
            replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
            uint64_t short_ns = seed == 2 ? 0 : 6; // 0: only the thread's last allocation
            growth_t *full = growth_one_thread(ev, n, keep, short_ns);
            size_t chains = 0, copies = 0;
            for (size_t i = 0; i < growth_n_sites(full); i++) {
                chains += growth_site(full, i)->n_chains;
                copies += growth_site(full, i)->n_steps - growth_site(full, i)->n_realloc_steps;
            }
            cr_assert(chains > 100 && copies > 100, "chains %zu, copy steps %zu", chains, copies);
            for (unsigned threads = 2; threads <= 16; threads *= 4)
                for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                    size_t m = rounds[k][1] < 64 ? n / 40 : n;
                    growth_t *want = m == n ? full : growth_one_thread(ev, m, keep, short_ns);
                    if (threads == 8) // growth's words fixed in 32 shards
                        setenv("HEAPPROF_REPLAY_SHARDS", "4", 1);
                    growth_t *got = growth_parallel(ev, m, keep, short_ns, threads, rounds[k][0],
                                                    rounds[k][1], seed * 31 + k, 2);
                    unsetenv("HEAPPROF_REPLAY_SHARDS");
                    char what[96];
                    snprintf(what, sizeof what, "seed %llu, filter %d, %u threads, rounds %zu",
                             (unsigned long long)seed, filtered, threads, rounds[k][1]);
                    expect_same_growth(want, got, what);
                    if (want != full)
                        growth_free(want);
                    growth_free(got);
                }
            growth_free(full);
        }
    }
}

// ---- more rounds in flight (replay_par_set_depth, HEAPPROF_REPLAY_DEPTH) ----

// Rounds of one event: with D rounds in flight a block's site stays open until round + D, so
// at depth 8 every block below is found (freed, replaced, a realloc's old half) while its mark
// is open, some of them D - 1 rounds after it was made, others after the same address was made
// again in another slot.
Test(replay_par, sites_open_for_many_rounds) {
    reader_event_t ev[] = {
        alloc_at(1, 1, SHARD_A(0), 10, 1), // round 1
        alloc_at(2, 2, SHARD_B(0), 20, 2), // round 2
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 3,
         .addr = SHARD_A(0)},              // round 3: round 1's block
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 4, .stack = 7,
         .addr = SHARD_B(1), .old_addr = SHARD_A(0), .size = 30}, // round 4: stays with stack 1
        free_ev(5, 2, SHARD_B(0)),         // round 5: round 2's block
        alloc_at(6, 3, SHARD_A(0), 40, 3), // round 6: A again, in another slot
        free_ev(7, 1, SHARD_B(1)),         // round 7: round 4's block, stack 1's site
        alloc_at(8, 3, SHARD_B(0), 50, 2), // round 8
        alloc_at(9, 4, SHARD_A(1), 60, 4), // round 9
        free_ev(10, 3, SHARD_A(0)),        // round 10: round 6's block
        free_ev(11, 3, SHARD_B(0)),        // round 11: round 8's
        alloc_at(12, 4, SHARD_A(0), 70, 3),
        free_ev(13, 4, SHARD_A(0)), // a temporary of stack 3's site
        free_ev(14, 1, SHARD_A(1)), // round 9's block, 5 rounds on, by another thread
    };
    size_t n = sizeof ev / sizeof ev[0];
    for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT) {
        replay_t *want = one_thread_rp(ev, n, mode, NULL);
        cr_assert_eq(replay_n_sites(want), 4);
        for (unsigned depth = 2; depth <= REPLAY_DEPTH_MAX; depth++)
            for (unsigned threads = 2; threads <= 4; threads *= 2)
                for (size_t round = 1; round <= 3; round++) {
                    replay_t *got =
                        parallel_rp(ev, n, mode, NULL, threads, round, round, 1, 0, depth);
                    expect_same_sites(want, got, "open for many rounds");
                    replay_free(got);
                }
        replay_free(want);
    }
}

// The random streams above at depths 3, 4 and 8, with small rounds (many in flight at once).
Test(replay_par, random_streams_per_site_at_depth) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}};
    size_t n = random_stream(ev, N, 7);
    for (size_t d = 1; d < N_DEPTHS; d++)
        for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT)
            for (int filtered = 0; filtered < 2; filtered++) {
                replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
                for (unsigned threads = 2; threads <= 16; threads *= 8)
                    for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                        size_t m = rounds[k][1] < 64 ? n / 40 : n;
                        replay_t *want = one_thread_rp(ev, m, mode, keep);
                        replay_t *got = parallel_rp(ev, m, mode, keep, threads, rounds[k][0],
                                                    rounds[k][1], 0, 7 * 31 + k, depths[d]);
                        char what[112];
                        snprintf(what, sizeof what,
                                 "depth %u, mode %u, filter %d, %u threads, rounds %zu",
                                 depths[d], mode, filtered, threads, rounds[k][1]);
                        expect_same_sites(want, got, what);
                        replay_free(want);
                        replay_free(got);
                    }
            }
}

// Growth's chains at depths 3, 4 and 8: its words reach the shards D rounds on, and the frees
// until then read them from growth's lists of the last D rounds.
Test(replay_par, random_growth_at_depth) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}};
    size_t n = growth_stream(ev, N, 5);
    for (size_t d = 1; d < N_DEPTHS; d++)
        for (int filtered = 0; filtered < 2; filtered++) {
            replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
            for (unsigned threads = 2; threads <= 16; threads *= 8)
                for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                    size_t m = rounds[k][1] < 64 ? n / 40 : n;
                    growth_t *want = growth_one_thread(ev, m, keep, 6);
                    growth_t *got = growth_parallel(ev, m, keep, 6, threads, rounds[k][0],
                                                    rounds[k][1], 5 * 31 + k, depths[d]);
                    char what[96];
                    snprintf(what, sizeof what, "depth %u, filter %d, %u threads, rounds %zu",
                             depths[d], filtered, threads, rounds[k][1]);
                    expect_same_growth(want, got, what);
                    growth_free(want);
                    growth_free(got);
                }
        }
}

// HEAPPROF_REPLAY_DEPTH: 2 to 8 taken, anything else the default (3, with a warning); totals
// run one round at a time whatever it says.
Test(replay_par, depth_from_the_environment) {
    static const struct {
        const char *env;
        unsigned want;
    } cases[] = {{"3", 3}, {"8", 8}, {"2", 2}, {"1", 4}, {"9", 4}, {"0", 4}, {"3x", 4}, {"", 4},
                 {"-3", 4}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        setenv("HEAPPROF_REPLAY_DEPTH", cases[i].env, 1);
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, REPLAY_SITES);
        replay_par_t *p = replay_par_new(rp, REPLAY_SITES, 2, NULL, NULL);
        cr_expect_eq(replay_par_depth(p), cases[i].want, "HEAPPROF_REPLAY_DEPTH=%s",
                     cases[i].env);
        replay_par_finish(p);
        replay_free(rp);
    }
    setenv("HEAPPROF_REPLAY_DEPTH", "4", 1);
    replay_t *rp = replay_new(NULL, NULL);
    replay_par_t *p = replay_par_new(rp, 0, 2, NULL, NULL);
    cr_expect_eq(replay_par_depth(p), 2, "totals: one round at a time");
    replay_par_finish(p);
    replay_free(rp);
    unsetenv("HEAPPROF_REPLAY_DEPTH");
}

// HEAPPROF_REPLAY_APPLY: the sites' apply threads, 1 to 16 rounded down to a power of two;
// unset, empty or anything else the default (a warning): 1 beside growth's passes or below 4
// shards, else 2. Decided at the first round, once growth is known.
Test(replay_par, apply_parts_from_the_environment) {
    static const struct {
        const char *env;
        unsigned threads;
        bool growth;
        unsigned want;
    } cases[] = {{NULL, 2, false, 1}, {NULL, 4, false, 2},  {NULL, 16, false, 2},
                 {NULL, 16, true, 1}, {NULL, 4, true, 1},   {"", 8, false, 2},
                 {"1", 8, false, 1},  {"4", 2, false, 4},   {"3", 4, false, 2},
                 {"16", 4, false, 16}, {"17", 4, false, 2}, {"0", 2, false, 1},
                 {"2x", 4, false, 2}, {"2", 8, true, 2},    {"", 8, true, 1}};
    const reader_event_t ev = {
        .kind = READER_ALLOC, .sub = READER_MALLOC, .tid = 1, .stack = 1, .addr = 64, .size = 8};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        if (cases[i].env)
            setenv("HEAPPROF_REPLAY_APPLY", cases[i].env, 1);
        else
            unsetenv("HEAPPROF_REPLAY_APPLY");
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, REPLAY_SITES);
        growth_t *g = cases[i].growth ? growth_new(GROWTH_DEFAULT_SHORT_NS) : NULL;
        replay_par_t *p = replay_par_new(rp, REPLAY_SITES, cases[i].threads, NULL, NULL);
        if (g)
            replay_par_set_growth(p, g);
        replay_par_set_round(p, 1, 1);
        replay_par_events(p, &ev, 1); // the first round starts the apply threads
        cr_expect_eq(replay_scan_parts(rp), cases[i].want,
                     "HEAPPROF_REPLAY_APPLY=%s, %u threads, growth %d",
                     cases[i].env ? cases[i].env : "(unset)", cases[i].threads, cases[i].growth);
        replay_par_finish(p);
        if (g) {
            growth_finish(g);
            growth_free(g);
        }
        replay_free(rp);
    }
    unsetenv("HEAPPROF_REPLAY_APPLY");
}

// With the test knob `knob` at each of `values` and each of `shards` shards a thread, on 4
// threads in rounds of 100-1000 events: sites, DHAT (with dhat) and totals (with totals) against
// one thread's.
static void expect_same_with_knob(const char *knob, const char *const *values, size_t n_values,
                                  const char *const *shards, size_t n_shards, uint64_t seed,
                                  bool dhat, bool totals) {
    enum { N = 20000 };
    static reader_event_t ev[N];
    size_t n = random_stream(ev, N, seed);
    replay_totals_t want, got;
    one_thread(&want, ev, n, NULL);
    replay_t *want_sites = one_thread_rp(ev, n, REPLAY_SITES, NULL);
    replay_t *want_dhat = dhat ? one_thread_rp(ev, n, REPLAY_SITES | REPLAY_DHAT, NULL) : NULL;
    for (size_t i = 0; i < n_shards; i++)
        for (size_t j = 0; j < n_values; j++) {
            setenv("HEAPPROF_REPLAY_SHARDS", shards[i], 1);
            setenv(knob, values[j], 1);
            char what[96];
            snprintf(what, sizeof what, "%s shards a thread, %s=%s", shards[i], knob, values[j]);
            if (totals) {
                parallel(&got, ev, n, NULL, 4, 100, 1000, 0, seed + 4);
                expect_same(&want, &got, what);
            }
            replay_t *sites = parallel_rp(ev, n, REPLAY_SITES, NULL, 4, 100, 1000, 0, seed + 4, 2);
            expect_same_sites(want_sites, sites, what);
            replay_free(sites);
            if (dhat) {
                replay_t *d = parallel_rp(ev, n, REPLAY_SITES | REPLAY_DHAT, NULL, 4, 100, 1000,
                                          0, seed + 4, 3);
                expect_same_sites(want_dhat, d, what);
                replay_free(d);
            }
        }
    unsetenv("HEAPPROF_REPLAY_SHARDS");
    unsetenv(knob);
    replay_free(want_sites);
    if (want_dhat)
        replay_free(want_dhat);
}

// A thread that takes no part in any round (HEAPPROF_TEST_REPLAY_IDLE): the others claim its
// part and its shards every round, in totals and with sites (where thread 0 is a shard thread
// too), with one shard a thread and with four.
Test(replay_par, a_thread_that_never_comes_leaves_its_share_to_the_others) {
    static const char *const shards[] = {"1", "4"}, *const idle[] = {"0", "1", "3"};
    expect_same_with_knob("HEAPPROF_TEST_REPLAY_IDLE", idle, 3, shards, 2, 7, false, true);
}

// With sites, round r + 1 is published while round r runs, so a thread done with its share of
// r may come to a shard another thread still applies for r: it must leave it (shards apply
// rounds in order) to that thread, which takes it next. A slow thread
// (HEAPPROF_TEST_REPLAY_SLOW: it pauses after each shard it applies) makes that the common
// case here, whatever the timing; the figures are the same either way.
Test(replay_par, a_shard_still_at_the_round_before_waits_for_its_thread) {
    static const char *const shards[] = {"1", "2"}, *const slow[] = {"0", "2"};
    expect_same_with_knob("HEAPPROF_TEST_REPLAY_SLOW", slow, 2, shards, 2, 9, true, false);
}

// The finish sets the stop flag, then raises the round counter once more to wake the threads:
// a thread that reads the counter after that must see the flag, or it takes the raise for a
// round and waits for it for ever (session 21: test_replay_par hung at the finish's join). The
// slow thread pauses between its two reads, so that the finish of a replay comes there often:
// many short replays, in totals and with sites, rounds of 1-3 events. A hang fails by the
// test's timeout.
Test(replay_par, a_thread_woken_by_the_finish_stops, .timeout = 120) {
    enum { N = 600 };
    static reader_event_t ev[N];
    size_t n = random_stream(ev, N, 11);
    replay_totals_t want, got;
    static const char *const slow[] = {"1", "3"};
    for (size_t j = 0; j < 2; j++) {
        setenv("HEAPPROF_TEST_REPLAY_SLOW", slow[j], 1);
        for (uint64_t k = 0; k < 8; k++) {
            size_t m = n - k * 37; // the last round's size varies
            one_thread(&want, ev, m, NULL);
            parallel(&got, ev, m, NULL, 4, 1, 3, 0, k);
            expect_same(&want, &got, "totals, a slow thread");
            replay_t *w = one_thread_rp(ev, m, REPLAY_SITES, NULL);
            replay_t *sites = parallel_rp(ev, m, REPLAY_SITES, NULL, 4, 1, 3, 0, k, 2);
            expect_same_sites(w, sites, "sites, a slow thread");
            replay_free(sites);
            replay_free(w);
        }
    }
    unsetenv("HEAPPROF_TEST_REPLAY_SLOW");
}

// Threads that cannot be made (HEAPPROF_TEST_REPLAY_MAKE=N: only N of replay's threads are
// made, shard threads first, then the scans' in the order they start): the caller's thread does
// the rest, a round at a time where it works on shards itself and each scan without a thread
// after the round, and every figure is the same. 4 threads asked: 0 made (all on the caller's
// thread), 2 or 3 (fewer shard threads than shards), 4 (every shard thread, no scan thread),
// then the order, the peak, growth's links and chains, the apply one by one.
Test(replay_par, threads_that_cannot_be_made_leave_their_work_to_the_caller) {
    static const char *const one[] = {"1"};
    static const char *const make[] = {"0", "2", "3", "4", "5", "6", "7", "8", "9"};
    enum { N = 20000 };
    static reader_event_t gev[N];
    size_t gn = growth_stream(gev, N, 5);
    growth_t *want_growth = growth_one_thread(gev, gn, NULL, 6);
    for (size_t j = 0; j < sizeof make / sizeof make[0]; j++) {
        setenv("HEAPPROF_TEST_REPLAY_MAKE", make[j], 1);
        growth_t *got = growth_parallel(gev, gn, NULL, 6, 4, 100, 1000, 19, 4);
        expect_same_growth(want_growth, got, make[j]);
        growth_free(got);
    }
    growth_free(want_growth);
    expect_same_with_knob("HEAPPROF_TEST_REPLAY_MAKE", make, sizeof make / sizeof make[0], one,
                          1, 21, true, true);
}

// HEAPPROF_REPLAY_PREFETCHW=1 (the shards ask for their results' lines ahead of their stores,
// growth's words too): the loop's other copy gives the same figures, and the indexes it reads
// ahead stay within the shard's list (ASan runs this). Where the CPU lacks PREFETCHW the knob
// is off and this is the plain loop again.
Test(replay_par, prefetching_the_results_changes_nothing) {
    static const char *const shards[] = {"1", "2"}, *const on[] = {"1"};
    expect_same_with_knob("HEAPPROF_REPLAY_PREFETCHW", on, 1, shards, 2, 25, true, false);
    enum { N = 20000 };
    static reader_event_t gev[N];
    size_t gn = growth_stream(gev, N, 6);
    growth_t *want = growth_one_thread(gev, gn, NULL, 6);
    setenv("HEAPPROF_REPLAY_PREFETCHW", "1", 1);
    growth_t *got = growth_parallel(gev, gn, NULL, 6, 4, 100, 1000, 29, 3);
    unsetenv("HEAPPROF_REPLAY_PREFETCHW");
    expect_same_growth(want, got, "prefetchw");
    growth_free(got);
    growth_free(want);
}

// ---- the timeline (timeline.c) in a scan after the order ----

// Every point and snapshot of the timeline, as timeline_events makes them on one thread.
static void expect_same_timeline(const timeline_t *want, const timeline_t *got, const char *what) {
    size_t nw, ng;
    const timeline_point_t *pw = timeline_points(want, &nw), *pg = timeline_points(got, &ng);
    cr_assert_eq(ng, nw, "%s: points", what);
    cr_assert_eq(timeline_bucket_ns(got), timeline_bucket_ns(want), "%s: bucket width", what);
    for (size_t i = 0; i < nw; i++)
        cr_assert(memcmp(&pw[i], &pg[i], sizeof pw[i]) == 0, "%s: point %zu", what, i);
    const timeline_snap_t *sw = timeline_snaps(want, &nw), *sg = timeline_snaps(got, &ng);
    cr_assert_eq(ng, nw, "%s: snapshots", what);
    for (size_t i = 0; i < nw; i++)
        cr_assert(memcmp(&sw[i], &sg[i], sizeof sw[i]) == 0, "%s: snapshot %zu", what, i);
}

// The one-thread timeline of ev[0..n).
static timeline_t *timeline_one_thread(replay_t *one, const reader_event_t *ev, size_t n) {
    timeline_t *tl = timeline_new();
    for (size_t i = 0; i < n; i += 777)
        timeline_events(tl, one, ev + i, n - i < 777 ? n - i : 777);
    return tl;
}

// random_stream's churn (double allocations, unknown frees, reallocs, measures at exit, a
// filter) spread over ~60 ms, so that the grid coarsens several times and every snapshot slot
// is used, at 2-8 threads, rounds of one event to whole batches (the small ones on a prefix:
// each round is a hand-over of threads), depth 2-8.
Test(replay_par, the_timeline_matches_one_thread) {
    enum { N = 40000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {7, 64}, {1000, 1000}, {16384, 1u << 20}};
    size_t n = random_stream(ev, N, 5);
    for (size_t i = 0; i < n; i++)
        ev[i].time_ns = ev[i].time_ns * 1499 + i % 3; // and a little out of order
    for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT)
        for (int filtered = 0; filtered < 2; filtered++) {
            replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
            for (unsigned threads = 2; threads <= 8; threads *= 2)
                for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                    size_t m = rounds[k][1] < 100 ? n / 20 : n;
                    replay_t *one = replay_new(keep, NULL);
                    replay_set_mode(one, mode);
                    timeline_t *want = timeline_one_thread(one, ev, m);
                    if (m == n) {
                        size_t n_snaps;
                        (void)timeline_snaps(want, &n_snaps);
                        cr_assert_gt(timeline_bucket_ns(want), 1000); // the grid coarsened
                        cr_assert_gt(n_snaps, TIMELINE_SNAPS / 3, "%zu snapshots", n_snaps);
                    }
                    timeline_t *got = timeline_new();
                    replay_t *rp = parallel_rp_timeline(ev, m, mode, keep, threads, rounds[k][0],
                                                        rounds[k][1], 0, 77 + k, 2u << (k % 3),
                                                        got);
                    char what[96];
                    snprintf(what, sizeof what, "mode %u, filter %d, %u threads, rounds %zu",
                             mode, filtered, threads, rounds[k][1]);
                    expect_same_timeline(want, got, what);
                    expect_same_sites(one, rp, what);
                    timeline_free(got);
                    timeline_free(want);
                    replay_free(rp);
                    replay_free(one);
                }
        }
}
