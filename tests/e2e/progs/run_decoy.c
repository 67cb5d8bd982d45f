// SPDX-License-Identifier: MIT
// run_decoy DECOY: allocates, forks a child that allocates too, waits for it, then writes at
// DECOY the file header of a trace from a process outside its tree (pid 1): what another run of
// the same program, writing into the same directory meanwhile, leaves there.
#include "format/hpt_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
    if (argc != 2)
        return 2;
    void *volatile p = malloc(100);
    free(p);
    pid_t child = fork();
    if (child == 0) {
        void *volatile q = malloc(200);
        free(q);
        _exit(0);
    }
    int status;
    if (child < 0 || waitpid(child, &status, 0) != child)
        return 1;
    hpt_file_hdr_t h;
    memset(&h, 0, sizeof h);
    memcpy(h.magic, HPT_MAGIC, sizeof h.magic);
    h.version = HPT_VERSION;
    h.hdr_bytes = sizeof h;
    h.pid = 1;
    FILE *f = fopen(argv[1], "wb");
    if (!f || fwrite(&h, sizeof h, 1, f) != 1 || fclose(f) != 0)
        return 1;
    return 0;
}
