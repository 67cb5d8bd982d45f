// SPDX-License-Identifier: MIT
// exitrace DELAY_US THREADS: starts THREADS threads that allocate forever, then calls exit(0)
// after DELAY_US: threads make their first allocation while the main thread runs exit(), the
// race in which the shim once started a second trace (and writer) that exit then waited for.
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

static void *worker(void *arg) {
    (void)arg;
    for (;;) {
        void *volatile p = malloc(64);
        free(p);
    }
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    for (int i = 0; i < 1000; i++) {
        void *volatile p = malloc(100);
        free(p);
    }
    pthread_t t;
    for (int k = 0; k < atoi(argv[2]); k++)
        pthread_create(&t, NULL, worker, NULL);
    usleep((useconds_t)atoi(argv[1]));
    exit(0);
}
