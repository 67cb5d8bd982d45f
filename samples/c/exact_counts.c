// SPDX-License-Identifier: MIT
/* exact_counts: a program whose heap activity is known exactly by construction; the numbers in
 * exact_counts.expect are derived below and must match what heapprof records for the calls made
 * from this executable. Must never let libc allocate on its own behalf outside pthread_create:
 * no stdio, no strdup/qsort/locale; output goes through write(2) only.
 *
 * Counting conventions (DHAT's, see exact_counts.expect):
 *   - every successful allocation call is one block of its *requested* size: malloc, calloc (n*m),
 *     posix_memalign/aligned_alloc/memalign/valloc (size, not alignment), malloc(0) = 0 bytes;
 *   - every successful realloc/reallocarray is a new block of the new size; the old block is
 *     freed at that instant (an "implicit free", NOT counted in `frees`); realloc(NULL, n) is a
 *     malloc; realloc(p, 0) on glibc frees p, returns NULL and counts as one free, no block;
 *   - a failing call (NULL / nonzero return) counts nothing; free(NULL) counts nothing.
 *
 * Derivation (W = 4 workers, L = 1000 loop iterations, R = 50 rows of 2000 bytes):
 *
 * Phase 1, main thread, before any thread exists:
 *   free(NULL), malloc(SIZE_MAX), calloc(SIZE_MAX/4, 8), posix_memalign(align 3): nothing
 *   malloc(0) x2 ........................................  2 blocks      0 bytes (1 freed, 1 leak)
 *   calloc(10, 12) ......................................  1 block     120 bytes (freed)
 *   posix_memalign(64, 200) .............................  1 block     200 bytes (freed)
 *   aligned_alloc(128, 256) .............................  1 block     256 bytes (leaked)
 *   memalign(32, 100) ...................................  1 block     100 bytes (freed)
 *   valloc(300) .........................................  1 block     300 bytes (freed)
 *   realloc chain: realloc(NULL,16) 16 -> 32 -> 100 -> 1000, realloc(p, 1 PiB) fails,
 *     -> 10 (shrink), reallocarray(p, 50, 8) = 400, reallocarray overflow fails,
 *     realloc(p, 0) frees ................................  6 blocks   1558 bytes (16+...+400)
 *   leaks malloc(123), calloc(7, 9) .....................  2 blocks    186 bytes (123+63)
 *   leaked realloc chain realloc(NULL,40) -> 80 .........  2 blocks    120 bytes (80 stays live)
 *   phase 1: 17 blocks, 2840 bytes; frees 5 + 1 (realloc(p,0)) = 6; implicit frees 5 + 1 = 6
 *   live after phase 1: malloc(0), 256, 123, 63, 80 = 5 blocks, 522 bytes
 *
 * Phase 2, W worker threads i = 0..3 (all joined before phase 3):
 *   keep   = malloc(48 + 16i), leaked ...................  4 blocks    288 bytes (48+64+80+96)
 *   gift   = malloc(200 + i), freed by worker i+1 mod W .  4 blocks    806 bytes (200+201+202+203)
 *   result = calloc(i + 1, 24), freed by main after join   4 blocks    240 bytes (24+48+72+96)
 *   loop k < L: malloc(32(i+1) + 8(k mod 4)), free ...  4000 blocks 368000 bytes
 *     per worker: L*32(i+1) + (L/4)*(0+8+16+24) = 32000(i+1) + 12000; sum over i: 320000 + 48000
 *   growth: malloc(64) -> realloc 128 -> realloc 256, free  12 blocks   1792 bytes (4 * 448)
 *   phase 2: 4024 blocks, 371126 bytes; frees 4000 + 4 + 4 in workers + 4 in main = 4012;
 *   implicit frees 8. Live after phase 2: 5 + 4 = 9 blocks, 522 + 288 = 810 bytes.
 *   Live bytes in phase 2 never exceed 522 + 288 + 806 + 240 + 4*152 + 4*256 = 3488 < 100000,
 *   so thread interleaving cannot move the global peak.
 *
 * Phase 3, main: rows = malloc(512), then R rows malloc(2000)  51 blocks 100512 bytes
 *   Peak is reached once, right after the last row: 810 + 512 + 100000 = 101322 bytes in
 *   9 + 1 + 50 = 60 blocks. All 51 are then freed (51 frees).
 * Phase 4, main: malloc(77), leaked ......................  1 block      77 bytes
 *
 * Totals: blocks = 17 + 4024 + 51 + 1 = 4093
 *         bytes  = 2840 + 371126 + 100512 + 77 = 474555
 *         frees  = 6 + 4012 + 51 = 4069   (check: 4093 - 4069 - 14 implicit = 10 = end_blocks)
 *         peak_bytes = 101322, peak_blocks = 60
 *         end_bytes = 810 + 77 = 887, end_blocks = 10
 *         threads = 5 (main + 4 workers)
 * Calls executed, failing and no-op ones included (checked with a counting shim): malloc 4068,
 * calloc 7, realloc 17, reallocarray 2, free 4069, posix_memalign 2, aligned_alloc 1,
 * memalign 1, valloc 1. free(NULL) is the process's first allocator call: the shim sees a free
 * before any malloc.
 *
 * The program also keeps its own tally of the same numbers, prints it as key=value lines, and
 * exits 1 if any call did not succeed or fail as designed (e.g. a libc where realloc(p, 0) does
 * not free), so a broken premise shows up as a failed run, not as a profiler bug.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE 1
#endif

#include <malloc.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum {
    N_WORKERS = 4,
    N_LOOP = 1000,
    N_ROWS = 50,
    ROW_BYTES = 2000,
    ROWS_INDEX_BYTES = 512,
};
_Static_assert(N_ROWS * sizeof(void *) <= ROWS_INDEX_BYTES, "row index must fit its block");

/* Read at run time so the compiler can neither fold the failing calls nor warn about them. */
static volatile size_t v_huge = SIZE_MAX;
/* 1 PiB: beyond any x86-64/arm64 user address space, so it fails everywhere. Used for realloc
 * instead of SIZE_MAX because Valgrind 3.19 DHAT asserts on realloc(p, SIZE_MAX). */
