/* SPDX-License-Identifier: MIT */
/* c_threads: the c_churn kernel from N threads (argv[1], default 2).
 * The total work is fixed (argv[2], default 16M pairs) and split evenly, so
 * wall time is comparable across thread counts. */
#include <pthread.h>
#include <stdio.h>
#include "churn_common.h"

struct job { uint64_t seed; long ops; uint64_t out; };

static void *worker(void *arg)
{
    struct job *j = arg;
    j->out = run_churn(j->seed, j->ops);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 2;
    long total = argc > 2 ? atol(argv[2]) : 16000000L;
    if (n < 1 || n > 64) { fprintf(stderr, "threads must be 1..64\n"); return 2; }
    pthread_t t[64];
    struct job j[64];
    for (int i = 0; i < n; i++) {
        j[i].seed = 0x1234567ull + 7919ull * i;
        j[i].ops = total / n;
        if (pthread_create(&t[i], NULL, worker, &j[i])) { perror("pthread_create"); return 1; }
    }
    uint64_t s = 0;
    for (int i = 0; i < n; i++) { pthread_join(t[i], NULL); s += j[i].out; }
    printf("c_threads threads=%d ops=%ld checksum=%llu\n", n, total, (unsigned long long)s);
    return 0;
}
