// SPDX-License-Identifier: MIT
// touch.c driven directly: after hp_touch_fill, the program's writes are counted exactly (every
// line measured) for blocks of every size and every write pattern, against a brute-force count;
// with line sampling the estimate is the sampled lines' count times the stride; and realloc's
// keep leaves the preserved bytes alone.
#include "config.h"
#include "real.h"
#include "ringent.h"
#include "touch.h"
#include "touch_live.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <malloc.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

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
static uint64_t next(void) { return xorshift64(&rng); }

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

// The AVX2 and SSE2 counts (touch.c picks one by the CPU) give the same figures, every line
// measured and sampled, for every length the loops and their tails can meet.
Test(touch, the_vector_paths_agree, .init = setup) {
    for (int sampled = 0; sampled < 2; sampled++) {
        hp_config.touch_sample_bytes = sampled ? 512 : 1u << 20;
        for (size_t size = 1; size <= 9000; size += (size < 300 ? 1 : 61)) {
            uint8_t *p = malloc(size);
            size_t usable = hp_touch_usable(p);
            hp_touch_fill(p, usable, 0);
            for (size_t i = 0; i < size; i++)
                if (next() % 5 == 0)
                    p[i] = (uint8_t)(next() % 3 == 0 ? 0 : next());
            hp_touch_t t[2];
            for (int avx2 = 0; avx2 < 2; avx2++) {
                if (hp_touch_set_avx2(avx2) != (bool)avx2)
                    cr_skip_test("no AVX2 here");
                hp_touch_measure(p, &t[avx2]);
            }
            cr_assert_eq(t[0].method, t[1].method, "size %zu", size);
            cr_assert_eq(t[0].touched, t[1].touched, "size %zu sampled %d", size, sampled);
            cr_assert_eq(t[0].touched_nz, t[1].touched_nz, "size %zu sampled %d", size, sampled);
            if (!sampled) {
                uint64_t differ = 0, nonzero = 0;
                for (size_t i = 0; i < usable; i++) {
                    differ += p[i] != HPT_TOUCH_PATTERN;
                    nonzero += p[i] != 0;
                }
                cr_assert_eq(t[1].touched, differ, "size %zu", size);
                cr_assert_eq(t[1].touched_nz, nonzero, "size %zu", size);
            }
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

// Pages of [p, p + n) resident now.
static size_t resident_pages(const uint8_t *p, size_t n) {
    uintptr_t a = (uintptr_t)p & ~(uintptr_t)4095, e = (uintptr_t)p + n;
    static unsigned char vec[(64u << 20) / 4096 + 2];
    size_t pages = (e - a + 4095) / 4096, r = 0;
    cr_assert_leq(pages, sizeof vec);
    cr_assert_eq(mincore((void *)a, pages * 4096, vec), 0);
    for (size_t i = 0; i < pages; i++)
        r += vec[i] & 1;
    return r;
}

// A fresh 8 MiB block: filling it makes no page resident, and what the program writes there
// is counted by the pages it faulted in.
Test(touch, a_fresh_large_block_stays_out_of_rss_and_counts_faulted_pages, .init = setup) {
    size_t n = 8u << 20;
    uint8_t *p = malloc(n);
    size_t before = resident_pages(p, n);
    hp_touch_fill(p, hp_touch_usable(p), 0); // above touch_fill_max
    cr_assert_eq(resident_pages(p, n), before, "filling made pages resident");
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.method, HPT_TOUCH_PAGES);
    // a sanitizer's allocator may fill the first 4 KiB: at most 3 pages
    cr_assert_leq(t.touched, 3 * 4096, "%llu bytes before any write",
                  (unsigned long long)t.touched);
    memset(p + (1u << 20), 1, 1u << 20);
    hp_touch_measure(p, &t);
    cr_assert_geq(t.touched, 1u << 20);
    cr_assert_leq(t.touched, (1u << 20) + 2 * 4096 + 3 * 4096);
    // zeros written to a fresh page are not counted by the non-zero figure (calloc's)
    cr_assert_leq(t.touched_nz, (1u << 20) + 3 * 4096);
    cr_assert_geq(t.touched_nz, 1u << 20);
    free(p);
}

// A large block on pages an earlier owner wrote (glibc's heap after its mmap threshold rose):
// those pages are resident, so they are filled and the program's writes count exactly; a page
// that was not resident (dropped here with MADV_DONTNEED) counts whole once written, and not at
// all while it is left alone.
Test(touch, a_recycled_large_block_counts_exactly_what_its_owner_wrote, .init = setup) {
    hp_config.touch_sample_bytes = 1u << 30; // every byte
    size_t n = 4u << 20;
    uint8_t *p = malloc(n);
    size_t usable = hp_touch_usable(p);
    memset(p, 0x11, usable); // the earlier owner's bytes
    uint8_t *page = (uint8_t *)(((uintptr_t)p + (2u << 20)) & ~(uintptr_t)4095);
    cr_assert_eq(madvise(page, 3 * 4096, MADV_DONTNEED), 0);
    hp_touch_fill(p, usable, 0);
    cr_assert_eq(resident_pages(page, 3 * 4096), 0, "a dropped page was filled");
    memset(p + 1000, 2, 3000);   // recycled pages: exact
    memset(p + 500000, 0, 777);  // zeros are writes too
    page[4096 + 5] = 7;          // the middle dropped page, faulted in
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.method, HPT_TOUCH_PAGES);
    cr_assert_eq(t.touched, 3000 + 777 + 4096, "%llu", (unsigned long long)t.touched);
    // as a calloc block: the earlier owner's 0x11 bytes count (calloc would have zeroed them)
    cr_assert_eq(t.touched_nz, usable - 3 * 4096 - 777 + 1);
    free(p);
}

// The default sampling: one line a page at most, so the 1 KiB a Vec::with_capacity(1 << 20)
// holds is reported as one page, not as 1/8 of the block.
Test(touch, a_sampled_large_block_is_within_a_page_per_written_range, .init = setup) {
    hp_config.touch_sample_bytes = 512;
    size_t n = 1u << 20;
    uint8_t *p = malloc(n);
    size_t usable = hp_touch_usable(p);
    memset(p, 0x11, usable);
    hp_touch_fill(p, usable, 0);
    memset(p, 3, 1024);
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.method, HPT_TOUCH_PAGES);
    cr_assert_leq(t.touched, 1024 + 4096, "%llu", (unsigned long long)t.touched);
    cr_assert_geq(t.touched + 4096, 1024);
    memset(p, 3, usable);
    hp_touch_measure(p, &t);
    cr_assert_geq(t.touched + 4096, usable);
    cr_assert_leq(t.touched, usable + 4096);
    free(p);
}

