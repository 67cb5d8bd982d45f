// SPDX-License-Identifier: MIT
// What alternate signal stack each kind of thread has after its first allocation, one line:
// "plain=SIZE own=KEPT|REPLACED small=KEPT|REPLACED". plain: a thread with none of its own
// (SIZE 0: it has none); own: a thread that installed a 64 KiB one before allocating; small:
// one that installed one of the kernel's minimum size (too small for a profiler's handler).
// Under heapprof's CPU-time timer (HEAPPROF_CPU=timer) an allocating thread gets one lent
// (docs/design.md#cpu-samples); otherwise nothing changes.
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The least size sigaltstack takes: the signal frame's (AT_MINSIGSTKSZ), at least the
// kernel's fixed 2,048 bytes.
static size_t kernel_min(void) {
    long frame = sysconf(_SC_MINSIGSTKSZ);
    return frame > 2048 ? (size_t)frame : 2048u;
}

static size_t alt_size(void) {
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || (cur.ss_flags & SS_DISABLE))
        return 0;
    return cur.ss_size;
}

static void *plain(void *out) {
    void *volatile p = malloc(24); // the thread's first event
    free(p);
    *(size_t *)out = alt_size();
    return NULL;
}

// Installs a stack of `size` bytes, allocates, says whether it is still the thread's.
static const char *keeps_own(size_t size) {
    stack_t ss = {.ss_sp = malloc(size), .ss_size = size, .ss_flags = 0};
    if (!ss.ss_sp || sigaltstack(&ss, NULL) != 0)
        return "ERROR";
    void *volatile p = malloc(40);
    free(p);
    stack_t cur;
    const char *r = sigaltstack(NULL, &cur) == 0 && cur.ss_sp == ss.ss_sp && cur.ss_size == size
                        ? "KEPT"
                        : "REPLACED";
    stack_t off = {.ss_flags = SS_DISABLE};
    sigaltstack(&off, NULL);
    free(ss.ss_sp);
    return r;
}

static void *own(void *out) {
    *(const char **)out = keeps_own(64 * 1024);
    return NULL;
}

static void *small(void *out) {
    *(const char **)out = keeps_own(kernel_min());
    return NULL;
}

static void run(void *(*fn)(void *), void *out) {
    pthread_t t;
    if (pthread_create(&t, NULL, fn, out) != 0 || pthread_join(t, NULL) != 0) {
        fprintf(stderr, "pthread_create failed\n");
        exit(1);
    }
}

int main(void) {
    size_t plain_size = 0;
    const char *own_r = "ERROR", *small_r = "ERROR";
    run(plain, &plain_size);
    run(own, &own_r);
    run(small, &small_r);
    printf("plain=%zu own=%s small=%s\n", plain_size, own_r, small_r);
    return 0;
}
