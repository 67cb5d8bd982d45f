// SPDX-License-Identifier: MIT
// timeline: the viewer's live-bytes curve and top-site snapshots, on synthetic event streams fed
// through replay (REPLAY_SITES): bounded whatever the run's length, the exact peak kept, each
// snapshot the state before its time.
#include "model/timeline.h"

#include <criterion/criterion.h>
#include <stdint.h>

static reader_event_t alloc_ev(uint64_t t, uint64_t stack, uint64_t addr, uint64_t size) {
    return (reader_event_t){.kind = READER_ALLOC, .sub = READER_MALLOC, .tid = 1, .time_ns = t,
                            .stack = stack, .addr = addr, .size = size};
}

static reader_event_t free_ev(uint64_t t, uint64_t addr) {
    return (reader_event_t){.kind = READER_FREE, .tid = 1, .time_ns = t, .addr = addr};
}

static replay_t *new_replay(void) {
    replay_t *rp = replay_new(NULL, NULL);
    replay_set_mode(rp, REPLAY_SITES);
    return rp;
}

// The replay site index of a stack id (sites are numbered by first allocation).
static uint32_t site_of(const replay_t *rp, uint64_t stack) {
    for (size_t i = 0; i < replay_n_sites(rp); i++) {
        replay_site_t f;
        replay_site(rp, i, &f);
        if (f.stack == stack)
            return (uint32_t)i;
    }
    cr_assert_fail("no site for stack %llu", (unsigned long long)stack);
    return 0;
}

Test(timeline, snapshot_is_the_state_before_its_time) {
    replay_t *rp = new_replay();
    timeline_t *tl = timeline_new();
    // the first snapshot grid is 16 buckets of 1 us: times 16 us, 32 us, ...
    reader_event_t ev[] = {
        alloc_ev(1000, 1, 0x1000, 100),  // A
        alloc_ev(10000, 2, 0x2000, 300), // B
        free_ev(20000, 0x1000),          // A freed after the 16 us snapshot
        alloc_ev(40000, 3, 0x3000, 10),  // C after the 32 us snapshot
    };
    timeline_events(tl, rp, ev, 4);
    size_t n;
    const timeline_snap_t *s = timeline_snaps(tl, &n);
    cr_assert_eq(n, 2);
    cr_expect_eq(s[0].time_ns, 16000);
    cr_expect_eq(s[0].live_bytes, 400);
    cr_assert_eq(s[0].n_top, 2);
    cr_expect_eq(s[0].site[0], site_of(rp, 2));
    cr_expect_eq(s[0].bytes[0], 300);
    cr_expect_eq(s[0].site[1], site_of(rp, 1));
    cr_expect_eq(s[0].bytes[1], 100);
    cr_expect_eq(s[1].time_ns, 32000);
    cr_expect_eq(s[1].live_bytes, 300);
    cr_assert_eq(s[1].n_top, 1);
    cr_expect_eq(s[1].site[0], site_of(rp, 2));

    const timeline_point_t *p = timeline_points(tl, &n);
    cr_assert_eq(n, 41); // buckets 0..40 us
    cr_expect_eq(p[1].max_bytes, 100);
    cr_expect_eq(p[10].max_bytes, 400);
    cr_expect_eq(p[20].max_bytes, 400); // the free's bucket starts at 400
    cr_expect_eq(p[20].last_bytes, 300);
    cr_expect_eq(p[30].max_bytes, 300); // an empty bucket repeats the level
    cr_expect_eq(p[40].last_bytes, 310);
    timeline_free(tl);
    replay_free(rp);
}

Test(timeline, bounded_for_a_long_run_and_keeps_the_exact_peak) {
    replay_t *rp = new_replay();
    timeline_t *tl = timeline_new();
    // 10 s of churn over 50 sites, with one 1 ns spike in the middle
    enum { N = 400000 };
    static reader_event_t ev[N];
    size_t k = 0;
    uint64_t t = 0;
    for (size_t i = 0; k + 3 < N; i++) {
        t += 25000; // 25 us
        uint64_t addr = 0x100000 + (i % 1000) * 64;
        if (i >= 1000)
            ev[k++] = free_ev(t, addr);
        ev[k++] = alloc_ev(t + 1, 1 + i % 50, addr, 16 + (i % 50) * 8);
        if (i == 100000) {
            ev[k++] = alloc_ev(t + 2, 99, 0x9000000, 1 << 20);
            ev[k++] = free_ev(t + 3, 0x9000000);
        }
    }
    for (size_t i = 0; i < k; i += 1000)
        timeline_events(tl, rp, ev + i, k - i < 1000 ? k - i : 1000);
    size_t n, ns;
    const timeline_point_t *p = timeline_points(tl, &n);
    const timeline_snap_t *s = timeline_snaps(tl, &ns);
    cr_expect(n <= TIMELINE_BUCKETS && n > TIMELINE_BUCKETS / 2, "%zu points", n);
    cr_expect(ns <= TIMELINE_SNAPS && ns > TIMELINE_SNAPS / 4, "%zu snapshots", ns);
    uint64_t max = 0;
    for (size_t i = 0; i < n; i++) {
        max = p[i].max_bytes > max ? p[i].max_bytes : max;
        if (i)
            cr_assert_eq(p[i].time_ns, p[i - 1].time_ns + timeline_bucket_ns(tl));
    }
    const replay_totals_t *tot = replay_totals(rp);
    cr_expect_eq(max, tot->peak_bytes);
    cr_expect(tot->peak_bytes > 1 << 20);
    for (size_t i = 0; i < ns; i++) {
        uint64_t sum = 0;
        for (uint32_t j = 0; j < s[i].n_top; j++) {
            sum += s[i].bytes[j];
            if (j)
                cr_expect(s[i].bytes[j] <= s[i].bytes[j - 1]);
        }
        cr_expect(sum <= s[i].live_bytes);
        cr_expect_eq(s[i].n_top, TIMELINE_TOP); // 50 sites live at every grid time
        if (i)
            cr_expect(s[i].time_ns > s[i - 1].time_ns);
    }
    timeline_free(tl);
    replay_free(rp);
}

Test(timeline, allocation_at_a_live_address_releases_the_old_site) {
    replay_t *rp = new_replay();
    timeline_t *tl = timeline_new();
    reader_event_t ev[] = {
        alloc_ev(1000, 1, 0x1000, 100),
        alloc_ev(2000, 2, 0x1000, 50), // the block at 0x1000 was never freed: a damaged trace
        alloc_ev(20000, 3, 0x2000, 1),
    };
    timeline_events(tl, rp, ev, 3);
    size_t n;
    const timeline_snap_t *s = timeline_snaps(tl, &n);
    cr_assert_eq(n, 1);
    cr_expect_eq(s[0].live_bytes, 50);
    cr_assert_eq(s[0].n_top, 1, "site 1 still counted");
    cr_expect_eq(s[0].site[0], site_of(rp, 2));
    timeline_free(tl);
    replay_free(rp);
}
