// SPDX-License-Identifier: MIT
// 263 buffers grown by realloc at one site: 240 end at 576 bytes (72 -> 144 -> 288 -> 576) and
// 23 at 36 KiB (on to 36864). Growth advice must name the size that covers 90% of them (576 B)
// with what reserving it costs for all 263, not the largest (36 KiB each: 9.2 MiB in all).
#include <stdlib.h>
#include <string.h>

static void *volatile keep[263];

__attribute__((noinline)) static void *make_buffer(size_t final) {
    size_t n = 72;
    char *p = malloc(n);
    memset(p, 1, n);
    while (n < final) {
        n *= 2;
        p = realloc(p, n);
        memset(p, 1, n);
    }
    return p;
}

__attribute__((noinline)) static void make_buffers(void) {
    for (int i = 0; i < 263; i++)
        keep[i] = make_buffer(i % 11 == 10 ? 36864 : 576);
}

int main(void) {
    make_buffers();
    for (int i = 0; i < 263; i++)
        free(keep[i]);
    return 0;
}
