// SPDX-License-Identifier: MIT
// replay on hand-made event sequences: peak at the first maximum, end state, realloc halves,
// unknown frees, allocations at live addresses, threads, the keep filter, and a sampled trace's
// weighted estimates.
#include "model/replay.h"

#include <criterion/criterion.h>
#include <math.h>
#include <string.h>

static reader_event_t alloc_ev(uint64_t t, uint64_t addr, uint64_t size) {
    return (reader_event_t){.kind = READER_ALLOC,
                            .sub = READER_MALLOC,
                            .tid = 1,
                            .time_ns = t,
                            .stack = 1,
                            .addr = addr,
                            .size = size};
}

static reader_event_t free_ev(uint64_t t, uint64_t addr) {
    return (reader_event_t){.kind = READER_FREE, .tid = 1, .time_ns = t, .addr = addr};
}

static void feed(replay_t *rp, const reader_event_t *ev, size_t n) {
    for (size_t i = 0; i < n; i++)
        replay_event(rp, &ev[i]);
}

Test(replay, peak_is_the_first_moment_of_the_maximum) {
    replay_t *rp = replay_new(NULL, NULL);
    reader_event_t ev[] = {
        alloc_ev(1, 0xA0, 100), alloc_ev(2, 0xB0, 50),  // live 150: peak
        free_ev(3, 0xA0),       alloc_ev(4, 0xC0, 100), // live 150 again: not a new peak
        alloc_ev(5, 0xD0, 1),   free_ev(6, 0xD0),       // 151: new peak at t=5
        free_ev(7, 0xB0),
    };
    feed(rp, ev, 4);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(t->peak_bytes, 150);
    cr_assert_eq(t->peak_blocks, 2);
    cr_assert_eq(t->peak_time_ns, 2);
    feed(rp, ev + 4, 3);
    cr_assert_eq(t->peak_bytes, 151);
    cr_assert_eq(t->peak_blocks, 3);
    cr_assert_eq(t->peak_time_ns, 5);
    cr_assert_eq(t->n_blocks, 4);
    cr_assert_eq(t->n_bytes, 251);
    cr_assert_eq(t->n_frees, 3);
    cr_assert_eq(t->n_events, 7);
    cr_assert_eq(t->live_bytes, 100);
    cr_assert_eq(t->live_blocks, 1);
    cr_assert_eq(t->last_time_ns, 7);
    cr_assert_eq(t->n_threads, 1);
    cr_assert_eq(t->n_unknown_frees + t->n_double_allocs, 0);
    replay_free(rp);
}

Test(replay, realloc_halves_move_the_block_and_count_one_event) {
    replay_t *rp = replay_new(NULL, NULL);
    reader_event_t ev[] = {
        alloc_ev(1, 0xA0, 100),
        {.kind = READER_FREE,
         .flags = READER_FREE_OF_REALLOC,
         .tid = 1,
         .time_ns = 2,
         .addr = 0xA0},
        {.kind = READER_ALLOC,
         .sub = READER_REALLOC,
         .tid = 1,
         .time_ns = 3,
         .addr = 0xB0,
         .old_addr = 0xA0,
         .size = 300},
        {.kind = READER_ALLOC,
         .sub = READER_REALLOC,
         .tid = 1,
         .time_ns = 4,
         .addr = 0xC0,
         .old_addr = 0,
         .size = 8}, // realloc(NULL, 8)
    };
    feed(rp, ev, 4);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(t->n_blocks, 3);
    cr_assert_eq(t->n_bytes, 408);
    cr_assert_eq(t->n_frees, 0);
    cr_assert_eq(t->n_events, 3);
    cr_assert_eq(t->live_bytes, 308);
    cr_assert_eq(t->live_blocks, 2);
    cr_assert_eq(t->peak_bytes, 308); // never 400: the old block died before the new was born
    replay_free(rp);
}

