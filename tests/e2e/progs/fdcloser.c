// SPDX-License-Identifier: MIT
// A daemon-like program: allocates 100 x 24 B; dup2s a file of its own (argv[1]) over the
// descriptors 500-531, where the shim keeps its trace, and allocates 50 x 24 B; closes every
// descriptor above 2, fills the numbers up to 600 with its file again and allocates 100 x 24 B.
// The shim must reopen its trace rather than write into the program's file: 250 blocks in the
// trace, argv[1] still empty.
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

static void *volatile keep[250];

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    for (int i = 0; i < 100; i++)
        keep[i] = malloc(24);
    struct timespec ts = {0, 150 * 1000 * 1000}; // let a flush happen through the old fd
    nanosleep(&ts, NULL);
    int own = open(argv[1], O_RDWR);
    if (own < 0)
        return 3;
    for (int fd = 500; fd < 532; fd++)
        dup2(own, fd);
    for (int i = 200; i < 250; i++)
        keep[i] = malloc(24);
    nanosleep(&ts, NULL); // a flush now finds its descriptor pointing at the program's file
    for (int fd = 3; fd < 1024; fd++)
        close(fd);
    for (int i = 0; i < 600; i++)
        if (open(argv[1], O_RDWR) < 0)
            break;
    for (int i = 100; i < 200; i++)
        keep[i] = malloc(24);
    return 0;
}
