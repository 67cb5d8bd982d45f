// SPDX-License-Identifier: MIT
// Stage 1 allocates 4 x 64 B (leaked) and execs itself as stage 2, which allocates 6 x 32 B
// (leaked). Same pid, two images: two traces, 4 blocks then 6.
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *volatile keep[8];

int main(int argc, char **argv) {
    if (argc > 1 && !strcmp(argv[1], "stage2")) {
        for (int i = 0; i < 6; i++)
            keep[i] = malloc(32);
        return 0;
    }
    for (int i = 0; i < 4; i++)
        keep[i] = malloc(64);
    char *args[] = {argv[0], "stage2", NULL};
    execv("/proc/self/exe", args);
    return 1;
}
