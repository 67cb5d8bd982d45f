// SPDX-License-Identifier: MIT
/* cpu_hot: one CPU-hot function and one allocation-hot function, for CPU sampling
 * (tests/e2e/test_cpu.c). main -> run_hot -> hot_loop spins on integer arithmetic for about half
 * a second of CPU and allocates nothing; main -> alloc_many makes exactly N_BLOCKS blocks of
 * BLOCK_BYTES and frees them, taking a few milliseconds. So the CPU samples belong to hot_loop
 * (>= 80%, the rest is start-up and alloc_many) and the blocks to alloc_many. Built without
 * frame pointers: CPU stacks must come from the CFI walk. Output through write(2) only, so libc
 * allocates nothing on its own behalf. Argument: iterations of the hot loop in millions
 * (default 300). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define N_BLOCKS 10000
#define BLOCK_BYTES 64

__attribute__((noinline)) static uint64_t hot_loop(uint64_t n) {
    uint64_t h = 1469598103934665603ull;
    for (uint64_t i = 0; i < n; i++) {
        h = (h ^ i) * 1099511628211ull;
        __asm__ volatile("" : "+r"(h)); // keeps the loop from being folded away
    }
    return h;
}

__attribute__((noinline)) static uint64_t run_hot(uint64_t n) {
    uint64_t h = hot_loop(n);
    __asm__ volatile("" : "+r"(h)); // no tail call: run_hot stays on the stack
    return h;
}

__attribute__((noinline)) static size_t alloc_many(void) {
    static void *keep[N_BLOCKS];
    size_t sum = 0;
    for (int i = 0; i < N_BLOCKS; i++) {
        keep[i] = malloc(BLOCK_BYTES);
        if (!keep[i])
            return 0;
        memset(keep[i], i, BLOCK_BYTES);
        sum += ((unsigned char *)keep[i])[i % BLOCK_BYTES];
    }
    for (int i = 0; i < N_BLOCKS; i++)
        free(keep[i]);
    return sum;
}

int main(int argc, char **argv) {
    uint64_t millions = argc > 1 ? strtoull(argv[1], NULL, 10) : 300;
    uint64_t h = run_hot(millions * 1000000u);
    size_t s = alloc_many();
    char out[64];
    int n = 0;
    const char *msg = s ? "ok " : "alloc failed ";
    memcpy(out, msg, strlen(msg));
    n = (int)strlen(msg);
    out[n++] = "0123456789abcdef"[h & 15];
    out[n++] = '\n';
    if (write(1, out, (size_t)n) < 0)
        return 2;
    return s ? 0 : 1;
}
