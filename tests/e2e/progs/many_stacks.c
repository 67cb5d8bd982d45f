// SPDX-License-Identifier: MIT
// Generates a trace with N distinct allocation stacks (default 100,000) for the viewer's size and
// speed measurement (docs/viewer.md#size-and-speed): ten functions call each other LEVELS deep,
// the callee at each level picked by one decimal digit of the stack number, so every number
// below 10^LEVELS is its own call path. Each leaf allocates (most blocks freed at once, some kept
// a while, a few leaked) so every view has something to show.
#include <stdio.h>
#include <stdlib.h>

#define LEVELS 5

typedef void *(*step_fn)(int level, unsigned code, size_t size);
static step_fn steps[10];
static void *kept[256];
static unsigned n_kept;

static void *leaf(unsigned code, size_t size) {
    void *p = malloc(size);
    if (code % 97 == 0) { // held for a while: the heap grows and shrinks over time
        unsigned k = n_kept++ % 256;
        free(kept[k]);
        kept[k] = p;
        return NULL;
    }
    return code % 1013 == 0 ? NULL : p; // leaked
}

// step0 ... step9; the trailing declaration lets each use end with a ';'
#define STEP(k)                                                                                    \
    __attribute__((noinline)) static void *step##k(int level, unsigned code, size_t size) {        \
        void *p = level == 0 ? leaf(code, size + (k))                                              \
                             : steps[code % 10](level - 1, code / 10, size + (k));                 \
        __asm__ volatile("" ::: "memory"); /* no tail call: the frame stays on the stack */        \
        return p;                                                                                  \
    }                                                                                              \
    static void *step##k(int level, unsigned code, size_t size)
STEP(0);
STEP(1);
STEP(2);
STEP(3);
STEP(4);
STEP(5);
STEP(6);
STEP(7);
STEP(8);
STEP(9);

int main(int argc, char **argv) {
    unsigned long n = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    step_fn s[10] = {step0, step1, step2, step3, step4, step5, step6, step7, step8, step9};
    for (int i = 0; i < 10; i++)
        steps[i] = s[i];
    unsigned long distinct = 1;
    for (int i = 0; i < LEVELS; i++)
        distinct *= 10;
    for (unsigned long i = 0; i < n; i++) {
        unsigned code = (unsigned)(i % distinct), top = (unsigned)(i / distinct);
        free(steps[code % 10](LEVELS - 1, code / 10, 16 + (i % 64) * 8 + top));
    }
    printf("%lu allocations over %lu call paths\n", n, n < distinct ? n : distinct);
    return 0;
}
