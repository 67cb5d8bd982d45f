// SPDX-License-Identifier: MIT
// idle_threads N S: N threads alive at once, each making one allocation (so that the profiler
// knows it: a ring, a timer) and then sleeping S seconds, then joined. Next to nothing to
// profile: what a profiler costs a process by its thread count alone (bench/timer_threads.sh).
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static unsigned secs;

static void *idle(void *arg) {
    char *volatile p = malloc(32); // volatile: not elided with its free
    sleep(secs);
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    int n = argc > 1 ? atoi(argv[1]) : 4000;
    secs = argc > 2 ? (unsigned)atoi(argv[2]) : 3;
    pthread_t *t = malloc(sizeof *t * (size_t)(n > 0 ? n : 1));
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 64u << 10);
    int made = 0;
    while (made < n && pthread_create(&t[made], &small, idle, NULL) == 0)
        made++;
    for (int i = 0; i < made; i++)
        pthread_join(t[i], NULL);
    printf("idle_threads: %d threads for %u s\n", made, secs);
    free(t);
    return made == n ? 0 : 1;
}
