// SPDX-License-Identifier: MIT
// A server-like program for `heapprof attach` (tests/e2e/test_attach.c):
// THREADS workers each serve "requests" in a loop, one per millisecond; every
// request makes exactly one block at each of three sites:
//   make_request  malloc(64), freed before the next request      (short-lived)
//   make_buffer   calloc(16, 16) = 256 bytes, freed at once        (temporary)
//   keep_session  malloc(1024), kept in a ring of SESSIONS per thread, the
//   oldest freed when the
//                 ring is full: long-lived, so blocks made before an attach are
//                 freed during it
// With ITERS > 0 each worker serves ITERS requests; with ITERS = 0 they serve
// until standard input reaches end of file (the main thread sits in read(2), a
// safe point to attach at). It prints "ready" once every worker served its
// first request, and at the end "requests=N checksum=ok", or "checksum=BAD" if
// what the blocks held when read back differs from what was written (a profiler
// that changed what the program sees would show there).
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define SESSIONS 32

static long iters;
static atomic_int stop;
static atomic_int started;

__attribute__((noinline)) static char *make_request(long i) {
    char *p = malloc(64);
    if (p)
        memset(p, (int)(i & 0x7f), 64);
    return p;
}

__attribute__((noinline)) static unsigned char *make_buffer(void) {
    unsigned char *b = calloc(16, 16);
    __asm__ volatile("" ::: "memory"); // no tail call: make_buffer must be the calloc's caller
    return b;
}

__attribute__((noinline)) static uint64_t *keep_session(long i) {
    uint64_t *s = malloc(1024);
    if (s)
        for (int k = 0; k < 128; k++)
            s[k] = (uint64_t)i;
    return s;
}

typedef struct worker {
    pthread_t th;
    long served;
    uint64_t sum; // of what the blocks held when read back
} worker_t;

// What sum must be after n requests: request i's blocks hold i & 0x7f, 0 and i.
static uint64_t expected_sum(long n) {
    uint64_t s = 0;
    for (long i = 0; i < n; i++)
        s += (uint64_t)(i & 0x7f) + (uint64_t)i;
    return s;
}

static void *serve(void *arg) {
    worker_t *w = arg;
    uint64_t *ring[SESSIONS] = {0};
    for (long i = 0; iters ? i < iters : !atomic_load(&stop); i++) {
        char *req = make_request(i);
        unsigned char *buf = make_buffer();
        uint64_t *s = keep_session(i);
        if (!req || !buf || !s)
            abort();
        w->sum += (uint64_t)req[63] + buf[255] + s[127];
        free(buf);
        free(req);
        free(ring[i % SESSIONS]);
        ring[i % SESSIONS] = s;
        w->served = i + 1;
        if (i == SESSIONS - 1) // the ring is full: from now on every request frees a session
            atomic_fetch_add(&started, 1);
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    for (int k = 0; k < SESSIONS; k++)
        free(ring[k]);
    return NULL;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4;
    iters = argc > 2 ? atol(argv[2]) : 0;
    if (n < 1 || n > MAX_THREADS || iters < 0) {
        fprintf(stderr, "usage: server_loop [THREADS (1-64)] [ITERS (0: until stdin closes)]\n");
        return 2;
    }
    static worker_t w[MAX_THREADS];
    for (int t = 0; t < n; t++)
        if (pthread_create(&w[t].th, NULL, serve, &w[t]) != 0)
            return 1;
    while (atomic_load(&started) < n && (!iters || iters >= SESSIONS)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    printf("ready\n");
    fflush(stdout);
    if (!iters) {
        char b[256];
        while (read(0, b, sizeof b) > 0) {
        }
        atomic_store(&stop, 1);
    }
    long served = 0;
    bool ok = true;
    for (int t = 0; t < n; t++) {
        pthread_join(w[t].th, NULL);
        served += w[t].served;
        ok &= w[t].sum == expected_sum(w[t].served);
    }
    printf("requests=%ld checksum=%s\n", served, ok ? "ok" : "BAD");
    return ok ? 0 : 1;
}
