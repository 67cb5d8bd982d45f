// SPDX-License-Identifier: MIT
// A daemon-like program: allocates 100 x 24 B, closes every descriptor above 2, then fills the
// descriptor numbers up to 600 with a file of its own (argv[1]) and allocates 100 x 24 B more.
// The shim must reopen its trace rather than write into the program's file: 200 blocks in the
// trace, argv[1] still empty.
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[200];

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(24);
    struct timespec ts = {0, 150 * 1000 * 1000}; // let a flush happen through the old fd
    nanosleep(&ts, NULL);
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    for (int i = 0; i < 600; i++)
        if (open(argv[1], O_RDWR) < 0)
            break;
    for (int i = 100; i < 200; i++)
        keep[i] = malloc(24);
    return 0;
}
