// SPDX-License-Identifier: MIT
// bench/process_start.py's launcher: runs argv N times in a row (stdout and stderr to
// /dev/null) and prints the wall ns of all N and the median peak RSS of one, in KiB. A small
// program of its own, because a child's peak RSS counts what its process held before exec:
// forked from Python it would read as Python's.
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int cmp_long(const void *a, const void *b) {
    long x = *(const long *)a, y = *(const long *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc < 3)
        return 2;
    int n = atoi(argv[1]);
    long *rss = calloc((size_t)n, sizeof *rss);
    if (n < 1 || !rss)
        return 2;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < n; i++) {
        pid_t pid = fork();
        if (pid < 0)
            return 3;
        if (pid == 0) {
            int fd = open("/dev/null", O_RDWR);
            dup2(fd, 1);
            dup2(fd, 2);
            execv(argv[2], argv + 2);
            _exit(127);
        }
        int st;
        struct rusage ru;
        if (wait4(pid, &st, 0, &ru) != pid || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
            fprintf(stderr, "run_many: %s failed (status %d)\n", argv[2], st);
            return 1;
        }
        rss[i] = ru.ru_maxrss;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    qsort(rss, (size_t)n, sizeof *rss, cmp_long);
    printf("%lld %ld\n",
           (long long)(t1.tv_sec - t0.tv_sec) * 1000000000LL + (t1.tv_nsec - t0.tv_nsec),
           rss[n / 2]);
    return 0;
}
