// SPDX-License-Identifier: MIT
// 64 MiB allocated, every page written, kept to the end; then the process's own peak resident
// set (getrusage), printed as maxrss_kb=N. Its stdout buffer is allocated after that, so the
// shim's last flush, at exit, samples the resident set with the 64 MiB in it (test_process.c).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

static char *volatile keep;

int main(void) {
    size_t n = (size_t)64 << 20;
    char *p = malloc(n);
    if (!p)
        return 1;
    memset(p, 1, n);
    keep = p;
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return 1;
    printf("maxrss_kb=%ld\n", ru.ru_maxrss);
    return 0;
}
