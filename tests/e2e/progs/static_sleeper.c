// SPDX-License-Identifier: MIT
// A statically linked program that allocates and sleeps until its standard input closes: the
// process `heapprof attach` must refuse (no dynamic loader to call dlopen through).
#include <stdlib.h>
#include <unistd.h>

int main(void) {
    char b[64];
    void *p = malloc(100);
    while (read(0, b, sizeof b) > 0) {
    }
    free(p);
    return 0;
}
