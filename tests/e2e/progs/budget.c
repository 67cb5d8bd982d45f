// SPDX-License-Identifier: MIT
// budget: a heap whose figures test_check.c knows, and five switches that each add one byte or
// one block to one figure: `budget PEAK TOTAL BLOCKS LEAKED TEMPORARY`, each 0 or 1.
//   PEAK       the block live at the global peak is one byte larger
//   TOTAL      a block freed long before the peak is one byte larger
//   BLOCKS     one more 1-byte block (a temporary one too)
//   LEAKED     the block never freed is one byte larger
//   TEMPORARY  one more block freed before the next allocation
// No stdio: its buffer would be one more block.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noipa))

static volatile uintptr_t sink;

// keeps the compiler from eliding a malloc/free pair
static NOINLINE void *use(void *p, size_t n) {
    if (!p)
        abort();
    memset(p, 0x5a, n);
    sink += (uintptr_t)p;
    return p;
}

static NOINLINE void small_work(int extra_total) {
    void *keep = use(malloc(64), 64); // not temporary: the next block comes before its free
    void *p = use(malloc(10 + (size_t)extra_total), 10 + (size_t)extra_total);
    free(p);
    free(keep);
}

static NOINLINE void one_more_block(void) { free(use(malloc(1), 1)); }

static NOINLINE void temporary_block(void) { free(use(malloc(8), 8)); }

static NOINLINE void peak_work(int extra_peak) {
    void *big = use(malloc(100000 + (size_t)extra_peak), 100000 + (size_t)extra_peak);
    void *mid = use(malloc(50000), 50000);
    free(mid);
    free(big);
}

static NOINLINE void *leak(int extra_leaked) {
    return use(malloc(100 + (size_t)extra_leaked), 100 + (size_t)extra_leaked);
}

int main(int argc, char **argv) {
    int x[5] = {0};
    for (int i = 0; i < 5 && i + 1 < argc; i++)
        x[i] = atoi(argv[i + 1]);
    small_work(x[1]);
    if (x[2])
        one_more_block();
    if (x[4])
        temporary_block();
    peak_work(x[0]);
    sink += (uintptr_t)leak(x[3]);
    return 0;
}
