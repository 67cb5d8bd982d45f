// SPDX-License-Identifier: MIT
// 16 threads x 100,000 malloc/free pairs, plus 1,000 blocks per thread handed to the next thread
// and freed there. Exact: 1,616,000 blocks, 1,616,000 frees, nothing live at exit.
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define THREADS 16
#define PAIRS 100000
#define HANDOFF 1000

static void *volatile sink;
static void *slots[THREADS][HANDOFF];
static pthread_barrier_t barrier;

static size_t size_of(unsigned i, unsigned t) {
    return 8 + ((i * 2654435761u + t * 97u) % 512);
}

static void *work(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    for (unsigned i = 0; i < HANDOFF; i++)
        slots[t][i] = malloc(size_of(i, t));
    for (unsigned i = 0; i < PAIRS; i++) {
        void *p = malloc(size_of(i, t));
        sink = p;
        free(p);
    }
    pthread_barrier_wait(&barrier);
    // free the blocks the previous thread allocated: lifetimes cross threads
    unsigned from = (t + THREADS - 1) % THREADS;
    for (unsigned i = 0; i < HANDOFF; i++)
        free(slots[from][i]);
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    pthread_barrier_init(&barrier, NULL, THREADS);
    for (unsigned t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, work, (void *)(uintptr_t)t))
            return 1;
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    return 0;
}
