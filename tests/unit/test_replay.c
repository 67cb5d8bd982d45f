// SPDX-License-Identifier: MIT
// replay on hand-made event sequences: peak at the first maximum, end state, realloc halves,
// unknown frees, allocations at live addresses, threads, and the keep filter.
#include "replay.h"

#include <criterion/criterion.h>

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