static volatile size_t v_too_big = (size_t)1 << 50;
static volatile size_t v_zero = 0;
/* gcc -O2 folds realloc(NULL, n) into malloc(n) and drops free(NULL); a volatile NULL keeps the
 * real calls, so the shim sees them as written. */
static void *volatile v_null = NULL;

/* The program's own account of what it did, for the self-check; mutex because workers share it. */
static struct {
    pthread_mutex_t lock;
    uint64_t blocks, bytes, frees, threads;
    uint64_t live_bytes, live_blocks, peak_bytes, peak_blocks;
    bool failed;
} tally = {.lock = PTHREAD_MUTEX_INITIALIZER};
static _Thread_local bool tls_counted;

static void *gifts[N_WORKERS];
static void *results[N_WORKERS];
static void *keeps[N_WORKERS];
static pthread_barrier_t gift_barrier;

/* Makes p observable so gcc -O2 cannot drop a malloc/free pair (it does, without this). */
static void escape(void *p) { __asm__ volatile("" : : "g"(p) : "memory"); }

static void say(const char *s) {
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = write(STDOUT_FILENO, s, n);
        if (w <= 0)
            return;
        s += w;
        n -= (size_t)w;
    }
}

static void say_kv(const char *key, uint64_t v) {
    char buf[24];
    char *p = buf + sizeof buf;
    *--p = '\0';
    *--p = '\n';
    do {
        *--p = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    say(key);
    say("=");
    say(p);
}

static void fail(const char *what) {
    say("exact_counts: unexpected result: ");
    say(what);
    say("\n");
    pthread_mutex_lock(&tally.lock);
    tally.failed = true;
    pthread_mutex_unlock(&tally.lock);
}

static void note_live(int64_t d_bytes, int64_t d_blocks) {
    tally.live_bytes = (uint64_t)((int64_t)tally.live_bytes + d_bytes);
    tally.live_blocks = (uint64_t)((int64_t)tally.live_blocks + d_blocks);
    /* Strictly greater: the first moment at the maximum is the peak. */
    if (tally.live_bytes > tally.peak_bytes) {
        tally.peak_bytes = tally.live_bytes;
        tally.peak_blocks = tally.live_blocks;
    }
}

/* One successful allocation call of `size` requested bytes; a NULL p is a design failure. */
static void count_alloc(void *p, size_t size, const char *what) {
    if (p == NULL) {
        fail(what);
        return;
    }
    memset(p, 0xa5, size);
    escape(p);
    pthread_mutex_lock(&tally.lock);
    if (!tls_counted) {
        tls_counted = true;
        tally.threads++;
    }
    tally.blocks++;
    tally.bytes += size;
    note_live((int64_t)size, 1);
    pthread_mutex_unlock(&tally.lock);
}

/* A successful realloc: the old block dies and a new one is born at the same instant. */
static void count_realloc(void *p, size_t old_size, size_t size, const char *what) {
    if (p == NULL) {
        fail(what);
        return;
    }
    pthread_mutex_lock(&tally.lock);
    note_live(-(int64_t)old_size, -1);
    pthread_mutex_unlock(&tally.lock);
    count_alloc(p, size, what);
}

static void count_free(size_t size) {
    pthread_mutex_lock(&tally.lock);
    tally.frees++;
    note_live(-(int64_t)size, -1);
    pthread_mutex_unlock(&tally.lock);
}

static void expect_null(void *p, const char *what) {
    escape(p);
    if (p != NULL)
        fail(what);
}

/* Phase 1: every entry point once, plus the calls that must count nothing. */
static void phase_entry_points(void) {
    free(v_null);
    expect_null(malloc(v_huge), "malloc(SIZE_MAX) succeeded");
    expect_null(calloc(v_huge / 4, 8), "calloc overflow succeeded");
    void *bad = NULL;
    if (posix_memalign(&bad, 3, 64) == 0)
        fail("posix_memalign(align 3) succeeded");

    void *z0 = malloc(v_zero);
    count_alloc(z0, 0, "malloc(0) #1");
    void *z1 = malloc(v_zero);
    count_alloc(z1, 0, "malloc(0) #2");
    if (z0 == z1)
        fail("malloc(0) returned the same pointer twice");

    void *c = calloc(10, 12);
    count_alloc(c, 120, "calloc(10, 12)");
    void *pm = NULL;
    if (posix_memalign(&pm, 64, 200) != 0)
        pm = NULL;
    count_alloc(pm, 200, "posix_memalign(64, 200)");
    void *aa = aligned_alloc(128, 256);
    count_alloc(aa, 256, "aligned_alloc(128, 256)");
    void *ma = memalign(32, 100);
    count_alloc(ma, 100, "memalign(32, 100)");
    void *va = valloc(300);
    count_alloc(va, 300, "valloc(300)");

    char *r = realloc(v_null, 16);
    count_alloc(r, 16, "realloc(NULL, 16)");
    static const size_t grow[] = {32, 100, 1000};
    size_t r_size = 16;
    for (size_t i = 0; i < sizeof grow / sizeof grow[0]; i++) {
        r = realloc(r, grow[i]);
        count_realloc(r, r_size, grow[i], "realloc grow");
        r_size = grow[i];
    }
    /* A failed realloc leaves r untouched and live. */
    char *t = realloc(r, v_too_big);
    if (t != NULL) {
        fail("realloc(p, 1 PiB) succeeded");
        r = t;
    }
    r = realloc(r, 10);
    count_realloc(r, r_size, 10, "realloc shrink to 10");
    r = reallocarray(r, 50, 8);
    count_realloc(r, 10, 400, "reallocarray(p, 50, 8)");
    t = reallocarray(r, v_huge / 2, 4);
    if (t != NULL) {
        fail("reallocarray overflow succeeded");
        r = t;
    }
    /* glibc: realloc(p, 0) frees p and returns NULL (REALLOC_ZERO_BYTES_FREES); C23 makes it UB. */
    if (realloc(r, v_zero) != NULL)
        fail("realloc(p, 0) did not free");
    count_free(400);

    count_alloc(malloc(123), 123, "leak malloc(123)");
    count_alloc(calloc(7, 9), 63, "leak calloc(7, 9)");
    void *lr = realloc(v_null, 40);
    count_alloc(lr, 40, "realloc(NULL, 40)");
    lr = realloc(lr, 80);
    count_realloc(lr, 40, 80, "leak realloc 80");

    free(z0);
    count_free(0);
    free(c);
    count_free(120);
    free(pm);
    count_free(200);
    free(ma);
    count_free(100);
    free(va);
    count_free(300);
    escape(z1);
    escape(aa);
    escape(lr);
}

static void *worker(void *arg) {
    size_t i = (size_t)(uintptr_t)arg;

    keeps[i] = malloc(48 + 16 * i);
    count_alloc(keeps[i], 48 + 16 * i, "worker keep");
    void *gift = malloc(200 + i);
    count_alloc(gift, 200 + i, "worker gift");
    gifts[(i + 1) % N_WORKERS] = gift;
    results[i] = calloc(i + 1, 24);
    count_alloc(results[i], 24 * (i + 1), "worker result");

    /* The barrier orders the gift stores before the cross-thread frees below. */
    pthread_barrier_wait(&gift_barrier);

    for (size_t k = 0; k < N_LOOP; k++) {
        size_t size = 32 * (i + 1) + 8 * (k % 4);
        void *p = malloc(size);
        count_alloc(p, size, "worker loop");
        free(p);
        count_free(size);
    }

    void *g = malloc(64);
    count_alloc(g, 64, "worker growth 64");
    g = realloc(g, 128);
    count_realloc(g, 64, 128, "worker growth 128");
    g = realloc(g, 256);
    count_realloc(g, 128, 256, "worker growth 256");
    free(g);
    count_free(256);

    size_t from = (i + N_WORKERS - 1) % N_WORKERS;
    free(gifts[i]);
    count_free(200 + from);
    return NULL;
}

static void phase_threads(void) {
    pthread_t tids[N_WORKERS];
    pthread_barrier_init(&gift_barrier, NULL, N_WORKERS);
    for (size_t i = 0; i < N_WORKERS; i++) {
        if (pthread_create(&tids[i], NULL, worker, (void *)(uintptr_t)i) != 0) {
            fail("pthread_create");
            _exit(2);
        }
    }
    for (size_t i = 0; i < N_WORKERS; i++)
        pthread_join(tids[i], NULL);
    pthread_barrier_destroy(&gift_barrier);
    for (size_t i = 0; i < N_WORKERS; i++) {
        free(results[i]);
        count_free(24 * (i + 1));
    }
}

/* Phase 3: one structure far larger than anything live before, built then torn down. */
static void phase_peak(void) {
    void **rows = malloc(ROWS_INDEX_BYTES);
    count_alloc(rows, ROWS_INDEX_BYTES, "rows index");
    if (rows == NULL)
        return;
    for (size_t j = 0; j < N_ROWS; j++) {
        rows[j] = malloc(ROW_BYTES);
        count_alloc(rows[j], ROW_BYTES, "row");
    }
    for (size_t j = 0; j < N_ROWS; j++) {
        free(rows[j]);
        count_free(ROW_BYTES);
    }
    free(rows);
    count_free(ROWS_INDEX_BYTES);
}

int main(void) {
    phase_entry_points();
    phase_threads();
    phase_peak();
    count_alloc(malloc(77), 77, "final leak malloc(77)");

    say_kv("blocks", tally.blocks);
    say_kv("bytes", tally.bytes);
    say_kv("peak_bytes", tally.peak_bytes);
    say_kv("peak_blocks", tally.peak_blocks);
    say_kv("end_bytes", tally.live_bytes);
    say_kv("end_blocks", tally.live_blocks);
    say_kv("threads", tally.threads);
    say_kv("frees", tally.frees);
    return tally.failed ? 1 : 0;
}
