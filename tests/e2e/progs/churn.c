// SPDX-License-Identifier: MIT
// Heavy allocation with an answer to check: 2 threads x 1,000,000 malloc/realloc/calloc/free
// rounds over a window of live blocks, each block filled and summed. Prints the checksum, which
// does not depend on the allocator, so a run under the shim must print the same as one without.
// A trace of several MiB: enough to fill a small tmpfs.
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define THREADS 2
#define ROUNDS 1000000
#define WINDOW 256

static uint64_t sums[THREADS];

static void *work(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    unsigned char *live[WINDOW] = {0};
    size_t sizes[WINDOW] = {0};
    uint64_t sum = 0, x = 88172645463325252ull + t;
    for (unsigned i = 0; i < ROUNDS; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned slot = (unsigned)(x % WINDOW);
        size_t n = 1 + (size_t)(x >> 40) % 300;
        unsigned char *p;
        switch (i % 4) {
        case 0:
            p = realloc(live[slot], n);
            break;
        case 1:
            free(live[slot]);
            p = calloc(1, n);
            break;
        default:
            free(live[slot]);
            p = malloc(n);
            break;
        }
        if (!p)
            return (void *)1;
        size_t keep = sizes[slot] < n && i % 4 == 0 ? sizes[slot] : 0;
        memset(p + keep, (int)(i & 0xff), n - keep);
        for (size_t k = 0; k < n; k += 37)
            sum = sum * 31 + p[k];
        live[slot] = p;
        sizes[slot] = n;
    }
    for (unsigned s = 0; s < WINDOW; s++)
        free(live[s]);
    sums[t] = sum;
    return NULL;
}

int main(void) {
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        if (pthread_create(&th[t], NULL, work, (void *)(uintptr_t)t))
            return 1;
    int rc = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        void *ret;
        pthread_join(th[t], &ret);
        rc |= ret != NULL;
    }
    printf("checksum %llx %llx\n", (unsigned long long)sums[0], (unsigned long long)sums[1]);
    return rc;
}
