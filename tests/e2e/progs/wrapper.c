// SPDX-License-Identifier: MIT
// An xmalloc-style wrapper, as sqlite3Malloc, jv_mem_alloc or git's xmalloc: every allocation
// of the program goes through it, from three functions that allocate 10, 20 and 30 blocks of
// 100, 200 and 300 bytes; leak_me leaks one block of 777 bytes, stdio its buffer. Without --alloc-fn the report's sites are the wrapper's, told apart by
// their callers; with --alloc-fn xmalloc they are the three functions.
#include <stdio.h>
#include <stdlib.h>

void *xmalloc(size_t n);
void load_alpha(void);
void load_beta(void);
void load_gamma(void);
void leak_me(void);

__attribute__((noinline)) void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

static void *volatile sink[64];

__attribute__((noinline)) void load_alpha(void) {
    for (int i = 0; i < 10; i++)
        sink[i] = xmalloc(100);
}

__attribute__((noinline)) void load_beta(void) {
    for (int i = 0; i < 20; i++)
        sink[10 + i] = xmalloc(200);
}

__attribute__((noinline)) void load_gamma(void) {
    for (int i = 0; i < 30; i++)
        sink[30 + i] = xmalloc(300);
}

// One block never freed, from a function of the program's own (test_report.c: --suppress).
__attribute__((noinline)) void leak_me(void) { sink[63] = malloc(777); }

int main(void) {
    leak_me();
    load_alpha();
    load_beta();
    load_gamma();
    for (int i = 0; i < 60; i++)
        free(sink[i]);
    puts("wrapper done");
    return 0;
}
