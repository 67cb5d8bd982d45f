// SPDX-License-Identifier: MIT
// perf_inherit: what the kernel charges a thread's creation and end for each perf event the
// creating thread carries with `inherit` (heapprof's CPU samples: one cpu-clock event per online
// CPU, preload/cpu.c). Opens K such events (cpu-clock at 997 Hz, user stack and registers, as
// the shim asks; spread over the online CPUs, several per CPU where K exceeds them), then
// creates and joins N threads one after another and prints the microseconds each took. On a
// machine of C CPUs the shim carries C events: run K = 0, 1, ..., C (bench/thread_churn.sh).
// usage: perf_inherit K [N]
#include <linux/perf_event.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static void *nothing(void *arg) {
    return arg;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: perf_inherit K [N]\n");
        return 2;
    }
    int k = atoi(argv[1]), n = argc > 2 ? atoi(argv[2]) : 4000;
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    for (int i = 0; i < k; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_CPU_CLOCK;
        a.freq = 1;
        a.sample_freq = 997;
        a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_REGS_USER |
                        PERF_SAMPLE_STACK_USER;
        a.sample_regs_user = 1u << 6 | 1u << 7 | 1u << 8; // bp, sp, ip
        a.sample_stack_user = 8192;
        a.exclude_kernel = 1;
        a.inherit = 1;
        a.inherit_thread = 1;
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, (int)(i % ncpu), -1, 0);
        if (fd < 0) {
            perror("perf_event_open");
            return 1;
        }
        if (mmap(NULL, 9 * 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0) == MAP_FAILED) {
            perror("mmap");
            return 1;
        }
    }
    double t0 = now_s();
    for (int i = 0; i < n; i++) {
        pthread_t t;
        if (pthread_create(&t, NULL, nothing, NULL)) {
            perror("pthread_create");
            return 1;
        }
        pthread_join(t, NULL);
    }
    printf("%d %.2f\n", k, (now_s() - t0) / n * 1e6);
    return 0;
}
