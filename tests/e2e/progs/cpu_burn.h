// SPDX-License-Identifier: MIT
// What the CPU-sampling test programs share (test_cpu.c): burning a known amount of the
// thread's CPU time, and counting the perf_event descriptors the process holds (heapprof's
// sampler opens one per sampled CPU).
#ifndef HEAPPROF_TESTS_E2E_PROGS_CPU_BURN_H
#define HEAPPROF_TESTS_E2E_PROGS_CPU_BURN_H

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static volatile uint64_t burn_sink;

static inline uint64_t burn_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

// Spins until the thread's CPU clock reaches `end`, reading it (a system call) every `steps`
// steps: fewer reads leave less of the time to the kernel, which perf events do not count.
static __attribute__((noinline, unused)) void spin_until(uint64_t end, int steps) {
    uint64_t x = burn_sink;
    while (burn_cpu_ns() < end)
        for (int i = 0; i < steps; i++)
            x = x * 6364136223846793005u + 1442695040888963407u;
    burn_sink = x;
}

// The process's perf_event descriptors; -1 if /proc/self/fd cannot be read.
static inline int perf_fd_count(void) {
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

#endif
