// SPDX-License-Identifier: MIT
// Allocates 1000 x 16 B (leaked), waits long enough for a flush, then kills itself with SIGKILL.
// A trace must survive with all 1000 blocks and no clean-exit trailer.
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[1000];

int main(void) {
    for (int i = 0; i < 1000; i++)
        keep[i] = malloc(16);
    struct timespec ts = {0, 400 * 1000 * 1000}; // > 4 flush intervals
    nanosleep(&ts, NULL);
    kill(getpid(), SIGKILL);
    return 0;
}
