// SPDX-License-Identifier: MIT
// pthread_cancel of threads that allocate: cancellation acts at a cancellation point, and the
// only one in the workers' own code is pthread_testcancel after each batch. The old shim had
// more, inside malloc (its own drains write the trace): a worker cancelled there unwound with
// the shim's locks held and every other thread, the program's and the shim's, waited for them
// for good.
// 4 workers, each in batches of 1,000 malloc/free pairs (16 to 520 B), counting its pairs; main
// cancels them once they have made 200,000 pairs in all, joins them, prints "pairs N" (their
// total), then makes 1,000 blocks of 100 B and frees them: N + 1,000 blocks from this program.
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#define WORKERS 4
#define BATCH 1000
#define CANCEL_AFTER 200000

static atomic_long pairs;

static void *work(void *arg) {
    (void)arg;
    void *volatile p;
    for (;;) {
        for (int k = 0; k < BATCH; k++) {
            p = malloc(16u + (unsigned)(k % 64) * 8u);
            free(p);
        }
        atomic_fetch_add(&pairs, BATCH); // a whole batch: the cancellation point comes after
        pthread_testcancel();
    }
    return NULL;
}

int main(void) {
    pthread_t t[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        if (pthread_create(&t[i], NULL, work, NULL))
            return 2;
    while (atomic_load(&pairs) < CANCEL_AFTER)
        sched_yield();
    for (int i = 0; i < WORKERS; i++)
        pthread_cancel(t[i]);
    for (int i = 0; i < WORKERS; i++) {
        void *ret;
        if (pthread_join(t[i], &ret) || ret != PTHREAD_CANCELED)
            return 3;
    }
    printf("pairs %ld\n", atomic_load(&pairs));
    void *volatile p;
    for (int k = 0; k < 1000; k++) {
        p = malloc(100);
        free(p);
    }
    return 0;
}
