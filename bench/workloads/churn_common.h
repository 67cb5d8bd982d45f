/* SPDX-License-Identifier: MIT */
/* Shared allocator-churn kernel for c_churn and c_threads.
 * Every operation frees one slot of a live table and mallocs a new block of a
 * mixed small size into it, so mallocs and frees come in pairs.  The work is
 * done at the bottom of a call chain 8-15 frames deep built from non-inlined
 * helpers, so profilers have a realistic stack to unwind. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noclone))
#define SLOTS 4096
#define BATCH 32

struct churn {
    uint64_t rng;
    uint64_t sum;
    void *slot[SLOTS];
    long ops_left;
};

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    return *s = x;
}

static size_t pick_size_exact(uint64_t r);

/* Sizes are rounded to 16 bytes unless built with -DEXACT_SIZES: with every
 * byte size distinct, heaptrack 1.4.0's interpreter blows up (its set of
 * (size, stack) pairs grows to >10 GB after ~50k events) -- bin/c_churn_exact
 * reproduces that. */
static size_t pick_size(uint64_t r)
{
#ifndef EXACT_SIZES
    return (pick_size_exact(r) + 15) & ~(size_t)15;
}
#else
    return pick_size_exact(r);
}
#endif
static size_t pick_size_exact(uint64_t r)
{
    unsigned k = r & 63;
    if (k < 40) return 8 + (r >> 8) % 56;        /* 8..63   */
    if (k < 58) return 64 + (r >> 8) % 448;      /* 64..511 */
    if (k < 63) return 512 + (r >> 8) % 1536;    /* 512..2047 */
    return 2048 + (r >> 8) % 6144;               /* 2048..8191 */
}

static NOINLINE void leaf_work(struct churn *c)
{
    for (int i = 0; i < BATCH && c->ops_left > 0; i++, c->ops_left--) {
        uint64_t r = xorshift(&c->rng);
        unsigned idx = (r >> 32) % SLOTS;
        free(c->slot[idx]);
        size_t n = pick_size(r);
        unsigned char *p = malloc(n);
        if (!p) abort();
        p[0] = (unsigned char)r;
        p[n - 1] = (unsigned char)(r >> 8);
        c->sum += p[0] + n;
        c->slot[idx] = p;
    }
}

/* Two different frames so the profile sees distinct call paths.  The
 * volatile local read after each call keeps every level a real frame: with
 * a plain "return r + 1" GCC turns the recursion into a loop. */
static NOINLINE int descend_b(struct churn *c, int depth, uint64_t path);
static NOINLINE int descend_a(struct churn *c, int depth, uint64_t path)
{
    volatile int keep = depth;
    if (depth == 0) { leaf_work(c); return 0; }
    int r = (path & 1) ? descend_b(c, depth - 1, path >> 1)
                       : descend_a(c, depth - 1, path >> 1);
    return r + keep;
}
static NOINLINE int descend_b(struct churn *c, int depth, uint64_t path)
{
    volatile int keep = depth;
    if (depth == 0) { leaf_work(c); return 0; }
    int r = (path & 1) ? descend_a(c, depth - 1, path >> 1)
                       : descend_b(c, depth - 1, path >> 1);
    return r + keep;
}

/* Runs `ops` malloc/free pairs; returns a checksum. */
static NOINLINE uint64_t run_churn(uint64_t seed, long ops)
{
    struct churn *c = calloc(1, sizeof *c);
    if (!c) abort();
    c->rng = seed | 1;
    c->ops_left = ops;
    volatile int sink = 0;
    for (uint64_t it = 0; c->ops_left > 0; it++) {
        /* depth 3..10 below run_churn -> 9..16 frames from malloc to _start */
        int depth = 3 + (int)(it % 8);
        uint64_t path = (it * 0x9E3779B97F4A7C15ull) >> 58; /* 64 path shapes */
        sink += descend_a(c, depth, path);
    }
    for (int i = 0; i < SLOTS; i++) free(c->slot[i]);
    uint64_t s = c->sum + (uint64_t)sink;
    free(c);
    return s;
}
