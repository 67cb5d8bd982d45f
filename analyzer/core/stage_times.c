// SPDX-License-Identifier: MIT
#include "core/stage_times.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static int enabled = -1; // -1: not read yet
static uint64_t last_wall, last_proc, last_thread;

static uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void stage_mark(const char *stage) {
    if (enabled < 0) {
        const char *e = getenv("HEAPPROF_STAGE_TIMES");
        enabled = e && *e && *e != '0';
        last_wall = clock_ns(CLOCK_MONOTONIC);
        last_proc = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
        last_thread = clock_ns(CLOCK_THREAD_CPUTIME_ID);
        if (enabled)
            fprintf(stderr, "stage: %-22s %9s %9s %9s\n", "(wall s, cpu s, this thread s)",
                    "wall", "cpu", "thread");
        return;
    }
    if (!enabled)
        return;
    uint64_t w = clock_ns(CLOCK_MONOTONIC), p = clock_ns(CLOCK_PROCESS_CPUTIME_ID),
             t = clock_ns(CLOCK_THREAD_CPUTIME_ID);
    fprintf(stderr, "stage: %-22s %9.3f %9.3f %9.3f\n", stage, (w - last_wall) / 1e9,
            (p - last_proc) / 1e9, (t - last_thread) / 1e9);
    last_wall = w;
    last_proc = p;
    last_thread = t;
}
