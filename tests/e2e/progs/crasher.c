// SPDX-License-Identifier: MIT
// Allocates 1000 x 16 B (leaked), waits long enough for a flush, then dies: SIGKILL (default),
// abort() ("abort") or a segmentation fault ("segv"). A trace must survive with all 1000 blocks
// and no clean-exit trailer.
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[1000];

static int *volatile nowhere;

int main(int argc, char **argv) {
    for (int i = 0; i < 1000; i++)
        keep[i] = malloc(16);
    struct timespec ts = {0, 400 * 1000 * 1000}; // > 4 flush intervals
    nanosleep(&ts, NULL);
    if (argc > 1 && !strcmp(argv[1], "abort"))
        abort();
    if (argc > 1 && !strcmp(argv[1], "segv"))
        *nowhere = 1;
    kill(getpid(), SIGKILL);
    return 0;
}
