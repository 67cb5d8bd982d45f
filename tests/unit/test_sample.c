// SPDX-License-Identifier: MIT
// sample.c driven directly: the countdown samples a block of s bytes with probability
// 1 - exp(-s/N) (the estimator's premise, docs/sampling.md), a huge request costs one draw, the
// same seed gives the same samples, and the set of sampled blocks answers each free once.
#include "config.h"
#include "sample.h"
#include "state.h"

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>

static void setup(void) {
    hp_config.sample_bytes = 4096;
    hp_config.sample_seed = 7;
    cr_assert(hp_sample_init());
}

// The fraction of n allocations of size bytes that hp_sample_alloc samples.
static double fraction(size_t size, long n) {
    long hits = 0;
    for (long i = 0; i < n; i++)
        hits += hp_sample_alloc(size);
    return (double)hits / (double)n;
}

Test(sample, sampled_fraction_is_one_minus_exp_of_minus_size_over_n, .init = setup) {
    static const size_t sizes[] = {16, 100, 1000, 4096, 20000};
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        double want = 1 - exp(-(double)sizes[i] / 4096);
        double got = fraction(sizes[i], 400000);
        // 400,000 trials: the binomial's relative spread is below 1% even for 16-byte blocks
        cr_expect(fabs(got / want - 1) < 0.03, "size %zu: sampled %.5f, want %.5f", sizes[i], got,
                  want);
    }
}

Test(sample, mean_interval_is_n_bytes, .init = setup) {
    // one byte at a time: the gaps between samples are the draws themselves
    long n = 0, gaps = 0, since = 0;
    double sum = 0;
    for (n = 0; gaps < 20000; n++) {
        since++;
        if (hp_sample_alloc(1)) {
            sum += (double)since;
            since = 0;
            gaps++;
        }
    }
    cr_expect(fabs(sum / (double)gaps / 4096 - 1) < 0.03, "mean gap %.1f bytes", sum / gaps);
}

Test(sample, huge_request_is_one_sample_at_once, .init = setup) {
    // 2^50 bytes at N = 4096 hold 2^38 sample points: drawing them one by one would hang
    cr_expect(hp_sample_alloc((size_t)1 << 50));
    cr_expect_gt(hp_tls_sample_left, 0);
}

Test(sample, full_mode_records_everything, .init = setup) {
    hp_config.sample_bytes = 0;
    cr_expect(hp_sample_alloc(1));
    cr_expect(hp_sample_free((void *)0x1000));
}

Test(sample, set_answers_each_free_once, .init = setup) {
    enum { N_BLOCKS = 20000 };
    static uintptr_t kept[N_BLOCKS];
    for (size_t i = 0; i < N_BLOCKS; i++) {
        kept[i] = 0x7f0000000000u + i * 48; // malloc-like 16-byte aligned addresses
        hp_sample_keep((void *)kept[i]);
    }
    cr_assert(!hp_sample_overflowed, "20,000 blocks overflowed the set");
    for (size_t i = 0; i < N_BLOCKS; i++)
        cr_expect(!hp_sample_free((void *)(kept[i] + 16)), "an address never kept"); // neighbours
    for (size_t i = 0; i < N_BLOCKS; i++)
        cr_expect(hp_sample_free((void *)kept[i]), "kept block %zu not found", i);
    for (size_t i = 0; i < N_BLOCKS; i++)
        cr_expect(!hp_sample_free((void *)kept[i]), "block %zu found twice", i);
    for (uint32_t b = 0; b < (1u << HP_SAMPLE_BUCKETS_LOG2); b++)
        cr_expect_eq(hp_sample_counts[b], 0, "bucket %u not empty", b);
}

// 17 addresses in one bucket: the 17th overflows it; from then on every free says "record"
// (the analyzer ignores frees of blocks it never saw), and the blocks kept are still found.
Test(sample, overflow_makes_every_free_recorded, .init = setup) {
    enum { WANT = HP_SAMPLE_WAYS + 1 };
    hp_config.quiet = true;
    uintptr_t same[WANT];
    size_t n = 0;
    uint32_t b0 = hp_sample_bucket((void *)0x7f1000000000u);
    for (uintptr_t a = 0x7f1000000000u; n < WANT; a += 16)
        if (hp_sample_bucket((void *)a) == b0)
            same[n++] = a;
    uintptr_t other = 0x7f2000000000u;
    while (hp_sample_bucket((void *)other) == b0)
        other += 16;
    cr_expect(!hp_sample_free((void *)other), "an empty bucket before the overflow");
    for (size_t i = 0; i < WANT; i++)
        hp_sample_keep((void *)same[i]);
    cr_assert(hp_sample_overflowed);
    cr_expect(hp_sample_free((void *)other), "after the overflow every free is recorded");
    for (size_t i = 0; i < HP_SAMPLE_WAYS; i++)
        cr_expect(hp_sample_free((void *)same[i]), "kept block %zu", i);
    cr_expect_eq(hp_sample_counts[b0], 0);
}

// The entry points' unsampled path (hp_sample_skip_*): it charges the countdown only when the
// call records nothing, and leaves every other case (not on, a sample point in the block, a
// block of the set) to the full path's decision.
Test(sample, skip_only_when_nothing_is_recorded, .init = setup) {
    hp_state_set(HP_STATE_ON);
    cr_assert(hp_sample_alloc((size_t)1 << 50)); // seeds this thread's generator
    hp_tls_sample_left = 1000;
    cr_expect(hp_sample_skip_alloc(100));
    cr_expect_eq(hp_tls_sample_left, 900);
    cr_expect(!hp_sample_skip_alloc(900), "a sample point in the block");
    cr_expect_eq(hp_tls_sample_left, 900, "not charged: the full path decides");
    cr_expect(hp_sample_alloc(900), "and samples it");
    hp_tls_sample_left = 1000;
    hp_tls_guard = HP_GUARD_FOREVER; // nested in the shim: passed through either way
    cr_expect(hp_sample_skip_alloc(1));
    cr_expect_eq(hp_tls_sample_left, 999);
    cr_expect(hp_sample_skip_free((void *)0x7f3000000000u));
    hp_tls_guard = 0;
    hp_sample_keep((void *)0x7f3000000000u);
    cr_expect(!hp_sample_skip_free((void *)0x7f3000000000u), "a sampled block");
    cr_expect(hp_sample_free((void *)0x7f3000000000u));
    cr_expect(hp_sample_skip_free((void *)0x7f3000000000u), "no longer in the set");
    hp_state_set(HP_STATE_FINISHED);
    cr_expect(!hp_sample_skip_alloc(1), "not recording: the full prologue decides");
    hp_config.sample_bytes = 0;
    hp_state_set(HP_STATE_ON);
    cr_expect(!hp_sample_skip_alloc(1), "full mode");
    cr_expect(!hp_sample_skip_free((void *)0x7f3000000000u), "full mode");
}
