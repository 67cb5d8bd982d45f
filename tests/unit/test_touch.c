// SPDX-License-Identifier: MIT
// touch.c driven directly: after hp_touch_fill, the program's writes are counted exactly (every
// line measured) for blocks of every size and every write pattern, against a brute-force count;
// with line sampling the estimate is the sampled lines' count times the stride; and realloc's
// keep leaves the preserved bytes alone.
#include "config.h"
#include "real.h"
#include "touch.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>

// Reading fresh, never-written blocks is the point of these tests.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"

static void setup(void) {
    cr_assert(hp_real_resolve());
    // the allocator this test really uses (a sanitizer's, in the sanitized build)
    hp_real.malloc_usable_size = malloc_usable_size;
    hp_config.touch = true;
    hp_config.touch_fill_max = 128 * 1024;
    hp_config.touch_sample_bytes = 1u << 20; // every line
}

static uint64_t rng = 88172645463325252ull;
static uint64_t next(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

Test(touch, exact_counts_match_brute_force, .init = setup) {
    for (size_t size = 1; size <= 700; size += (size < 80 ? 1 : 37)) {
        for (int round = 0; round < 8; round++) {
            uint8_t *p = malloc(size);
            size_t usable = hp_touch_usable(p);
            cr_assert_geq(usable, size);
            hp_touch_fill(p, usable, 0);
            // a random subset of bytes written, with values that include 0 and the pattern
            for (size_t i = 0; i < size; i++)
                if (next() % 3 == 0)
                    p[i] = (uint8_t)(round == 0 ? 0 : round == 1 ? HPT_TOUCH_PATTERN : next());
            uint64_t differ = 0, nonzero = 0;
            for (size_t i = 0; i < usable; i++) {
                differ += p[i] != HPT_TOUCH_PATTERN;
                nonzero += p[i] != 0;
            }
            hp_touch_t t;
            hp_touch_measure(p, &t);
            cr_assert_eq(t.method, HPT_TOUCH_FILL, "size %zu", size);
            cr_assert_eq(t.touched, differ, "size %zu round %d", size, round);
            cr_assert_eq(t.touched_nz, nonzero, "size %zu round %d", size, round);
            free(p);
        }
    }
}

Test(touch, calloc_blocks_count_their_non_zero_bytes, .init = setup) {
    uint8_t *p = calloc(1, 300);
    memset(p + 17, 9, 23);
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.touched_nz, 23);
    free(p);
}

Test(touch, sampled_lines_are_scaled_by_the_stride, .init = setup) {
    hp_config.touch_sample_bytes = 512; // 8 lines
    uint8_t *p = malloc(4000);
    size_t usable = hp_touch_usable(p); // 4008: 62 lines, stride 8
    hp_touch_fill(p, usable, 0);
    memset(p, 1, 64 * 9); // lines 0..8: lines 0 and 8 are measured
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.method, HPT_TOUCH_FILL_SAMPLED);
    cr_assert_eq(t.touched, 2 * 64 * 8);
    free(p);
}

Test(touch, realloc_keep_is_preserved_and_growth_stays_measurable, .init = setup) {
    hp_config.touch_sample_bytes = 512;
    uint8_t *p = malloc(100);
    size_t u = hp_touch_usable(p);
    hp_touch_fill(p, u, 0);
    memset(p, 7, 100);
    uint8_t *q = realloc(p, 20000); // stride grows from 1 to a power of two
    size_t keep = u < 20000 ? u : 20000;
    hp_touch_fill(q, hp_touch_usable(q), keep);
    for (size_t i = 0; i < 100; i++)
        cr_assert_eq(q[i], 7, "byte %zu of what realloc kept was overwritten", i);
    hp_touch_t t;
    hp_touch_measure(q, &t);
    cr_assert_eq(t.method, HPT_TOUCH_FILL_SAMPLED);
    // only line 0 of the measured lines was written: 64 bytes (100 written, 64 of them in it)
    size_t k = 1;
    while (hp_touch_usable(q) / 64 / k > 8)
        k <<= 1;
    cr_assert_eq(t.touched, 64 * k);
    free(q);
}

Test(touch, large_blocks_are_never_written_and_measured_by_resident_pages, .init = setup) {
    size_t n = 8u << 20;
    uint8_t *p = malloc(n);
    hp_touch_fill(p, hp_touch_usable(p), 0); // above touch_fill_max: must not touch a byte
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.method, HPT_TOUCH_RESIDENT);
    // a sanitizer's allocator may fill the first 4 KiB: at most 3 pages
    cr_assert_leq(t.touched, 3 * 4096, "%llu bytes resident before any write",
                 (unsigned long long)t.touched);
    memset(p + (1u << 20), 1, 1u << 20);
    hp_touch_measure(p, &t);
    cr_assert_geq(t.touched, 1u << 20);
    cr_assert_leq(t.touched, (1u << 20) + 2 * 4096 + 8192);
    free(p);
}

// With glibc's allocator behind the shim, the usable size read from a block's chunk header is
// what malloc_usable_size says, for heap blocks of every size class and for mmapped ones (which
// always take the call), and the header is trusted once enough blocks have agreed.
Test(touch, glibc_chunk_header_gives_the_usable_size) {
    cr_assert(hp_real_resolve());
    hp_touch_init();
    void *blocks[400];
    size_t n = 0;
    for (size_t size = 0; size < 6000; size += 17)
        blocks[n++] = hp_real.malloc(size);
    blocks[n++] = hp_real.malloc(1u << 20); // mmapped
    blocks[n++] = hp_real.calloc(3, 1000);
    blocks[n++] = hp_real.memalign(4096, 100);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(hp_touch_usable(blocks[i]), hp_real.malloc_usable_size(blocks[i]), "block %zu",
                     i);
    for (size_t i = 0; i < n; i++)
        cr_assert_eq(hp_touch_usable(blocks[i]), hp_real.malloc_usable_size(blocks[i]), "block %zu",
                     i);
#if !defined(__SANITIZE_ADDRESS__) // a sanitizer's allocator may be the real one there
    cr_assert(hp_touch_header_trusted(), "glibc's allocator, but its chunk header is not trusted");
#endif
    for (size_t i = 0; i < n; i++)
        hp_real.free(blocks[i]);
}
