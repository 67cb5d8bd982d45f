// SPDX-License-Identifier: MIT
// Sampled recording's rare paths: drawing the next sample point, and the set of sampled blocks.
// Runs inside malloc on the app's threads: no locks, no allocation of the host's, no stdio; the
// generator is per thread, the set is lock-free (compare-and-swap per slot). The estimator that
// weights samples back up lives in the analyzer (docs/sampling.md).
#include "sample.h"

#include "diag.h"
#include "mem.h"

#include <unistd.h>

HP_TLS int64_t hp_tls_sample_left;
static HP_TLS uint64_t hp_tls_sample_rng; // splitmix64 state; 0: not seeded yet

_Atomic uint8_t *hp_sample_counts;
_Atomic bool hp_sample_overflowed;
_Atomic uint8_t *_Atomic hp_sample_free_counts;
static _Atomic uint8_t *all_full; // what frees read after an overflow: every bucket non-zero
static _Atomic uint64_t (*slots)[HP_SAMPLE_WAYS];
static _Atomic uint64_t n_threads_seeded;

bool hp_sample_init(void) {
    size_t n = (size_t)1 << HP_SAMPLE_BUCKETS_LOG2;
    slots = hp_mem_map(n * sizeof *slots);
    hp_sample_counts = hp_mem_map(n);
    all_full = hp_mem_map(n);
    if (!slots || !hp_sample_counts || !all_full)
        return false;
    for (size_t b = 0; b < n; b++)
        atomic_store_explicit(&all_full[b], 1, memory_order_relaxed);
    atomic_store_explicit(&hp_sample_free_counts, hp_sample_counts, memory_order_relaxed);
    return true;
}

static uint64_t splitmix64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

// -ln(u) for u uniform in (0, 1], from 53 random bits: an exponential draw of mean 1. Our own
// logarithm (u = m * 2^e, ln m by the atanh series, |error| < 1e-9) so the shim needs no libm.
static double neg_ln_uniform(uint64_t r) {
    union {
        double d;
        uint64_t b;
    } v = {.d = (double)((r >> 11) + 1) * 0x1p-53};
    int e = (int)((v.b >> 52) & 0x7ff) - 1023;
    v.b = (v.b & ((1ull << 52) - 1)) | (1023ull << 52); // m in [1, 2)
    double m = v.d;
    if (m > 1.4142135623730951) { // m in [sqrt(1/2), sqrt(2)): z stays below 0.172
        m *= 0.5;
        e++;
    }
    double z = (m - 1) / (m + 1), z2 = z * z;
    double ln_m =
        2 * z * (1 + z2 * (1 / 3. + z2 * (1 / 5. + z2 * (1 / 7. + z2 * (1 / 9. + z2 / 11.)))));
    return -(e * 0.6931471805599453 + ln_m);
}

// Bytes to the next sample point: exponential of mean N, at least 1.
static int64_t next_interval(void) {
    double x = neg_ln_uniform(splitmix64(&hp_tls_sample_rng)) * (double)hp_config.sample_bytes;
    if (x > 0x1p62)
        x = 0x1p62;
    return (int64_t)x + 1;
}

// A thread's generator: the seed (HEAPPROF_SAMPLE_SEED) and the order in which threads made
// their first allocation, so a single-threaded program samples the same blocks on every run.
static void seed_thread(void) {
    uint64_t k = atomic_fetch_add_explicit(&n_threads_seeded, 1, memory_order_relaxed);
    uint64_t s = hp_config.sample_seed ^ (k * 0xD1B54A32D192ED03ull);
    splitmix64(&s);
    hp_tls_sample_rng = s | 1; // never 0, which means "not seeded"
}

HP_NOINLINE HP_COLD bool hp_sample_alloc_slow(size_t size) {
    int64_t left = hp_tls_sample_left; // already less size
    if (HP_UNLIKELY(hp_tls_sample_rng == 0)) {
        seed_thread();
        left += next_interval(); // the thread's first countdown starts at this allocation
        if (left > 0) {
            hp_tls_sample_left = left;
            return false;
        }
    }
    (void)size;
    // A sample point fell in this block. The next one lies an exponential draw beyond the
    // block's end: the process is memoryless, so the points the block holds beyond the first
    // need not be drawn one by one (a 1 PiB request that fails must not loop 2^38 times). A
    // block holding several points is one sample; its weight accounts for that.
    left = next_interval();
    hp_tls_sample_left = left;
    return true;
}

void hp_sample_keep(const void *p) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    uint32_t b = hp_sample_bucket(p);
    // The count first: a free that finds it 0 knows the block is not here; a free of p can only
    // come after the program got p from this call, so it sees the count raised.
    atomic_fetch_add_explicit(&hp_sample_counts[b], 1, memory_order_relaxed);
    for (unsigned w = 0; w < HP_SAMPLE_WAYS; w++) {
        uint64_t empty = 0;
        if (atomic_load_explicit(&slots[b][w], memory_order_relaxed) == 0 &&
            atomic_compare_exchange_strong_explicit(&slots[b][w], &empty, a,
                                                    memory_order_relaxed, memory_order_relaxed))
            return;
    }
    atomic_fetch_sub_explicit(&hp_sample_counts[b], 1, memory_order_relaxed);
    // the flag first: a free sent to the slow path by the page of non-zero bytes must find it
    bool was = atomic_exchange(&hp_sample_overflowed, true);
    atomic_store_explicit(&hp_sample_free_counts, all_full, memory_order_release);
    if (!was && !hp_config.quiet)
        hp_diag_line("sampled blocks overflowed heapprof's table (HEAPPROF_SAMPLE_BYTES is "
                     "small for this heap); every free is recorded from now on",
                     (char *)NULL);
}

HP_NOINLINE bool hp_sample_free_slow(const void *p, uint32_t b) {
    uint64_t a = (uint64_t)(uintptr_t)p;
    for (unsigned w = 0; w < HP_SAMPLE_WAYS; w++) {
        uint64_t want = a;
        if (atomic_load_explicit(&slots[b][w], memory_order_relaxed) == a &&
            atomic_compare_exchange_strong_explicit(&slots[b][w], &want, 0,
                                                    memory_order_relaxed, memory_order_relaxed)) {
            atomic_fetch_sub_explicit(&hp_sample_counts[b], 1, memory_order_relaxed);
            return true;
        }
    }
    return atomic_load_explicit(&hp_sample_overflowed, memory_order_relaxed);
}

void hp_sample_fork_child(void) {
    // The parent's thread goes on with the same generator: the child's must differ from it.
    uint64_t s = hp_tls_sample_rng ^ ((uint64_t)getpid() * 0x9E3779B97F4A7C15ull);
    splitmix64(&s);
    hp_tls_sample_rng = s | 1;
}
