/* SPDX-License-Identifier: MIT */
/* many_threads N K: N threads (default 1000), all alive at once, each making K (default 20000)
 * small allocations and freeing them, at most 16 live at a time. For the memory a profiler adds
 * per thread (JVMs and thread-per-connection servers run thousands). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static long per_thread = 20000;
static pthread_barrier_t all_started;

static void *worker(void *arg)
{
    unsigned s = (unsigned)(size_t)arg * 2654435761u + 1;
    void *live[16] = {0};
    pthread_barrier_wait(&all_started);
    for (long i = 0; i < per_thread; i++) {
        s = s * 1103515245u + 12345u;
        free(live[i & 15]);
        live[i & 15] = malloc(16 + (s >> 16) % 240);
    }
    for (int i = 0; i < 16; i++)
        free(live[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000;
    if (argc > 2)
        per_thread = atol(argv[2]);
    if (n < 1 || n > 100000) { fprintf(stderr, "threads must be 1..100000\n"); return 2; }
    pthread_t *t = malloc(sizeof *t * (size_t)n);
    pthread_attr_t a;
    pthread_attr_init(&a);
    pthread_attr_setstacksize(&a, 256 * 1024);
    pthread_barrier_init(&all_started, NULL, (unsigned)n);
    for (int i = 0; i < n; i++)
        if (pthread_create(&t[i], &a, worker, (void *)(size_t)i)) { perror("pthread_create"); return 1; }
    for (int i = 0; i < n; i++)
        pthread_join(t[i], NULL);
    printf("many_threads threads=%d allocations=%ld\n", n, (long)n * per_thread);
    free(t);
    return 0;
}