Test(replay, free_of_unknown_address_is_counted_not_applied) {
    replay_t *rp = replay_new(NULL, NULL);
    reader_event_t ev[] = {alloc_ev(1, 0xA0, 10), free_ev(2, 0xEE), free_ev(3, 0xA0),
                           free_ev(4, 0xA0)};
    feed(rp, ev, 4);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(t->n_unknown_frees, 2);
    cr_assert_eq(t->n_frees, 1);
    cr_assert_eq(t->n_events, 4); // as recorded
    cr_assert_eq(t->live_bytes, 0);
    cr_assert_eq(t->live_blocks, 0);
    replay_free(rp);
}

Test(replay, alloc_at_live_address_replaces_the_old_block) {
    replay_t *rp = replay_new(NULL, NULL);
    reader_event_t ev[] = {alloc_ev(1, 0xA0, 100), alloc_ev(2, 0xA0, 40)};
    feed(rp, ev, 2);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(t->n_double_allocs, 1);
    cr_assert_eq(t->n_blocks, 2);
    cr_assert_eq(t->live_bytes, 40);
    cr_assert_eq(t->live_blocks, 1);
    cr_assert_eq(t->peak_bytes, 100);
    replay_free(rp);
}

Test(replay, counts_distinct_threads_but_not_tid_zero) {
    replay_t *rp = replay_new(NULL, NULL);
    uint32_t tids[] = {0, 5, 5, 6, 5, 7, 0, 6};
    for (size_t i = 0; i < sizeof tids / sizeof *tids; i++) {
        reader_event_t e = alloc_ev(i, 0x100 + i * 16, 1);
        e.tid = tids[i];
        if (tids[i] == 0)
            e.kind = READER_MODULE_LOAD;
        replay_event(rp, &e);
    }
    cr_assert_eq(replay_totals(rp)->n_threads, 3);
    cr_assert_eq(replay_totals(rp)->n_blocks, 6);
    replay_free(rp);
}

static bool only_stack_7(void *ctx, const reader_event_t *ev) {
    (*(int *)ctx)++;
    return ev->stack == 7;
}

Test(replay, filter_counts_kept_blocks_and_ignores_frees_of_others) {
    int calls = 0;
    replay_t *rp = replay_new(only_stack_7, &calls);
    reader_event_t a = alloc_ev(1, 0xA0, 100), b = alloc_ev(2, 0xB0, 30);
    a.stack = 7;
    b.stack = 8;
    reader_event_t ev[] = {a, b, free_ev(3, 0xB0), free_ev(4, 0xEE), free_ev(5, 0xA0)};
    feed(rp, ev, 5);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(calls, 2);
    cr_assert_eq(t->n_blocks, 1);
    cr_assert_eq(t->n_bytes, 100);
    cr_assert_eq(t->n_frees, 1);
    cr_assert_eq(t->n_events, 2);
    cr_assert_eq(t->peak_bytes, 100);
    cr_assert_eq(t->n_unknown_frees, 1); // 0xEE; 0xB0 was known, just not counted
    cr_assert_eq(t->live_blocks, 0);
    replay_free(rp);
}

Test(replay, thread_with_only_filtered_allocations_is_not_counted) {
    int calls = 0;
    replay_t *rp = replay_new(only_stack_7, &calls);
    reader_event_t a = alloc_ev(1, 0xA0, 1), b = alloc_ev(2, 0xB0, 1), c = alloc_ev(3, 0xC0, 1);
    a.stack = 8; // main thread: libc's own block
    b.stack = 7;
    b.tid = 2;
    c.stack = 7;
    c.tid = 3;
    reader_event_t f = free_ev(4, 0xB0); // tid 1 frees a counted block: now it counts
    reader_event_t ev[] = {a, b, c};
    feed(rp, ev, 3);
    cr_assert_eq(replay_totals(rp)->n_threads, 2);
    replay_event(rp, &f);
    cr_assert_eq(replay_totals(rp)->n_threads, 3);
    replay_free(rp);
}

// ---- per-site figures (REPLAY_SITES) ----

