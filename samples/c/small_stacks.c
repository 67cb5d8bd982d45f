// SPDX-License-Identifier: MIT
// small_stacks: threads with the smallest stack glibc allows (16 KiB, PTHREAD_STACK_MIN on
// x86-64) allocate; a 64 KiB thread allocates from 44 KiB deep. glibc takes a module's static
// TLS out of every thread's stack, so a shim with tens of KiB of it makes pthread_create fail
// with EINVAL or the deep thread overflow (issue #17 item 2). Exits 1 with the reason if a
// thread cannot be created.
//
// Blocks made from this executable (the .expect counts): each of the N_SMALL small threads
// makes N_ALLOCS mallocs from two call sites (a new stack met on the small stack itself, so
// the shim's cold paths run there too) and frees them; the deep thread makes N_ALLOCS more;
// each of these threads makes one more in a pthread key destructor that runs after the shim's
// own (its key is made later), when the shim has given the thread's state block back.
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_SMALL 8
#define N_ALLOCS 100
#define SMALL_STACK 16384
#define DEEP_STACK 65536
#define DEEP_USE (44 * 1024)

static __attribute__((noinline)) void *alloc_a(size_t n) {
    return malloc(n);
}
static __attribute__((noinline)) void *alloc_b(size_t n) {
    return malloc(n);
}

static void churn(unsigned seed) {
    for (unsigned i = 0; i < N_ALLOCS; i++) {
        void *volatile p = (i + seed) % 2 ? alloc_a(16 + i) : alloc_b(32 + i);
        free(p);
    }
}

static pthread_key_t late_key;

static void late_destructor(void *v) {
    (void)v;
    void *volatile p = alloc_a(8);
    free(p);
}

static void *small_worker(void *arg) {
    pthread_setspecific(late_key, (void *)1);
    churn((unsigned)(size_t)arg);
    return NULL;
}

static void *deep_worker(void *arg) {
    (void)arg;
    pthread_setspecific(late_key, (void *)1);
    volatile char use[DEEP_USE];
    memset((char *)use, 1, sizeof use);
    churn(use[DEEP_USE - 1]);
    return NULL;
}

static int spawn(size_t stack, void *(*fn)(void *), void *arg) {
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, stack);
    pthread_t t;
    int rc = pthread_create(&t, &a, fn, arg);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        fprintf(stderr, "pthread_create with a %zu-byte stack: %s\n", stack, strerror(rc));
        return 1;
    }
    pthread_join(t, NULL);
    return 0;
}

int main(void) {
    // an allocation first: the shim's exit key (made at a thread's first event) gets the lower
    // index, and glibc runs key destructors in index order
    void *volatile p = malloc(1);
    free(p);
    pthread_key_create(&late_key, late_destructor);
    for (size_t i = 0; i < N_SMALL; i++)
        if (spawn(SMALL_STACK, small_worker, (void *)i))
            return 1;
    if (spawn(DEEP_STACK, deep_worker, NULL))
        return 1;
    printf("blocks=%d\n", (N_SMALL + 1) * (N_ALLOCS + 1));
    return 0;
}
