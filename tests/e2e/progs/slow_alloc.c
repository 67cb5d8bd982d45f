// SPDX-License-Identifier: MIT
// A program that allocates steadily for a while (argv[1] milliseconds, default 3000), for
// `heapprof pprof --follow` (test_pprof.c): every millisecond two sites allocate, one of them
// keeps a share of its blocks live until exit, so each interval has allocations and a heap.
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void *keep[1 << 16];
static unsigned n_keep;

__attribute__((noinline)) static void *make_message(size_t n) {
    char *p = malloc(n);
    if (p)
        memset(p, 'm', n);
    return p;
}

__attribute__((noinline)) static void *make_record(unsigned i) {
    return calloc(1, 64 + i % 512);
}

int main(int argc, char **argv) {
    long ms = argc > 1 ? atol(argv[1]) : 3000;
    struct timespec tick = {0, 1000000};
    for (long i = 0; i < ms; i++) {
        free(make_message(100 + (size_t)i % 900));
        void *r = make_record((unsigned)i);
        if (i % 4 == 0 && n_keep < sizeof keep / sizeof *keep)
            keep[n_keep++] = r; // live until exit
        else
            free(r);
        nanosleep(&tick, NULL);
    }
    return 0;
}