static reader_event_t at(uint64_t t, uint32_t tid, uint64_t stack, uint64_t addr, uint64_t size) {
    return (reader_event_t){.kind = READER_ALLOC,
                            .sub = READER_MALLOC,
                            .tid = tid,
                            .time_ns = t,
                            .stack = stack,
                            .addr = addr,
                            .size = size};
}

static reader_event_t fr(uint64_t t, uint32_t tid, uint64_t addr) {
    return (reader_event_t){.kind = READER_FREE, .tid = tid, .time_ns = t, .addr = addr};
}

static replay_site_t site_of_stack(replay_t *rp, uint64_t stack) {
    replay_site_t s = {0};
    for (size_t i = 0; i < replay_n_sites(rp); i++) {
        replay_site(rp, i, &s);
        if (s.stack == stack)
            return s;
    }
    cr_assert_fail("no site for stack %llu", (unsigned long long)stack);
    return s;
}

Test(replay, sites_totals_and_end_state_per_site) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    reader_event_t ev[] = {
        at(10, 1, 7, 0xA0, 100), at(20, 1, 7, 0xB0, 50), at(30, 1, 9, 0xC0, 8),
        fr(40, 1, 0xA0),         fr(50, 1, 0xC0),
    };
    feed(rp, ev, 5);
    cr_assert_eq(replay_n_sites(rp), 2);
    replay_site_t a = site_of_stack(rp, 7), b = site_of_stack(rp, 9);
    cr_expect_eq(a.blocks, 2);
    cr_expect_eq(a.bytes, 150);
    cr_expect_eq(a.end_bytes, 50);
    cr_expect_eq(a.end_blocks, 1);
    cr_expect_eq(a.max_bytes, 150);
    cr_expect_eq(a.max_blocks, 2);
    cr_expect_eq(a.lifetime_ns, (40 - 10) + (50 - 20)); // the live one counts to t-end = 50
    cr_expect_eq(b.bytes, 8);
    cr_expect_eq(b.end_blocks, 0);
    cr_expect_eq(b.temp_blocks, 1); // freed before its thread allocated again
    cr_expect_eq(a.temp_blocks, 0);
    // the peak: 158 bytes at t=30, all three blocks
    cr_expect_eq(a.peak_bytes, 150);
    cr_expect_eq(b.peak_bytes, 8);
    cr_expect_eq(replay_totals(rp)->peak_bytes, 158);
    replay_free(rp);
}

Test(replay, sites_realloc_stays_with_the_original_site) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    reader_event_t ev[] = {
        at(10, 1, 3, 0xA0, 16),
        {.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .tid = 1, .time_ns = 20,
         .addr = 0xA0},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 21, .stack = 4,
         .addr = 0xB0, .old_addr = 0xA0, .size = 32},
        {.kind = READER_ALLOC, .sub = READER_REALLOC, .tid = 1, .time_ns = 30, .stack = 4,
         .addr = 0xC0, .old_addr = 0, .size = 8}, // realloc(NULL, 8): a site of its own
    };
    feed(rp, ev, 4);
    cr_assert_eq(replay_n_sites(rp), 2);
    replay_site_t a = site_of_stack(rp, 3), b = site_of_stack(rp, 4);
    cr_expect_eq(a.blocks, 2);
    cr_expect_eq(a.bytes, 48);
    cr_expect_eq(a.end_bytes, 32);
    cr_expect_eq(a.end_blocks, 1);
    cr_expect_eq(b.blocks, 1);
    cr_expect_eq(b.bytes, 8);
    replay_free(rp);
}

