// SPDX-License-Identifier: MIT
// jemalloc with its public names prefixed (_rjem_malloc, _rjem_mallocx, ..., as
// tikv-jemallocator builds it; here libjemalloc.a with its symbols renamed by objcopy) beside
// glibc's own malloc, in one program: the prefixed calls are patched, the libc ones interposed,
// and both land in one trace (test_static_alloc.c). Prints the counts of each kind.
#include <stdio.h>
#include <stdlib.h>

void *_rjem_malloc(size_t n);
void *_rjem_calloc(size_t n, size_t m);
void *_rjem_realloc(void *p, size_t n);
void _rjem_free(void *p);
void *_rjem_mallocx(size_t n, int flags);
void _rjem_sdallocx(void *p, size_t n, int flags);

#define ROUNDS 100

static void keep(const void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

__attribute__((noinline)) static void both(void) {
    for (int i = 0; i < ROUNDS; i++) {
        void *a = _rjem_malloc(40), *b = malloc(40), *c = _rjem_mallocx(64, 6); // 64-aligned
        void *d = _rjem_calloc(4, 10);
        keep(a);
        keep(b);
        keep(c);
        d = _rjem_realloc(d, 400);
        keep(d);
        _rjem_free(a);
        free(b);
        _rjem_sdallocx(c, 64, 6);
        _rjem_free(d);
    }
}

int main(void) {
    both();
    // libc: ROUNDS blocks; jemalloc: 3 allocations and 1 realloc a round, 3 frees... and d's
    printf("allocs=%d reallocs=%d frees=%d libc_blocks=%d\n", 4 * ROUNDS, ROUNDS, 4 * ROUNDS,
           ROUNDS);
    return 0;
}
