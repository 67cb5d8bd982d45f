// SPDX-License-Identifier: MIT
// bench/tools/clock_context.c: what one TSC read costs where the shim takes it, modelled.
//
// `rdtsc` back to back costs ~11.6 ns on the 2-vCPU AMD EPYC VM, and perf puts ~25% of the
// shim's samples on the instructions after the two reads of a malloc/free pair (docs/design.md
// "The clock"): a read that waits for memory operations in flight before it, or holds up what
// comes after, costs more than its own cycles. This program measures that on the machine it
// runs on, first in isolation (the read alone, after stores to cold lines, after loads of cold
// lines), then in a model of the shim's two hooks around a
// churn loop like bench/workloads/c_churn (a slot picked at random, its block "freed" and a new
// one "allocated" in its place, first and last byte written), with the read at each place the
// hooks could take it without breaking the trace's order (a free's time before the real free, an
// allocation's after the real malloc):
//   free:   [E] read, prefetch the header and first line, [A] read, measure the block's lines (the header
//           first: its size says how many), [B] read, store the ring entry, the real free's
//           store of its list link
//   malloc: [F] read, the real malloc's loads of the list head and the block's link, [C] read, fill the
//           block's measured lines with the pattern, walk (loads of a hot stack copy), [D] read,
//           store the ring entry
// Variants: AD (the shim since session 12: the free at A, the malloc at D), AC, BD, BC, ED, EC
// (E: the free's read first, so that it cannot wait for the prefetches: on the Xeon of session
// 26 a read waited for every load in flight before it, +150 ns after two cold loads), EF (the
// malloc's read before the real call too: not a place the trace's order allows by itself, since
// another thread's free of the block may come after it; it says what a way to allow it would
// gain), and NONE
// (no read at all: what the two reads cost together is NONE's time less AD's). Each variant runs
// ROUNDS times in turn with the others and the minimum ns a pair is printed (the minimum: noise
// only ever adds time).
// Usage: clock_context [pairs (default 4000000)] [rounds (default 7)] [arena MiB (default 4)]
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if !defined(__x86_64__)
#error "clock_context measures the x86-64 TSC read the shim takes (clock.h)"
#endif
#include <x86intrin.h>

#define SLOTS 4096u
static uint64_t ARENA = 4u << 20; // bytes the blocks are placed in: c_churn's heap is ~2 MiB
#define LINE 64u
#define MEASURE_LINES 8u // HEAPPROF_TOUCH_SAMPLE_BYTES 512: at most 8 lines a block
#define RING (2u << 20)
#define STACK_WORDS 24u

static double now_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}