// realloc's kept bytes of a large block are left as they are; its new tail is filled on the
// resident pages only.
Test(touch, a_large_realloc_tail_is_measured_like_a_new_block, .init = setup) {
    hp_config.touch_sample_bytes = 1u << 30;
    size_t n = 2u << 20;
    uint8_t *p = malloc(n);
    size_t usable = hp_touch_usable(p);
    memset(p, 0x11, usable);
    size_t keep = 300000;
    hp_touch_fill(p, usable, keep);
    for (size_t i = 0; i < keep; i++)
        cr_assert_eq(p[i], 0x11, "kept byte %zu overwritten", i);
    hp_touch_t t;
    hp_touch_measure(p, &t);
    cr_assert_eq(t.touched, keep, "the kept bytes count as touched, the tail not");
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

#if !defined(__SANITIZE_ADDRESS__) // the lean path reads glibc's chunk header
// The lean path (a block measured whole whose usable size comes from the chunk header:
// hp_touch_fill_fresh, and hp_touch_measure with AVX2) fills every usable byte and counts as
// brute force and the SSE2 path do, for every size up to and past the sample size.
Test(touch, the_lean_path_agrees) {
    cr_assert(hp_real_resolve());
    hp_touch_init(); // glibc's own entry points (setup's malloc_usable_size may be the binary's)
    hp_config.touch = true;
    hp_config.touch_fill_max = 128 * 1024;
    hp_config.touch_sample_bytes = 512;
    void *warm[80];
    for (size_t i = 0; i < 80; i++) // the header is trusted after 64 blocks agreed
        hp_touch_usable(warm[i] = hp_real.malloc(i * 8));
    for (size_t i = 0; i < 80; i++)
        hp_real.free(warm[i]);
    cr_assert(hp_touch_header_trusted());
    for (size_t size = 1; size <= 1200; size++) {
        uint8_t *p = hp_real.malloc(size);
        size_t usable = hp_touch_usable(p);
        memset(p, 0x11, usable); // an earlier owner's bytes
        hp_touch_set_avx2(size & 1); // the fill's AVX2 and SSE2 paths, in turn
        hp_touch_fill_fresh(p);
        hp_touch_t t[2];
        for (size_t i = 0; i < usable && usable <= 512; i++)
            cr_assert_eq(p[i], HPT_TOUCH_PATTERN, "size %zu byte %zu", size, i);
        hp_touch_measure(p, &t[0]);
        cr_assert_eq(t[0].touched, 0, "size %zu: every measured byte filled", size);
        for (size_t i = 0; i < size; i++)
            if (next() % 5 == 0)
                p[i] = (uint8_t)(next() % 3 == 0 ? 0 : next());
        for (int avx2 = 0; avx2 < 2; avx2++) {
            if (hp_touch_set_avx2(avx2) != (bool)avx2)
                cr_skip_test("no AVX2 here");
            hp_touch_measure(p, &t[avx2]);
        }
        cr_assert_eq(t[0].method, t[1].method, "size %zu", size);
        cr_assert_eq(t[0].touched, t[1].touched, "size %zu", size);
        cr_assert_eq(t[0].touched_nz, t[1].touched_nz, "size %zu", size);
        if (usable <= 512) {
            uint64_t differ = 0, nonzero = 0;
            for (size_t i = 0; i < usable; i++) {
                differ += p[i] != HPT_TOUCH_PATTERN;
                nonzero += p[i] != 0;
            }
            cr_assert_eq(t[1].method, HPT_TOUCH_FILL, "size %zu", size);
            cr_assert_eq(t[1].touched, differ, "size %zu", size);
            cr_assert_eq(t[1].touched_nz, nonzero, "size %zu", size);
        }
        hp_real.free(p);
    }
}
#endif

// ---- blocks live at exit (touch_live.c, hp_touch_measure_live) ----

#if !defined(__SANITIZE_ADDRESS__) // the live measure reads glibc's chunk header
// The measure made by copying agrees with the one made in place, for blocks of every method,
// and a block whose memory is gone gives no figure instead of a fault.
Test(touch_live, the_copying_measure_agrees_and_survives_unmapped_blocks, .init = setup) {
    hp_touch_init();
    hp_config.touch_sample_bytes = 512;
    // a group of blocks of every method (some larger than one copy batch), with a mapping that
    // is gone among them: what a block freed by another thread at exit can be
    static const size_t sizes[] = {24, 500, 3000, 100000, 0, 1u << 20, 9u << 20, 70000};
    enum { N = sizeof sizes / sizeof *sizes };
    uint64_t addr[N];
    hp_touch_t want[N], got[N];
    for (size_t i = 0; i < N; i++) {
        if (!sizes[i]) {
            uint8_t *m = mmap(NULL, 3 * 4096, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            cr_assert_neq(m, MAP_FAILED);
            cr_assert_eq(munmap(m, 3 * 4096), 0);
            addr[i] = (uint64_t)(uintptr_t)(m + 16);
            want[i].method = -1;
            continue;
        }
        uint8_t *p = hp_real.malloc(sizes[i]);
        size_t usable = hp_touch_usable(p);
        memset(p, 0x11, usable); // an earlier owner's bytes (for the large ones: resident)
        hp_touch_fill(p, usable, 0);
        memset(p + sizes[i] / 3, 0, sizes[i] / 4);
        hp_touch_measure(p, &want[i]);
        cr_assert_geq(want[i].method, 0, "size %zu", sizes[i]);
        addr[i] = (uint64_t)(uintptr_t)p;
    }
    for (int sampled = 0; sampled < 2; sampled++) {
        hp_config.touch_sample_bytes = sampled ? 512 : 1u << 30;
        for (size_t i = 0; i < N; i++)
            if (sizes[i])
                hp_touch_measure((void *)(uintptr_t)addr[i], &want[i]);
        hp_touch_measure_live(addr, N, got);
        for (size_t i = 0; i < N; i++) {
            cr_assert_eq(got[i].method, want[i].method, "size %zu", sizes[i]);
            if (want[i].method < 0)
                continue;
            cr_assert_eq(got[i].touched, want[i].touched, "size %zu", sizes[i]);
            cr_assert_eq(got[i].touched_nz, want[i].touched_nz, "size %zu", sizes[i]);
        }
    }
    for (size_t i = 0; i < N; i++)
        if (sizes[i])
            hp_real.free((void *)(uintptr_t)addr[i]);
}
#endif

// Ring entries (ringent.h), as the app threads write them.
static uint8_t *put_alloc(uint8_t *p, hpt_dstate_t *st, uint64_t addr) {
    (void)st;
    return p + hp_re_put_alloc(p, HPT_REC_MALLOC, 0, addr, 1, 64, 0);
}

static uint8_t *put_free(uint8_t *p, hpt_dstate_t *st, uint64_t addr) {
    (void)st;
    return p + hp_re_put_free(p, 0, addr, -1, 0, 0);
}

static uint8_t *put_realloc(uint8_t *p, hpt_dstate_t *st, uint64_t old, uint64_t addr) {
    (void)st;
    return p + hp_re_put_realloc(p, 0, 0, 1, old, addr, 128);
}

// Drains of two threads' records in either order leave the same live set: counts per address,
// a realloc that moved ends its old block, one in place keeps it, a free drained before its
// allocation cancels out; and the table grows past its first size and shrinks again.
Test(touch_live, the_live_set_does_not_depend_on_drain_order) {
    static uint8_t a[1 << 16], b[1 << 16];
    hpt_dstate_t sa = {0}, sb = {0};
    uint8_t *pa = a, *pb = b;
    // thread A: 0x1000 and 0x2000 allocated, 0x2000 grown in place, 0x1000 moved to 0x3000;
    // 0x5000 allocated (thread B frees it)
    pa = put_alloc(pa, &sa, 0x1000);
    pa = put_alloc(pa, &sa, 0x2000);
    pa = put_realloc(pa, &sa, 0x2000, 0x2000);
    pa = put_realloc(pa, &sa, 0x1000, 0x3000);
    pa = put_alloc(pa, &sa, 0x5000);
    // thread B: frees 0x5000, then allocates it again and 0x6000, and frees 0x6000
    pb = put_free(pb, &sb, 0x5000);
    pb = put_alloc(pb, &sb, 0x5000);
    pb = put_alloc(pb, &sb, 0x6000);
    pb = put_free(pb, &sb, 0x6000);
    for (int order = 0; order < 2; order++) {
        hp_touch_live_fork_child(); // an empty table
        if (order == 0) {
            hp_touch_live_note(a, pa);
            hp_touch_live_note(b, pb);
        } else {
            hp_touch_live_note(b, pb);
            hp_touch_live_note(a, pa);
        }
        cr_assert_eq(hp_touch_live_count(), 3, "order %d", order);
        cr_assert(hp_touch_live_has(0x2000) && hp_touch_live_has(0x3000) &&
                  hp_touch_live_has(0x5000));
        cr_assert(!hp_touch_live_has(0x1000) && !hp_touch_live_has(0x6000));
    }
    // 40,000 blocks (the table starts at 16 K slots), then every other one freed
    hp_touch_live_fork_child();
    static uint8_t big[40000 * 32];
    hpt_dstate_t s = {0};
    uint8_t *p = big;
    for (uint64_t i = 0; i < 40000; i++)
        p = put_alloc(p, &s, 0x10000 + i * 48);
    hp_touch_live_note(big, p);
    s = (hpt_dstate_t){0};
    p = big;
    for (uint64_t i = 0; i < 40000; i += 2)
        p = put_free(p, &s, 0x10000 + i * 48);
    hp_touch_live_note(big, p);
    cr_assert_eq(hp_touch_live_count(), 20000);
    for (uint64_t i = 0; i < 40000; i++)
        cr_assert_eq(hp_touch_live_has(0x10000 + i * 48), i % 2 == 1, "block %llu",
                     (unsigned long long)i);
}
