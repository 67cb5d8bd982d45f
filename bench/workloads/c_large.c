/* SPDX-License-Identifier: MIT */
/* c_large: large blocks (160 KiB-4 MiB) on recycled heap pages, the case issue #23's touch
 * measure pays for (a mincore per block at malloc and free, and the pattern on the resident
 * pages). Freeing one 30 MiB mmapped block first raises glibc's mmap threshold to 30 MiB, so
 * every later block comes from the heap; four stay live at a time, so the heap reuses the
 * pages the earlier ones wrote. Each block gets its first eighth written. Prints a checksum.
 * Usage: c_large N (blocks). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    long n = argc > 1 ? atol(argv[1]) : 20000;
    static const size_t sizes[] = {160 << 10, 512 << 10, 1 << 20, 4 << 20, 300 << 10, 2 << 20};
    char *big = malloc(30 << 20);
    if (!big)
        return 1;
    big[0] = 1;
    free(big);
    char *live[4] = {0};
    uint64_t h = 1469598103934665603ull;
    for (long i = 0; i < n; i++) {
        size_t sz = sizes[i % (sizeof sizes / sizeof *sizes)];
        free(live[i % 4]);
        char *p = malloc(sz);
        if (!p)
            return 1;
        memset(p, (int)(i & 0x7f) + 1, sz / 8);
        __asm__ volatile("" : : "r"(p) : "memory"); /* the writes are the point: keep them */
        h = (h ^ (unsigned char)p[sz / 16]) * 1099511628211ull;
        live[i % 4] = p;
    }
    for (int i = 0; i < 4; i++)
        free(live[i]);
    printf("checksum %016llx\n", (unsigned long long)h);
    return 0;
}