Test(replay, sites_dhat_counts_zero_bytes_as_one_and_takes_the_last_peak) {
    for (int dhat = 0; dhat < 2; dhat++) {
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, REPLAY_SITES | (dhat ? REPLAY_DHAT : 0));
        reader_event_t ev[] = {
            at(10, 1, 1, 0xA0, 100), // peak 100, site 1
            fr(20, 1, 0xA0),
            at(30, 1, 2, 0xB0, 100), // 100 again: DHAT's peak moves here, ours stays
            at(40, 1, 3, 0xC0, 0),   // malloc(0): DHAT's peak is now 101 with it
            fr(50, 1, 0xC0),
        };
        feed(rp, ev, 5);
        replay_site_t s1 = site_of_stack(rp, 1), s2 = site_of_stack(rp, 2),
                      s3 = site_of_stack(rp, 3);
        const replay_totals_t *t = replay_totals(rp);
        if (dhat) {
            cr_expect_eq(s3.bytes, 1);
            cr_expect_eq(t->peak_bytes, 101);
            cr_expect_eq(t->peak_time_ns, 40);
            cr_expect_eq(s1.peak_bytes, 0);
            cr_expect_eq(s2.peak_bytes, 100);
            cr_expect_eq(s3.peak_bytes, 1);
        } else {
            cr_expect_eq(s3.bytes, 0);
            cr_expect_eq(t->peak_bytes, 100);
            cr_expect_eq(t->peak_time_ns, 10);
            cr_expect_eq(s1.peak_bytes, 100);
            cr_expect_eq(s2.peak_bytes, 0);
            cr_expect_eq(s3.peak_blocks, 0);
        }
        replay_free(rp);
    }
}

Test(replay, sites_temporary_needs_the_same_thread_and_no_allocation_between) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    reader_event_t ev[] = {
        at(1, 1, 1, 0xA0, 10), fr(2, 1, 0xA0),                          // temporary
        at(3, 1, 2, 0xB0, 10), at(4, 1, 3, 0xC0, 10), fr(5, 1, 0xB0),   // not: C came between
        at(6, 1, 4, 0xD0, 10), fr(7, 2, 0xD0),                          // not: another thread
        at(8, 2, 5, 0xE0, 10), at(9, 1, 6, 0xF0, 10), fr(10, 2, 0xE0), // yes: thread 1 is other
    };
    feed(rp, ev, sizeof ev / sizeof *ev);
    cr_expect_eq(site_of_stack(rp, 1).temp_blocks, 1);
    cr_expect_eq(site_of_stack(rp, 2).temp_blocks, 0);
    cr_expect_eq(site_of_stack(rp, 4).temp_blocks, 0);
    cr_expect_eq(site_of_stack(rp, 5).temp_blocks, 1);
    cr_expect_eq(site_of_stack(rp, 5).temp_bytes, 10);
    replay_free(rp);
}

// The copy-on-write peak snapshot against a brute-force one (copy every site at every new
// peak), over random churn on a few sites and threads, in both peak conventions.
Test(replay, sites_peak_snapshot_matches_brute_force) {
    enum { SITES = 5, SLOTS = 64, STEPS = 20000 };
    for (int dhat = 0; dhat < 2; dhat++) {
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, REPLAY_SITES | (dhat ? REPLAY_DHAT : 0));
        uint64_t size[SLOTS] = {0}, site[SLOTS] = {0};
        uint64_t live_b[SITES + 1] = {0}, live_k[SITES + 1] = {0};
        uint64_t snap_b[SITES + 1] = {0}, snap_k[SITES + 1] = {0};
        uint64_t live = 0, peak = 0;
        uint64_t rng = 12345 + (uint64_t)dhat;
        for (uint64_t t = 1; t <= STEPS; t++) {
            rng = rng * 6364136223846793005ull + 1442695040888963407ull;
            unsigned slot = (unsigned)(rng >> 33) % SLOTS;
            uint64_t addr = 0x1000 + slot * 16;
            reader_event_t ev;
            if (size[slot]) {
                ev = fr(t, 1 + (unsigned)(rng >> 50) % 3, addr);
                live -= size[slot];
                live_b[site[slot]] -= size[slot];
                live_k[site[slot]]--;
                size[slot] = 0;
            } else {
                uint64_t sz = 1 + (rng >> 40) % 64, st = 1 + (rng >> 20) % SITES;
                ev = at(t, 1 + (unsigned)(rng >> 50) % 3, st, addr, sz);
                size[slot] = sz;
                site[slot] = st;
                live += sz;
                live_b[st] += sz;
                live_k[st]++;
                if (live > peak || (dhat && live == peak)) {
                    peak = live;
                    memcpy(snap_b, live_b, sizeof snap_b);
                    memcpy(snap_k, live_k, sizeof snap_k);
                }
            }
            replay_event(rp, &ev);
        }
        cr_assert_eq(replay_totals(rp)->peak_bytes, peak);
        for (uint64_t st = 1; st <= SITES; st++) {
            replay_site_t s = site_of_stack(rp, st);
            cr_expect_eq(s.peak_bytes, snap_b[st], "site %llu (dhat %d)", (unsigned long long)st,
                         dhat);
            cr_expect_eq(s.peak_blocks, snap_k[st]);
            cr_expect_eq(s.end_bytes, live_b[st]);
            cr_expect_eq(s.end_blocks, live_k[st]);
        }
        replay_free(rp);
    }
}

