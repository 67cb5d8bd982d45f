// SPDX-License-Identifier: MIT
// The namespace calls the kernel allows only a process with one thread, as `unshare -U`,
// `nsenter -m` and sandboxes make them: setns into the process's own mount namespace (by type,
// then by "any type"), then unshare(CLONE_NEWUSER). Each must succeed as it does without the
// shim, whose threads would otherwise make the kernel answer EINVAL.
// Around them: 100,000 blocks of 24 B made and freed before (rings fill, the pipeline's workers
// start), 40 x 1000 B kept across the calls, 100,000 x 24 B made and freed after: 200,040
// blocks, 4,840,000 B, 200,000 freed.
// `probe`: the calls alone, no allocation: exit 0 where this machine allows them, 77 where it
// does not (a container without CAP_SYS_ADMIN, user namespaces off).
// Exits 0, or 10 + the step that failed (its error on stderr).
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[40];

static int failed(int step, int probe) {
    if (probe)
        return 77;
    const char *e = strerror(errno);
    static const char what[] = "ns_alone: step failed: ";
    char n[2] = {(char)('0' + step), '\n'};
    (void)!write(2, what, sizeof what - 1);
    (void)!write(2, e, strlen(e));
    (void)!write(2, " ", 1);
    (void)!write(2, n, 2);
    return 10 + step;
}

static int churn(int n) {
    for (int i = 0; i < n; i++) {
        void *p = malloc(24);
        if (!p)
            return -1;
        *(volatile char *)p = 1;
        free(p);
    }
    return 0;
}

int main(int argc, char **argv) {
    int probe = argc > 1 && !strcmp(argv[1], "probe");
    if (!probe && churn(100000))
        return 2;
    for (int i = 0; !probe && i < 40; i++)
        if (!(keep[i] = malloc(1000)))
            return 2;
    int fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return failed(1, probe);
    if (setns(fd, CLONE_NEWNS) != 0)
        return failed(2, probe);
    if (setns(fd, 0) != 0)
        return failed(3, probe);
    close(fd);
    if (unshare(CLONE_NEWUSER) != 0)
        return failed(4, probe);
    if (!probe && churn(100000))
        return 2;
    return 0;
}
