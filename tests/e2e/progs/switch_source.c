// SPDX-License-Identifier: MIT
// switch_source [MS] [WAIT_MS]: CPU samples across heapprof's switch from perf events to the
// CPU-time timer (HEAPPROF_TEST_CPU_SWITCH_AFTER=2 makes the second thread's first event the
// trigger). Burns MS ms of CPU (default 300) in before_switch on the main thread, starts and
// joins one thread that allocates, then waits until the process holds no perf_event descriptor
// any more (the sampler closed them), at most WAIT_MS (default 20000), and burns MS ms more in
// after_switch. Prints "perf_at_start=N switched=0|1": N perf descriptors when main began (0:
// perf was refused or not asked for).
#include "cpu_burn.h"

#include <pthread.h>
#include <stdlib.h>

// (the store after the call keeps each a frame of its own)
static __attribute__((noinline)) void before_switch(uint64_t ns) {
    spin_until(burn_cpu_ns() + ns, 100000); // perf events and the timer count the same time
    burn_sink++;
}

static __attribute__((noinline)) void after_switch(uint64_t ns) {
    spin_until(burn_cpu_ns() + ns, 100000);
    burn_sink += 2;
}

static void *trigger(void *arg) {
    char *volatile p = malloc(32); // this thread's first event
    p[0] = 1;
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 300, wait_ms = argc > 2 ? atol(argv[2]) : 20000;
    int at_start = perf_fd_count();
    before_switch((uint64_t)ms * 1000000u);
    pthread_t t;
    if (pthread_create(&t, NULL, trigger, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    int switched = 0;
    for (long waited = 0; waited <= wait_ms; waited += 10) {
        if (perf_fd_count() == 0) {
            switched = 1;
            break;
        }
        struct timespec ts = {0, 10000000};
        nanosleep(&ts, NULL);
    }
    after_switch((uint64_t)ms * 1000000u);
    printf("perf_at_start=%d switched=%d\n", at_start, switched);
    return 0;
}