static reader_event_t free_touch_ev(uint64_t t, uint64_t addr, unsigned method, uint64_t touched,
                                    uint64_t touched_nz) {
    reader_event_t e = free_ev(t, addr);
    e.touch = (uint8_t)(1 + method);
    e.touched = touched;
    e.touched_nz = touched_nz;
    return e;
}

Test(replay, sites_touch_uses_the_not_zero_count_for_calloc_and_caps_at_the_size) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    reader_event_t c = alloc_ev(3, 0xB0, 64);
    c.sub = READER_CALLOC;
    reader_event_t ev[] = {
        alloc_ev(1, 0xA0, 100),
        free_touch_ev(2, 0xA0, HPT_TOUCH_FILL, 40, 90), // malloc: 40 bytes differ from the pattern
        c,
        free_touch_ev(4, 0xB0, HPT_TOUCH_FILL, 64, 8), // calloc: 8 bytes not zero
        alloc_ev(5, 0xC0, 1000),
        free_touch_ev(6, 0xC0, HPT_TOUCH_RESIDENT, 4096, 4096), // a page: capped at 1000
        alloc_ev(7, 0xD0, 10),
        free_ev(8, 0xD0), // not measured
    };
    feed(rp, ev, sizeof ev / sizeof ev[0]);
    cr_assert_eq(replay_n_sites(rp), 1);
    replay_site_t s;
    replay_site(rp, 0, &s);
    cr_assert_eq(s.touch_blocks, 3);
    cr_assert_eq(s.touch_bytes, 100 + 64 + 1000);
    cr_assert_eq(s.touched_bytes, 40 + 8 + 1000);
    cr_assert_eq(s.touch_resident_blocks, 1);
    replay_free(rp);
}

// ---- sampled traces (replay_set_sampled, docs/sampling.md) ----

// The probability that a Poisson process of one point per n bytes on average puts a point in
// a block of size bytes, inverted: the weight of a sampled block.
static double weight(double size, double n) { return 1 / (1 - exp(-size / n)); }

Test(replay, sample_weight_is_the_inverse_of_the_sampling_probability) {
    cr_expect_float_eq(replay_sample_weight(100, 1000), weight(100, 1000), 1e-9);
    cr_expect_float_eq(replay_sample_weight(1000, 1000), 1 / (1 - exp(-1)), 1e-9);
    // a tiny block: p ~ size/N, so the weight is ~N/size (no cancellation in 1 - exp)
    cr_expect_float_eq(replay_sample_weight(1, 1u << 30), (double)(1u << 30) + 0.5, 1e-3);
    cr_expect_float_eq(replay_sample_weight(1u << 30, 1000), 1.0, 1e-12);
    cr_expect_float_eq(replay_sample_weight(0, 1000), 1.0, 1e-12); // never sampled: weight 1
    cr_expect_float_eq(replay_sample_weight(100, 0), 1.0, 1e-12);  // not sampled
}

