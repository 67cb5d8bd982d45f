// SPDX-License-Identifier: MIT
// replay_par against the one-thread replay: the same totals, field for field, over hand-made
// cases where blocks, frees, reallocs, double allocations and peaks cross from one round to the
// next and from one shard to another, and over random streams with 2-16 threads, rounds of 1 to
// 16384 events and batches of random sizes, with and without a filter.
#include "model/replay_par.h"

#include <criterion/criterion.h>
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

static void one_thread(replay_totals_t *out, const reader_event_t *ev, size_t n,
                       replay_keep_fn keep) {
    replay_t *rp = replay_new(keep, NULL);
    replay_events(rp, ev, n);
    *out = *replay_totals(rp);
    replay_free(rp);
}

// Feeds ev in batches of `batch` events (0: random sizes) to replay_par with the given threads
// and rounds of at most round_max events.
static void parallel(replay_totals_t *out, const reader_event_t *ev, size_t n,
                     replay_keep_fn keep, unsigned threads, size_t round_min, size_t round_max,
                     size_t batch, uint64_t seed) {
    replay_t *rp = replay_new(keep, NULL);
    replay_par_t *p = replay_par_new(rp, 0, threads, keep, NULL);
    replay_par_set_round(p, round_min, round_max);
    size_t i = 0;
    while (i < n) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = batch ? batch : 1 + (size_t)(seed >> 33) % 3000;
        if (k > n - i)
            k = n - i;
        replay_par_events(p, ev + i, k);
        i += k;
    }
    replay_par_finish(p);
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
                    parallel(&got, ev, m, keep, threads, rounds[k][0], rounds[k][1], 0,
                             seed * 31 + k);
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

// ---- per-site figures (REPLAY_SITES, REPLAY_DHAT): shards find, one thread scans ----

static replay_t *one_thread_rp(const reader_event_t *ev, size_t n, unsigned mode,
                               replay_keep_fn keep) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, mode);
    replay_events(rp, ev, n);
    return rp;
}

static replay_t *parallel_rp(const reader_event_t *ev, size_t n, unsigned mode,
                             replay_keep_fn keep, unsigned threads, size_t round_min,
                             size_t round_max, size_t batch, uint64_t seed) {
    replay_t *rp = replay_new(keep, NULL);
    replay_set_mode(rp, mode);
    replay_par_t *p = replay_par_new(rp, mode, threads, keep, NULL);
    replay_par_set_round(p, round_min, round_max);
    for (size_t i = 0; i < n;) {
        seed = seed * 6364136223846793005ull + 1442695040888963407ull;
        size_t k = batch ? batch : 1 + (size_t)(seed >> 33) % 3000;
        if (k > n - i)
            k = n - i;
        replay_par_events(p, ev + i, k);
        i += k;
    }
    replay_par_finish(p);
    return rp;
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
        for (unsigned threads = 2; threads <= 8; threads *= 2)
            for (size_t round = 1; round <= 4; round++) {
                replay_t *got = parallel_rp(ev, n, mode, NULL, threads, round, round, 1, 0);
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

Test(replay_par, random_streams_match_one_thread_per_site) {
    enum { N = 60000 };
    static reader_event_t ev[N];
    static const size_t rounds[][2] = {{1, 1}, {2, 3}, {5, 64}, {100, 1000}, {16384, 1u << 20}};
    for (uint64_t seed = 1; seed <= 2; seed++) {
        size_t n = random_stream(ev, N, seed);
        for (unsigned mode = REPLAY_SITES; mode <= (REPLAY_SITES | REPLAY_DHAT); mode += REPLAY_DHAT)
            for (int filtered = 0; filtered < 2; filtered++) {
                replay_keep_fn keep = filtered ? keep_even_stacks : NULL;
                for (unsigned threads = 2; threads <= 16; threads *= 4)
                    for (size_t k = 0; k < sizeof rounds / sizeof rounds[0]; k++) {
                        size_t m = rounds[k][1] < 64 ? n / 40 : n;
                        replay_t *want = one_thread_rp(ev, m, mode, keep);
                        replay_t *got = parallel_rp(ev, m, mode, keep, threads, rounds[k][0],
                                                    rounds[k][1], 0, seed * 31 + k);
                        char what[112];
                        snprintf(what, sizeof what,
                                 "seed %llu, mode %u, filter %d, %u threads, rounds %zu",
                                 (unsigned long long)seed, mode, filtered, threads, rounds[k][1]);
                        expect_same_sites(want, got, what);
                        replay_free(want);
                        replay_free(got);
                    }
            }
    }
}
