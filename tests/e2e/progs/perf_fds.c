// SPDX-License-Identifier: MIT
// Prints how many perf_event descriptors the process holds (the shim's CPU sampler opens one per
// CPU it samples) and how many CPUs its affinity mask allows: "perf_fds=N cpus=M". The CPU
// sampler opens its events when recording starts, before main (test_cpu.c).
#include "cpu_burn.h"

#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char *keep = malloc(64); // something to record
    if (!keep)
        return 1;
    int n = perf_fd_count();
    if (n < 0)
        return 1;
    cpu_set_t on;
    int cpus = sched_getaffinity(0, sizeof on, &on) == 0 ? CPU_COUNT(&on) : -1;
    printf("perf_fds=%d cpus=%d\n", n, cpus);
    free(keep);
    return 0;
}
