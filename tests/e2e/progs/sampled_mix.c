// SPDX-License-Identifier: MIT
// A deterministic allocation mix for sampled recording (test_pprof.c, bench/sampled_accuracy.sh):
// five sites of different block sizes allocate ~8.4 GB in all (argv[1] rounds, default 12000),
// each keeping its last 8 blocks live and every 1000th block until exit. The full trace of the
// same run is the exact truth the sampled estimates are held to. Per round:
//   small_strings  32 x 1.5-2.5 KiB (malloc)   ~9%  of the bytes
//   records        16 x 6-10 KiB    (calloc)   ~18%
//   buffers         8 x 20-28 KiB   (malloc)   ~27%
//   images          2 x 80-112 KiB  (malloc)   ~27%
//   archives        1 x 1 MiB every 8th round  ~18%  (mmap'd by glibc: large blocks)
// Blocks are not filled (one byte is written), so the run costs allocator time only.
#include <stdlib.h>

#define RING 8
#define KEEP_EVERY 1000

typedef struct site {
    void *ring[RING];
    unsigned next;
    unsigned long n;
} site_t;

// Keeps a site function's frame on the stack: without it `return malloc(n)` is a tail call and
// every site would be named main.
#define NO_TAIL(p) __asm__ volatile("" : : "r"(p) : "memory")

static void *kept[1 << 14];
static unsigned n_kept;

static void put(site_t *s, void *p) {
    if (!p)
        exit(2);
    *(volatile char *)p = 1;
    if (++s->n % KEEP_EVERY == 0 && n_kept < sizeof kept / sizeof *kept) {
        kept[n_kept++] = p; // live until exit
        return;
    }
    free(s->ring[s->next]);
    s->ring[s->next] = p;
    s->next = (s->next + 1) % RING;
}

__attribute__((noinline)) static void *small_strings(unsigned i) {
    void *p = malloc(1536 + (i * 37u) % 1024);
    NO_TAIL(p);
    return p;
}
__attribute__((noinline)) static void *records(unsigned i) {
    void *p = calloc(1, 6144 + (i * 101u) % 4096);
    NO_TAIL(p);
    return p;
}
__attribute__((noinline)) static void *buffers(unsigned i) {
    void *p = malloc(20480 + (i * 211u) % 8192);
    NO_TAIL(p);
    return p;
}
__attribute__((noinline)) static void *images(unsigned i) {
    void *p = malloc(81920 + (i * 1009u) % 32768);
    NO_TAIL(p);
    return p;
}
__attribute__((noinline)) static void *archives(void) {
    void *p = malloc(1u << 20);
    NO_TAIL(p);
    return p;
}

int main(int argc, char **argv) {
    long rounds = argc > 1 ? atol(argv[1]) : 12000;
    static site_t a, b, c, d, e;
    for (long r = 0; r < rounds; r++) {
        unsigned u = (unsigned)r;
        for (unsigned k = 0; k < 32; k++)
            put(&a, small_strings(u * 32 + k));
        for (unsigned k = 0; k < 16; k++)
            put(&b, records(u * 16 + k));
        for (unsigned k = 0; k < 8; k++)
            put(&c, buffers(u * 8 + k));
        for (unsigned k = 0; k < 2; k++)
            put(&d, images(u * 2 + k));
        if (r % 8 == 0)
            put(&e, archives());
    }
    site_t *all[] = {&a, &b, &c, &d, &e};
    for (unsigned s = 0; s < 5; s++)
        for (unsigned k = 0; k < RING; k++)
            free(all[s]->ring[k]);
    return 0;
}
