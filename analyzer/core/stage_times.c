// SPDX-License-Identifier: MIT
#include "core/stage_times.h"

#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static int enabled = -1; // -1: not read yet; else HEAPPROF_STAGE_TIMES's level (0: off)
static uint64_t last_wall, last_proc, last_thread;

static uint64_t clock_ns(clockid_t c) {
    struct timespec ts;
    clock_gettime(c, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t stage_clock_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

void stage_mark(const char *stage) {
    if (enabled < 0) {
        const char *e = getenv("HEAPPROF_STAGE_TIMES");
        enabled = e && *e && *e != '0' ? (*e == '2' ? 2 : 1) : 0;
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

typedef struct thread_sum {
    char name[20];
    unsigned n;
    double run, wait, run_max, wait_max;
} thread_sum_t;

void stage_threads(const char *when) {
    if (enabled < 2)
        return;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    thread_sum_t sums[32];
    unsigned n_sums = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.')
            continue;
        char path[64], name[20] = "?";
        unsigned long long run = 0, wait = 0;
        snprintf(path, sizeof path, "/proc/self/task/%.20s/comm", de->d_name);
        FILE *f = fopen(path, "r");
        if (f) {
            if (fgets(name, sizeof name, f))
                name[strcspn(name, "\n")] = 0;
            fclose(f);
        }
        snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", de->d_name);
        if ((f = fopen(path, "r"))) {
            if (fscanf(f, "%llu %llu", &run, &wait) != 2)
                run = wait = 0;
            fclose(f);
        }
        unsigned i = 0;
        while (i < n_sums && strcmp(sums[i].name, name) != 0)
            i++;
        if (i == n_sums) {
            if (n_sums == sizeof sums / sizeof *sums)
                continue;
            memset(&sums[n_sums], 0, sizeof sums[0]);
            snprintf(sums[n_sums++].name, sizeof sums[0].name, "%s", name);
        }
        thread_sum_t *t = &sums[i];
        t->n++;
        t->run += run / 1e9;
        t->wait += wait / 1e9;
        if (run / 1e9 > t->run_max)
            t->run_max = run / 1e9;
        if (wait / 1e9 > t->wait_max)
            t->wait_max = wait / 1e9;
    }
    closedir(d);
    fprintf(stderr, "threads at %s: %-16s %3s %8s %8s %8s %8s\n", when, "name", "n", "cpu s",
            "max", "wait s", "max");
    for (unsigned i = 0; i < n_sums; i++)
        fprintf(stderr, "threads at %s: %-16s %3u %8.3f %8.3f %8.3f %8.3f\n", when, sums[i].name,
                sums[i].n, sums[i].run, sums[i].run_max, sums[i].wait, sums[i].wait_max);
}

int stage_times_level(void) {
    if (enabled < 0) {
        const char *e = getenv("HEAPPROF_STAGE_TIMES");
        return e && *e && *e != '0' ? (*e == '2' ? 2 : 1) : 0;
    }
    return enabled;
}
