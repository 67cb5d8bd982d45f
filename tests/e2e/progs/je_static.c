// SPDX-License-Identifier: MIT
// A C program linked with libjemalloc.a: its malloc, free, calloc, realloc and jemalloc's
// mallocx family live in the executable itself, where the loader finds them before any
// preloaded library (test_static_alloc.c). It counts what `workload` asks and prints the
// counts, the exact figures the trace must hold. With "threads", eight threads start at once
// and allocate from their first instruction: the entries were patched before main. With
// "sized", blocks are freed by sdallocx naming their size, a known number of them naming a
// wrong one (a size of the same jemalloc size class, so jemalloc frees them right all the same).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// jemalloc's non-standard API (jemalloc/jemalloc.h declares the same)
void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);
void sdallocx(void *ptr, size_t size, int flags);
#define MALLOCX_ALIGN(a) ((int)__builtin_ctzl(a))
#define N_THREADS 8
#define PER_THREAD 20000

static long allocs, reallocs, frees, sized, mismatched;

__attribute__((noinline)) static void plain_blocks(int n) {
    for (int i = 0; i < n; i++) {
        char *p = malloc(24 + (size_t)i % 8);
        p[0] = (char)i;
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    allocs += n;
    frees += n;
}

__attribute__((noinline)) static void zeroed_arrays(int n) {
    for (int i = 0; i < n; i++) {
        long *p = calloc(16, sizeof *p);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    allocs += n;
    frees += n;
}

__attribute__((noinline)) static void grown_buffer(int steps) {
    char *p = NULL;
    for (int i = 1; i <= steps; i++) {
        p = realloc(p, (size_t)i * 100); // the first one is realloc(NULL, n): an allocation
        memset(p, 1, (size_t)i * 100);
    }
    reallocs += steps;
    free(p);
    frees++;
}

__attribute__((noinline)) static void extended_api(int n) {
    for (int i = 0; i < n; i++) {
        void *p = mallocx(200, MALLOCX_ALIGN(64));
        p = rallocx(p, 400, MALLOCX_ALIGN(64));
        sdallocx(p, 400, MALLOCX_ALIGN(64));
    }
    allocs += n;
    reallocs += n;
    frees += n;
}

__attribute__((noinline)) static void workload(void) {
    plain_blocks(1000);
    zeroed_arrays(100);
    grown_buffer(50);
    extended_api(10);
}

__attribute__((noinline)) static void *thread_churn(void *arg) {
    (void)arg;
    for (int i = 0; i < PER_THREAD; i++) {
        void *p = malloc(48);
        __asm__ volatile("" : : "r"(p) : "memory");
        free(p);
    }
    return NULL;
}

__attribute__((noinline)) static void threads(void) {
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        pthread_create(&t[i], NULL, thread_churn, NULL);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);
    allocs += (long)N_THREADS * PER_THREAD;
    frees += (long)N_THREADS * PER_THREAD;
}

// n blocks of 48 bytes freed by sdallocx; every fifth names 40 bytes (size class 48 too)
__attribute__((noinline)) static void sized_frees(int n) {
    for (int i = 0; i < n; i++) {
        void *p = mallocx(48, 0);
        __asm__ volatile("" : : "r"(p) : "memory");
        sdallocx(p, i % 5 == 4 ? 40 : 48, 0);
        mismatched += i % 5 == 4;
    }
    allocs += n;
    frees += n;
    sized += n;
}

int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "threads") == 0)
        threads();
    else if (argc > 1 && strcmp(argv[1], "sized") == 0)
        sized_frees(35);
    else
        workload();
    printf("allocs=%ld reallocs=%ld frees=%ld sized=%ld mismatched=%ld\n", allocs, reallocs,
           frees, sized, mismatched);
    return 3; // an exit status of its own, which must survive the shim
}
