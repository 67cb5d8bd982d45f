/* SPDX-License-Identifier: MIT */
/* thread_churn: a thread-per-request server's shape. THREADS (argv[1], default 20000)
 * short threads, AT_ONCE (argv[3], default 4) alive at a time, each making ALLOCS
 * (argv[2], default 10) malloc/free pairs and ending. What a profiler adds here is mostly
 * its cost per thread created and ended, not per allocation (bench/thread_churn.sh). */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static long allocs = 10;

static void *request(void *arg)
{
    uintptr_t sum = (uintptr_t)arg;
    for (long i = 0; i < allocs; i++) {
        char *p = malloc(32 + (size_t)(i % 8) * 48);
        if (!p) abort();
        p[0] = (char)i;
        sum += (uintptr_t)p[0];
        free(p);
    }
    return (void *)sum;
}

int main(int argc, char **argv)
{
    long threads = argc > 1 ? atol(argv[1]) : 20000;
    allocs = argc > 2 ? atol(argv[2]) : 10;
    int at_once = argc > 3 ? atoi(argv[3]) : 4;
    if (threads < 1 || allocs < 0 || at_once < 1 || at_once > 64) {
        fprintf(stderr, "usage: thread_churn [THREADS [ALLOCS [AT_ONCE (1-64)]]]\n");
        return 2;
    }
    pthread_t t[64];
    uintptr_t sum = 0;
    for (long i = 0; i < threads; i += at_once) {
        int n = threads - i < at_once ? (int)(threads - i) : at_once;
        for (int k = 0; k < n; k++)
            if (pthread_create(&t[k], NULL, request, (void *)(uintptr_t)k)) {
                perror("pthread_create");
                return 1;
            }
        for (int k = 0; k < n; k++) {
            void *r;
            pthread_join(t[k], &r);
            sum += (uintptr_t)r;
        }
    }
    printf("thread_churn threads=%ld allocs=%ld checksum=%lu\n", threads, allocs,
           (unsigned long)sum);
    return 0;
}
