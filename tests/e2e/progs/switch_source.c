// SPDX-License-Identifier: MIT
// switch_source [MS] [WAIT_MS]: CPU samples across heapprof's switch from perf events to the
// CPU-time timer (HEAPPROF_TEST_CPU_SWITCH_AFTER=2 makes the second thread's first event the
// trigger). Burns MS ms of CPU (default 300) in before_switch on the main thread, starts and
// joins one thread that allocates, then waits until the process holds no perf_event descriptor
// any more (the sampler closed them), at most WAIT_MS (default 20000), and burns MS ms more in
// after_switch. Prints "perf_at_start=N switched=0|1": N perf descriptors when main began (0:
// perf was refused or not asked for).
#include <dirent.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t sink;

static uint64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// The clock read (a system call) once in 100,000 steps: perf events count user time only, the
// timer all of it, and the two must meet the same work.
static __attribute__((noinline)) void spin_until(uint64_t end) {
    uint64_t x = sink;
    while (cpu_ns() < end)
        for (int i = 0; i < 100000; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    sink = x;
}

// (the store after the call keeps each a frame of its own)
static __attribute__((noinline)) void before_switch(uint64_t ns) {
    spin_until(cpu_ns() + ns);
    sink++;
}

static __attribute__((noinline)) void after_switch(uint64_t ns) {
    spin_until(cpu_ns() + ns);
    sink += 2;
}

static int perf_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        char path[300], target[128];
        snprintf(path, sizeof path, "/proc/self/fd/%s", e->d_name);
        ssize_t len = readlink(path, target, sizeof target - 1);
        if (len <= 0)
            continue;
        target[len] = 0;
        n += strcmp(target, "anon_inode:[perf_event]") == 0;
    }
    closedir(d);
    return n;
}

static void *trigger(void *arg) {
    char *volatile p = malloc(32); // this thread's first event
    p[0] = 1;
    free(p);
    return arg;
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 300, wait_ms = argc > 2 ? atol(argv[2]) : 20000;
    int at_start = perf_fds();
    before_switch((uint64_t)ms * 1000000u);
    pthread_t t;
    if (pthread_create(&t, NULL, trigger, NULL) != 0 || pthread_join(t, NULL) != 0)
        return 1;
    int switched = 0;
    for (long waited = 0; waited <= wait_ms; waited += 10) {
        if (perf_fds() == 0) {
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
