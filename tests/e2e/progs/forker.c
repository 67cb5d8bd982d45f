// SPDX-License-Identifier: MIT
// Allocates 10 x 100 B, forks. The child allocates 7 x 1000 B (leaked), frees 3 of the inherited
// blocks and exits; the parent waits, allocates 5 x 50 B (leaked) and exits.
// Parent trace: 15 blocks, 1250 B, 15 live at exit. Child trace: 7 blocks, 7000 B, 3 frees of
// blocks it never saw allocated.
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void *volatile keep[32];

int main(void) {
    for (int i = 0; i < 10; i++)
        keep[i] = malloc(100);
    pid_t pid = fork();
    if (pid < 0)
        return 1;
    if (pid == 0) {
        for (int i = 0; i < 7; i++)
            keep[10 + i] = malloc(1000);
        for (int i = 0; i < 3; i++)
            free(keep[i]);
        exit(0);
    }
    int status;
    waitpid(pid, &status, 0);
    for (int i = 0; i < 5; i++)
        keep[20 + i] = malloc(50);
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : 1;
}
