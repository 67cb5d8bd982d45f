// SPDX-License-Identifier: MIT
// A library whose static constructor allocates before the shim's constructor runs: the dynamic
// loader initialises the program's libraries before a preloaded one (clang's LLVM libraries do
// this with thousands of allocations). EARLY_BLOCKS blocks from two call sites, every other one
// freed at once; early_lib_release frees the rest from main. test_process.c checks that every
// one of them is in the trace and that the shim lost nothing.
#include <stdint.h>
#include <stdlib.h>

#define EARLY_BLOCKS 20000

int early_lib_release(void); // early_init.c calls it

static void *kept[EARLY_BLOCKS / 2];

__attribute__((noinline)) static void *early_small(size_t i) {
    return malloc(16 + i % 64);
}

__attribute__((noinline)) static void *early_large(size_t i) {
    return malloc(200 + i % 300);
}

__attribute__((constructor)) static void early_init(void) {
    size_t k = 0;
    for (size_t i = 0; i < EARLY_BLOCKS; i++) {
        void *p = i % 4 < 2 ? early_small(i) : early_large(i);
        if (!p)
            abort();
        *(volatile uint8_t *)p = (uint8_t)i;
        if (i % 2)
            free(p);
        else
            kept[k++] = p;
    }
}

int early_lib_release(void) {
    int n = 0;
    for (size_t k = 0; k < EARLY_BLOCKS / 2; k++) {
        n += kept[k] != NULL;
        free(kept[k]);
    }
    return n;
}
