// SPDX-License-Identifier: MIT
// A child made by the clone system call itself, as Chromium's zygote and sandboxes make them:
// none of the parent's fork handlers runs in it. The parent allocates 10 x 100 B and clones.
// The child allocates and frees 10,000 blocks, frees 3 of the inherited ones and forks through
// glibc; that grandchild allocates, frees and execs `forker leaf` (forker.c, beside this
// program), which allocates 2 x 64 B, frees one and returns. The child waits for it and calls
// exit() (the exit handlers run).
// The parent waits, allocates 5 x 50 B and exits 0 if both children exited 0.
// Under the shim the cloned child and its child pass every call through (they have none of
// the parent's buffers or threads): the parent's trace (15 blocks, 1250 B, none freed) and the
// leaf's (2 blocks, 128 B, one freed) are the only ones.
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[32];

static int waited_ok(pid_t pid) {
    int st;
    return waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

int main(int argc, char **argv) {
    (void)argc;
    // forker's path: this program's directory, then its name
    char leaf_path[4096];
    const char *slash = strrchr(argv[0], '/');
    size_t dir = slash ? (size_t)(slash - argv[0]) + 1 : 0;
    if (dir + sizeof "forker" > sizeof leaf_path)
        return 2;
    memcpy(leaf_path, argv[0], dir);
    memcpy(leaf_path + dir, "forker", sizeof "forker");
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    long pid = syscall(SYS_clone, SIGCHLD, 0, 0, 0, 0);
    if (pid < 0)
        return 2;
    if (pid == 0) {
        for (int i = 0; i < 10000; i++) {
            void *p = malloc(16 + i % 2000);
            if (!p)
                _exit(3);
            free(p);
        }
        for (int i = 0; i < 3; i++)
            free(keep[i]);
        pid_t g = fork();
        if (g < 0)
            _exit(4);
        if (g == 0) {
            void *p = malloc(300);
            free(p);
            char *leaf[] = {leaf_path, "leaf", NULL};
            execv(leaf_path, leaf);
            _exit(5);
        }
        exit(waited_ok(g) ? 0 : 6);
    }
    int ok = waited_ok((pid_t)pid);
    for (int i = 0; i < 5; i++)
        keep[20 + i] = malloc(50);
    return ok ? 0 : 1;
}
