// SPDX-License-Identifier: MIT
// exit_now: 100,000 mallocs (every second one freed), then _exit(0) without exit's handlers
// and destructors (issue #17 item 3: the shim must flush there too). Modes (argv[1]):
//   _exit   the allocations, then _exit(0)
//   _Exit   the same with _Exit(0)
//   vfork   half of them; a vfork child that calls _exit(0) at once (it shares the parent's
//           memory: it must not flush or stop the parent's writer); the other half; _exit(0)
//   vfork_exit  the same, the child calling exit(0) (undefined behaviour, which programs commit:
//           it runs the destructors, the shim's among them, in the parent's memory)
// Blocks made from this executable (the .expect counts): 100,000 of 16 + i % 64 bytes
// (i < 100,000), the odd-numbered ones freed at once.
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N 100000

static void *volatile keep;

static void allocate(int from, int to) {
    for (int i = from; i < to; i++) {
        void *p = malloc(16 + (size_t)(i % 64));
        if (i % 2)
            free(p);
        else
            keep = p; // the even ones stay live to the end
    }
}

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "_exit";
    if (strcmp(mode, "vfork") == 0 || strcmp(mode, "vfork_exit") == 0) {
        bool clean = strcmp(mode, "vfork") == 0;
        allocate(0, N / 2);
        pid_t pid = vfork();
        if (pid == 0) {
            if (clean)
                _exit(0);
            exit(0);
        }
        int status = -1;
        if (pid < 0 || waitpid(pid, &status, 0) != pid || status != 0)
            return 2;
        allocate(N / 2, N);
        _exit(0);
    }
    allocate(0, N);
    if (strcmp(mode, "_Exit") == 0)
        _Exit(0);
    _exit(0);
}
