/* SPDX-License-Identifier: MIT */
/* fork_storm THREADS FORKS: THREADS threads allocate without pause while the main thread forks
 * FORKS children that exit at once; prints the mean time per fork+wait and the slowest fork()
 * call (issue 17: under the v3 shim a fork waited for the writer's whole round). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static volatile int stop;

static void *worker(void *a)
{
    (void)a;
    while (!stop) {
        void *volatile p = malloc(64);
        free(p);
    }
    return NULL;
}

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    int nt = argc > 1 ? atoi(argv[1]) : 3, nf = argc > 2 ? atoi(argv[2]) : 200;
    if (nt < 0 || nt > 64) { fprintf(stderr, "threads must be 0..64\n"); return 2; }
    pthread_t t[64];
    for (int i = 0; i < nt; i++)
        pthread_create(&t[i], NULL, worker, NULL);
    usleep(100000);
    double worst = 0, t0 = now();
    for (int i = 0; i < nf; i++) {
        double a = now();
        pid_t p = fork();
        if (p == 0)
            _exit(0);
        double b = now();
        if (b - a > worst)
            worst = b - a;
        waitpid(p, NULL, 0);
    }
    double t1 = now();
    stop = 1;
    for (int i = 0; i < nt; i++)
        pthread_join(t[i], NULL);
    printf("fork_storm threads=%d forks=%d per_fork_ms=%.3f worst_fork_ms=%.3f\n", nt, nf,
           (t1 - t0) / nf * 1e3, worst * 1e3);
    return 0;
}
