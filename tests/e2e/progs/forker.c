// SPDX-License-Identifier: MIT
// Allocates 10 x 100 B, forks. The child allocates 7 x 1000 B (leaked), frees 3 of the inherited
// blocks and exits; the parent waits, allocates 5 x 50 B (leaked) and exits.
// Parent trace: 15 blocks, 1250 B, 15 live at exit. Child trace: 7 blocks, 7000 B, 3 frees of
// blocks it never saw allocated (the parent's: the trace says it is a fork child's).
// `forker exec`: the same, but the child then execs `forker leaf`, which allocates 2 x 64 B and
// frees one: a new image, whose trace is no fork child's.
// `forker chdir DIR`: the same, but the child first changes its working directory to DIR.
// `forker daemon`: the child is a daemon's middle process: it allocates nothing (so leaves no
// trace), starts a new session, forks the grandchild that does the child's work above, and
// _exits; the parent waits for the grandchild's end (its pipe's EOF), then as above.
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[32];

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "leaf")) {
        keep[0] = malloc(64);
        keep[1] = malloc(64);
        free(keep[0]);
        return 0;
    }
    bool exec_child = argc > 1 && !strcmp(argv[1], "exec");
    bool daemon = argc > 1 && !strcmp(argv[1], "daemon");
    int gone[2] = {-1, -1}; // the grandchild holds the write end until it exits
    if (daemon && pipe(gone) != 0)
        return 1;
    const char *child_dir = argc > 2 && !strcmp(argv[1], "chdir") ? argv[2] : NULL;
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0 && daemon) {
        close(gone[0]);
        setsid();
        pid_t g = fork();
        if (g != 0)
            _exit(g < 0 ? 4 : 0);
    }
    if (pid == 0) {
        if (child_dir && chdir(child_dir) != 0)
            _exit(3);
        for (int i = 0; i < 7; i++)
            keep[10 + i] = malloc(1000);
        for (int i = 0; i < 3; i++)
            free(keep[i]);
        if (exec_child) {
            char *leaf[] = {argv[0], "leaf", NULL};
            execv(argv[0], leaf);
            _exit(2);
        }
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    if (daemon) {
        close(gone[1]);
        char c;
        for (ssize_t got; (got = read(gone[0], &c, 1)) != 0;)
            if (got < 0 && errno != EINTR)
                break;
    }
    for (int i = 0; i < 5; i++)
        keep[20 + i] = malloc(50);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
