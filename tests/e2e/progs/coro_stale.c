// SPDX-License-Identifier: MIT
// Coroutines switched by hand, as libco, libaco, minicoro or Boost.Context do: each runs on a
// stack of its own, mapped with PROT_NONE pages above it (the next stack's guard, as a pool lays
// them out), and nothing on that stack tells an unwinder where it ends. The word above the
// coroutine's entry frame is whatever the stack held: here a stale return address into a
// function with a 4 KiB frame, so a walk that trusts it reads ~4 KiB past the stack's top. The
// old shim's walker did, and the program died of SIGSEGV inside malloc.
// 50 coroutines, each on a fresh stack; each makes 1,000 blocks of 24 + i % 100 bytes and frees
// each, and burns some CPU in between (CPU samples taken inside the coroutine). Nothing else
// allocates: 50,000 blocks, 3,675,000 B, 50,000 frees. "done" on stdout.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "coro_switch.h"

#define PAGE 4096u
#define STACK_PAGES 8u
#define ABOVE_PAGES 4u // PROT_NONE above the stack: more than the stale frame's 4 KiB reach
#define COROUTINES 50
#define BLOCKS 1000

static void *main_sp, *coro_sp;
static volatile uint64_t burn_sink;
static void *volatile sink;

__attribute__((noinline)) static void one_block(int i) {
    sink = malloc(24u + (unsigned)(i % 100));
    free(sink);
}

__attribute__((noinline)) static void burn(int n) {
    uint64_t x = burn_sink | 1;
    for (int k = 0; k < n; k++)
        x = x * 6364136223846793005ull + 1442695040888963407ull;
    burn_sink = x;
}

static void coroutine_entry(void) {
    for (int i = 0; i < BLOCKS; i++) {
        one_block(i);
        if (i % 100 == 99) {
            burn(200000);
            coro_switch(&coro_sp, main_sp);
        }
    }
    coro_switch(&coro_sp, main_sp);
    abort(); // never resumed after its last switch
}

int main(void) {
    const uint64_t stale = coro_stale_return_site();
    for (int c = 0; c < COROUTINES; c++) {
        size_t len = (STACK_PAGES + ABOVE_PAGES) * PAGE;
        char *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (m == MAP_FAILED || mprotect(m + STACK_PAGES * PAGE, ABOVE_PAGES * PAGE, PROT_NONE))
            return 2;
        coro_sp = coro_prepare((uint64_t *)(void *)(m + STACK_PAGES * PAGE), coroutine_entry, stale);
        for (int k = 0; k < BLOCKS / 100 + 1; k++)
            coro_switch(&main_sp, coro_sp);
        munmap(m, len);
    }
    static const char done[] = "done\n";
    return write(1, done, sizeof done - 1) == (ssize_t)(sizeof done - 1) ? 0 : 1;
}