static uint64_t xorshift(uint64_t *s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

// c_churn's sizes (bench/workloads/churn_common.h), rounded to 16 bytes
static uint32_t pick_size(uint64_t r) {
    unsigned k = r & 63;
    uint32_t n = k < 40 ? 8 + (r >> 8) % 56
               : k < 58 ? 64 + (r >> 8) % 448
               : k < 63 ? 512 + (r >> 8) % 1536
                        : 2048 + (r >> 8) % 6144;
    return (n + 15) & ~15u;
}

static uint8_t *arena, *ring;
static uint64_t stack_copy[STACK_WORDS], stack_live[STACK_WORDS];
static uint8_t *slot[SLOTS];
static uint64_t sink;

// Lines of a block the measure visits: all up to 512 bytes, else 8 spread over it.
static inline uint32_t line_step(uint32_t size) {
    uint32_t lines = (size + LINE - 1) / LINE, step = 1;
    while (lines / step > MEASURE_LINES)
        step *= 2;
    return step;
}

enum { A = 1, B = 2, C = 4, D = 8, E = 16, F = 32 };

static inline uint64_t tsc(void) { return __rdtsc(); }

__attribute__((noinline)) static double run(unsigned where, uint64_t pairs, uint64_t seed) {
    uint64_t rng = seed, ring_pos = 0, t = 0;
    double t0 = now_ns();
    for (uint64_t i = 0; i < pairs; i++) {
        uint64_t r = xorshift(&rng);
        unsigned idx = (unsigned)(r >> 32) % SLOTS;
        uint8_t *old = slot[idx];
        // ---- free(old)
        if (where & E)
            t += tsc();
        __builtin_prefetch(old - 16);
        __builtin_prefetch(old);
        if (where & A)
            t += tsc();
        // the chunk header (blocks are placed at random and may overlap: kept in range)
        uint32_t osize = *(uint32_t *)(old - 8) & 8191;
        uint32_t step = line_step(osize), diff = 0;
        for (uint32_t off = 0; off < osize; off += step * LINE)
            diff += old[off] != 0x5a;
        if (where & B)
            t += tsc();
        memcpy(ring + ring_pos, &diff, 4); // the ring entry (21 bytes in the shim)
        memcpy(ring + ring_pos + 4, &t, 8);
        ring_pos = (ring_pos + 21) & (RING - 1);
        *(uint64_t *)old = (uint64_t)(uintptr_t)slot[(idx + 1) % SLOTS]; // the free list link
        // ---- malloc(n): the block at a new random place of the arena
        if (where & F)
            t += tsc();
        uint32_t n = pick_size(r);
        uint64_t where_new = (xorshift(&rng) % (ARENA / 16 - 1024)) * 16 + 16;
        uint8_t *p = arena + where_new;
        sink += *(volatile uint64_t *)p; // the real malloc reads the block's link
        *(uint32_t *)(p - 8) = n;        // and its header is ours to keep (the model's size)
        if (where & C)
            t += tsc();
        uint32_t pstep = line_step(n);
        for (uint32_t off = 0; off < n; off += pstep * LINE)
            memset(p + off, 0x5a, n - off < LINE ? n - off : LINE);
        uint64_t same = 0; // the walk: the stack against the last one, all in cache
        for (unsigned k = 0; k < STACK_WORDS; k++)
            same |= stack_copy[k] ^ stack_live[k];
        if (where & D)
            t += tsc();
        memcpy(ring + ring_pos, &same, 8);
        memcpy(ring + ring_pos + 8, &t, 8);
        ring_pos = (ring_pos + 21) & (RING - 1);
        // ---- the program: first and last byte
        p[0] = (uint8_t)r;
        p[n - 1] = (uint8_t)(r >> 8);
        slot[idx] = p;
    }
    double ns = (now_ns() - t0) / (double)pairs;
    sink += t + ring[ring_pos];
    return ns;
}

// The read alone, after 8 stores to cold lines, after 2 loads of cold lines (lines at random in
// 64 MiB: past every cache of the machines at hand): with and without.
#define COLD (64u << 20)
static void isolated(uint64_t iters) {
    uint8_t *cold = aligned_alloc(4096, COLD);
    if (!cold)
        return;
    memset(cold, 0, COLD);
    static const char *what[3] = {"alone", "after 8 stores to cold lines", "after 2 cold loads"};
    for (int kind = 0; kind < 3; kind++) {
        double with = 1e30, without = 1e30;
        for (int rep = 0; rep < 3; rep++) {
            for (int read = 0; read < 2; read++) {
                uint64_t x = 12345, s = 0;
                double t0 = now_ns();
                for (uint64_t i = 0; i < iters; i++) {
                    uint64_t off = (xorshift(&x) % (COLD / LINE - 16)) * LINE;
                    if (kind == 1)
                        for (int k = 0; k < 8; k++)
                            *(volatile uint64_t *)(cold + off + k * LINE) = i;
                    else if (kind == 2)
                        s += cold[off] + cold[off + 512];
                    s += read ? __rdtsc() : i;
                }
                double ns = (now_ns() - t0) / (double)iters;
                sink += s;
                if (read && ns < with)
                    with = ns;
                if (!read && ns < without)
                    without = ns;
            }
        }
        printf("isolated  %-30s %6.2f ns an iteration with the read, %6.2f without: %+6.2f\n",
               what[kind], with, without, with - without);
    }
    free(cold);
}

int main(int argc, char **argv) {
    uint64_t pairs = argc > 1 ? strtoull(argv[1], NULL, 10) : 4000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 7;
    if (argc > 3)
        ARENA = strtoull(argv[3], NULL, 10) << 20;
    if (!pairs || rounds < 1 || ARENA < (1u << 20)) {
        fprintf(stderr, "usage: clock_context [pairs] [rounds] [arena MiB >= 1]\n");
        return 2;
    }
    arena = aligned_alloc(4096, ARENA);
    ring = aligned_alloc(4096, RING);
    if (!arena || !ring) {
        fprintf(stderr, "clock_context: out of memory\n");
        return 2;
    }
    memset(arena, 0, ARENA);
    memset(ring, 0, RING);
    for (unsigned k = 0; k < STACK_WORDS; k++)
        stack_copy[k] = stack_live[k] = 0x400000 + k * 40;
    uint64_t seed = 88172645463325252ull;
    for (unsigned k = 0; k < SLOTS; k++) { // the first blocks, with their headers
        uint8_t *p = arena + (xorshift(&seed) % (ARENA / 16 - 1024)) * 16 + 16;
        *(uint32_t *)(p - 8) = 16;
        slot[k] = p;
    }
    isolated(pairs);
    static const struct {
        const char *name;
        unsigned where;
    } v[] = {{"AD", A | D}, {"AC", A | C}, {"BD", B | D}, {"BC", B | C},
                       {"ED", E | D}, {"EC", E | C}, {"EF", E | F}, {"NONE", 0}};
    enum { NV = sizeof v / sizeof v[0] };
    double best[NV];
    for (int k = 0; k < NV; k++)
        best[k] = 1e30;
    run(A | D, pairs / 4, seed); // warm-up
    for (int round = 0; round < rounds; round++)
        for (int k = 0; k < NV; k++) {
            int j = (k + round) % NV; // the order turns each round
            double ns = run(v[j].where, pairs, seed + (uint64_t)round);
            if (ns < best[j])
                best[j] = ns;
        }
    for (int k = 0; k < NV; k++)
        printf("hooks     %-4s %7.2f ns a malloc/free pair (min of %d rounds of %llu), %+6.2f "
               "against AD\n",
               v[k].name, best[k], rounds, (unsigned long long)pairs, best[k] - best[0]);
    return sink == 42 ? 1 : 0;
}
