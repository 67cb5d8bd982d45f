// SPDX-License-Identifier: MIT
// growth: growth chains with exact counts for `heapprof report` (docs/growth.md), and
// allocate/free pairs that must not be taken for growth. One thread; each pattern in its own
// function so the report names it. Expected, per function (test_growth.c checks them):
//   realloc_by_one  10 chains, 990 steps (realloc(NULL, 1), then +1 byte 99 times), all by
//                   realloc; constant increment: advice "grow geometrically"
//   doubling        5 chains, 50 steps (malloc 16, then realloc to 32, 64, ... 16384)
//   ivec_push       (called by manual_vector) 4 chains, 32 steps, all allocate-copy-free
//                   (4 -> 1024 ints), 16,320 bytes copied (4 x (16 + 32 + ... + 2048)),
//                   final size 4096
//   unrelated_*     no chain: pairs at one site freed at once (a single step), a larger
//                   block at another site, a smaller one, and an old block freed too late
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noipa))

static volatile uintptr_t sink;

// Makes the compiler keep every block: it escapes and its bytes are written.
static NOINLINE void touch(void *p, size_t n) {
    memset(p, 0x5a, n);
    sink += (uintptr_t)p;
    __asm__ volatile("" : : "r"(p) : "memory");
}

static NOINLINE void *checked(void *p, size_t n) {
    if (!p)
        abort();
    touch(p, n);
    return p;
}

// a macro, so that malloc's caller (the frame naming the site) is the function
// using it
#define xmalloc(n) checked(malloc(n), (n))

static NOINLINE void realloc_by_one(void) {
    for (int c = 0; c < 10; c++) {
        char *p = NULL;
        for (size_t n = 1; n <= 100; n++) {
            p = realloc(p, n); // realloc(NULL, 1) starts the chain
            if (!p)
                abort();
            touch(p, n);
        }
        free(p);
    }
}

static NOINLINE void doubling(void) {
    for (int c = 0; c < 5; c++) {
        char *p = malloc(16);
        if (!p)
            abort();
        touch(p, 16);
        for (size_t n = 32; n <= 16384; n *= 2) {
            p = realloc(p, n);
            if (!p)
                abort();
            touch(p, n);
        }
        free(p);
    }
}

typedef struct ivec {
    int *v;
    size_t len, cap;
} ivec_t;

static NOINLINE void ivec_push(ivec_t *a, int x) {
    if (a->len == a->cap) {
        size_t cap = a->cap ? 2 * a->cap : 4;
        int *n = xmalloc(cap * sizeof *n); // the first buffer and every larger one
        if (a->len)
            memcpy(n, a->v, a->len * sizeof *n);
        free(a->v);
        a->v = n;
        a->cap = cap;
    }
    a->v[a->len++] = x;
}

static NOINLINE void manual_vector(void) {
    for (int c = 0; c < 4; c++) {
        ivec_t a = {0};
        for (int i = 0; i < 1000; i++)
            ivec_push(&a, i * c);
        touch(a.v, a.len * sizeof *a.v);
        free(a.v);
    }
}

// a block and a larger one from the same line, the first freed at once: one
// step alone is never a chain
static NOINLINE void unrelated_same_site(void) {
    for (int i = 0; i < 50; i++) {
        void *p[2];
        for (int k = 0; k < 2; k++)
            p[k] = xmalloc(64 << k);
        free(p[0]);
        free(p[1]);
    }
}

// calloc, and noipa: the compiler must not merge it into its callers' malloc
// calls
static __attribute__((noinline, noipa)) void *other_site(size_t n) {
    return checked(calloc(1, n), n);
}

// each new block larger than the last and the last freed right after, but from
// another site
static NOINLINE void unrelated_other_site(void) {
    void *prev = xmalloc(16);
    int k = 0;
    for (size_t n = 32; n <= 4096; n *= 2) {
        void *cur = k++ % 2 ? xmalloc(n) : other_site(n);
        free(prev);
        prev = cur;
    }
    free(prev);
}

// larger blocks at one site, each old one freed only after unrelated work: not
// "shortly after"
static NOINLINE void unrelated_late_free(void) {
    void *prev = xmalloc(16);
    for (size_t n = 32; n <= 4096; n *= 2) {
        void *cur = xmalloc(n);
        for (int k = 0; k < 4; k++)
            free(other_site(8));
        free(prev);
        prev = cur;
    }
    free(prev);
}

// smaller blocks at one site, each old one freed at once: shrinking is no
// growth
static NOINLINE void unrelated_smaller(void) {
    void *prev = xmalloc(4096);
    for (size_t n = 2048; n >= 16; n /= 2) {
        void *cur = xmalloc(n);
        free(prev);
        prev = cur;
    }
    free(prev);
}

int main(void) {
    realloc_by_one();
    doubling();
    manual_vector();
    unrelated_same_site();
    unrelated_other_site();
    unrelated_late_free();
    unrelated_smaller();
    printf("growth done\n");
    return 0;
}