Test(replay, sampled_sites_carry_weighted_estimates) {
    for (int with_sites = 0; with_sites < 2; with_sites++) {
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, with_sites ? REPLAY_SITES : 0);
        replay_set_sampled(rp, 1000);
        reader_event_t ev[] = {at(10, 1, 7, 0xA0, 100), at(20, 1, 9, 0xB0, 5000),
                               fr(30, 1, 0xA0)};
        feed(rp, ev, 3);
        double wa = weight(100, 1000), wb = weight(5000, 1000);
        const replay_totals_t *raw = replay_totals(rp);
        cr_expect_eq(raw->n_bytes, 5100, "the sampled blocks' own figures stay");
        cr_expect_float_eq(raw->est_bytes, 100 * wa + 5000 * wb, 1e-6);
        cr_expect_float_eq(raw->est_blocks, wa + wb, 1e-9);
        cr_expect_float_eq(raw->est_live_bytes, 5000 * wb, 1e-6);
        const replay_totals_t *t = replay_totals_shown(rp);
        cr_expect_eq(t->n_bytes, (uint64_t)llround(100 * wa + 5000 * wb));
        cr_expect_eq(t->n_blocks, (uint64_t)llround(wa + wb));
        cr_expect_eq(t->peak_bytes, (uint64_t)llround(100 * wa + 5000 * wb));
        cr_expect_eq(t->live_bytes, (uint64_t)llround(5000 * wb));
        cr_expect_eq(t->live_blocks, 1);
        cr_expect_eq(t->n_frees, (uint64_t)llround(wa));
        if (with_sites) {
            replay_site_t a = site_of_stack(rp, 7), b = site_of_stack(rp, 9);
            cr_expect_eq(a.bytes, (uint64_t)llround(100 * wa));
            cr_expect_eq(a.blocks, (uint64_t)llround(wa));
            cr_expect_eq(a.end_bytes, 0);
            cr_expect_eq(a.peak_bytes, (uint64_t)llround(100 * wa));
            cr_expect_eq(b.end_bytes, (uint64_t)llround(5000 * wb));
            cr_expect_float_eq(b.est_end_bytes, 5000 * wb, 1e-6);
        }
        replay_free(rp);
    }
}

static reader_event_t live_touch_ev(uint64_t t, uint64_t addr, unsigned method, uint64_t touched,
                                    uint64_t touched_nz) {
    reader_event_t e = free_touch_ev(t, addr, method, touched, touched_nz);
    e.kind = READER_TOUCH_LIVE;
    return e;
}

// Issue #23: a block still live at exit carries its measure in a TOUCH_LIVE event: it counts
// with the freed blocks' (calloc's by its non-zero bytes, capped at the size), stays live, and
// moves no time; one for an address that is not live is passed over.
Test(replay, a_block_live_at_exit_gets_its_measure_and_stays_live) {
    for (int mode = 0; mode < 2; mode++) {
        replay_t *rp = replay_new(NULL, NULL);
        replay_set_mode(rp, mode ? REPLAY_SITES : 0);
        reader_event_t c = alloc_ev(2, 0xB0, 64);
        c.sub = READER_CALLOC;
        reader_event_t ev[] = {
            alloc_ev(1, 0xA0, 100),
            c,
            alloc_ev(3, 0xC0, 1000),
            free_touch_ev(4, 0xC0, HPT_TOUCH_FILL, 10, 10),
            live_touch_ev(900, 0xA0, HPT_TOUCH_PAGES, 4096, 4096), // capped at 100
            live_touch_ev(900, 0xB0, HPT_TOUCH_FILL, 64, 8),        // calloc: 8
            live_touch_ev(900, 0xC0, HPT_TOUCH_FILL, 5, 5),         // freed: not live
            live_touch_ev(900, 0xE0, HPT_TOUCH_FILL, 5, 5),         // never allocated
        };
        feed(rp, ev, sizeof ev / sizeof ev[0]);
        const replay_totals_t *t = replay_totals(rp);
        cr_assert_eq(t->touch_blocks, 3, "mode %d", mode);
        cr_assert_eq(t->touch_live_blocks, 2);
        cr_assert_eq(t->touched_bytes, 10 + 100 + 8);
        cr_assert_eq(t->touch_pages_blocks, 1);
        cr_assert_eq(t->live_blocks, 2);
        cr_assert_eq(t->last_time_ns, 4);
        if (mode) {
            replay_site_t s;
            replay_site(rp, 0, &s);
            cr_assert_eq(s.touch_blocks, 3);
            cr_assert_eq(s.touched_bytes, 10 + 100 + 8);
            cr_assert_eq(s.touch_bytes, 1000 + 100 + 64);
        }
        replay_free(rp);
    }
}

