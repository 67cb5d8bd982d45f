// SPDX-License-Identifier: MIT
// Prints how many perf_event descriptors the process holds (the shim's CPU sampler opens one per
// CPU it samples) and how many CPUs its affinity mask allows: "perf_fds=N cpus=M". The CPU
// sampler opens its events when recording starts, before main (test_cpu.c).
#include <dirent.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(void) {
    char *keep = malloc(64); // something to record
    if (!keep)
        return 1;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return 1;
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
    cpu_set_t on;
    int cpus = sched_getaffinity(0, sizeof on, &on) == 0 ? CPU_COUNT(&on) : -1;
    printf("perf_fds=%d cpus=%d\n", n, cpus);
    free(keep);
    return 0;
}
