// SPDX-License-Identifier: MIT
// short_threads [MS] [N] [C]: burns MS ms of CPU (default 300) in long_burn on the main thread,
// then runs N threads (default 60), C at a time (default 1), each allocating a block and burning
// MS / N ms of CPU in short_burn: as much CPU in short threads, each over in a few ms, as in the
// long one. A CPU profiler that finds threads late gives short_burn fewer samples; with C in the
// hundreds, heapprof's table of timers grows while they run (test_cpu.c).
#include "cpu_burn.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

// (the store after the call keeps each a frame of its own: no tail call into spin_until)
static __attribute__((noinline)) void long_burn(uint64_t ns) {
    spin_until(burn_cpu_ns() + ns, 1000);
    burn_sink++;
}

static __attribute__((noinline)) void short_burn(uint64_t ns) {
    spin_until(burn_cpu_ns() + ns, 1000);
    burn_sink += 2; // not long_burn's body, which identical code folding would merge it with
}

static uint64_t each_ns;

static void *worker(void *arg) {
    char *volatile p = malloc(64); // the thread's first event (kept: volatile)
    p[0] = 1;
    short_burn(each_ns);
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 300, n = argc > 2 ? atol(argv[2]) : 60;
    long c = argc > 3 ? atol(argv[3]) : 1;
    if (ms <= 0 || n <= 0 || c <= 0 || c > 4096)
        return 2;
    long_burn((uint64_t)ms * 1000000u);
    each_ns = (uint64_t)ms * 1000000u / (uint64_t)n;
    static pthread_t t[4096];
    pthread_attr_t small;
    pthread_attr_init(&small);
    pthread_attr_setstacksize(&small, 256u << 10);
    for (long i = 0; i < n; i += c) {
        long wave = n - i < c ? n - i : c;
        for (long k = 0; k < wave; k++)
            if (pthread_create(&t[k], &small, worker, NULL) != 0)
                return 1;
        for (long k = 0; k < wave; k++)
            if (pthread_join(t[k], NULL) != 0)
                return 1;
    }
    printf("short_threads: %ld ms on main, %ld threads of %ld us\n", ms, n,
           (long)(each_ns / 1000u));
    return 0;
}