Test(replay, sampled_peak_is_the_estimated_heap_not_the_sampled_one) {
    // the sampled heap is largest with the one big block (5000 bytes); the estimated heap with
    // ten small ones (each standing for ~10.5 blocks of its size: ~10,508 bytes in all)
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    replay_set_sampled(rp, 1000);
    reader_event_t ev[12] = {at(10, 1, 9, 0x10000, 5000), fr(20, 1, 0x10000)};
    for (int i = 0; i < 10; i++)
        ev[2 + i] = at(30 + (uint64_t)i, 1, 7, 0x100 + 0x100 * (uint64_t)i, 100);
    feed(rp, ev, 12);
    const replay_totals_t *t = replay_totals_shown(rp);
    cr_expect_eq(t->peak_time_ns, 39);
    cr_expect_eq(t->peak_bytes, (uint64_t)llround(1000 * weight(100, 1000)));
    cr_expect_eq(site_of_stack(rp, 9).peak_bytes, 0);
    cr_expect_eq(site_of_stack(rp, 7).peak_blocks, (uint64_t)llround(10 * weight(100, 1000)));
    replay_free(rp);
}

static reader_event_t sized_free_ev(uint64_t t, uint64_t addr, uint64_t size) {
    return (reader_event_t){.kind = READER_FREE,
                            .flags = READER_FREE_SIZED,
                            .tid = 1,
                            .time_ns = t,
                            .addr = addr,
                            .size = size,
                            .free_align = 8};
}

// A sized free is a free like any other for the figures; the size it names is checked against
// the block's, the first mismatch kept; one of an unknown block takes nothing off the live bytes.
static void sized_frees_in(unsigned mode) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, mode);
    reader_event_t ev[] = {
        alloc_ev(1, 0xA0, 100),      alloc_ev(2, 0xB0, 50),      alloc_ev(3, 0xC0, 7),
        sized_free_ev(4, 0xA0, 100), sized_free_ev(5, 0xB0, 48), sized_free_ev(6, 0xEE, 64),
        free_ev(7, 0xC0),            alloc_ev(8, 0xD0, 9),       sized_free_ev(9, 0xD0, 90),
    };
    feed(rp, ev, sizeof ev / sizeof ev[0]);
    const replay_totals_t *t = replay_totals(rp);
    cr_assert_eq(t->n_sized_frees, 3);
    cr_assert_eq(t->n_sized_mismatches, 2);
    cr_assert_eq(t->mismatch_block_size, 50);
    cr_assert_eq(t->mismatch_freed_size, 48);
    cr_assert_eq(t->mismatch_time_ns, 5);
    cr_assert_eq(t->n_sized_unknown_frees, 1);
    cr_assert_eq(t->n_unknown_frees, 1);
    cr_assert_eq(t->n_frees, 4);
    cr_assert_eq(t->live_bytes, 0);
    cr_assert_eq(t->live_blocks, 0);
    replay_free(rp);
}

Test(replay, sized_frees_that_name_another_size_are_counted) {
    sized_frees_in(0);
}

Test(replay, sized_frees_are_checked_with_sites_and_dhat_counting_too) {
    sized_frees_in(REPLAY_SITES);
    sized_frees_in(REPLAY_DHAT);
}
