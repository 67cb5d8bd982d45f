// SPDX-License-Identifier: MIT
// bench/tools/alloc_pairs.c: the smallest allocation workload, for counting instructions per
// event (bench/sampled_instr.sh). Usage: alloc_pairs KIND COUNT, KIND one of
//   malloc   COUNT x (malloc(64), free)
//   calloc   COUNT x (calloc(1, 64), free)
//   realloc  COUNT x (malloc(32), realloc to 64, free)
// Sizes cycle over 16..256 bytes so glibc's tcache serves every call (no system calls in the
// loop). The pointers go through a volatile sink so the compiler keeps every call.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void *volatile sink;

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: alloc_pairs malloc|calloc|realloc COUNT\n");
        return 2;
    }
    long n = atol(argv[2]);
    const char *kind = argv[1];
    if (strcmp(kind, "malloc") == 0) {
        for (long i = 0; i < n; i++) {
            void *p = malloc(16 + (size_t)(i & 15) * 16);
            sink = p;
            free(p);
        }
    } else if (strcmp(kind, "calloc") == 0) {
        for (long i = 0; i < n; i++) {
            void *p = calloc(1, 16 + (size_t)(i & 15) * 16);
            sink = p;
            free(p);
        }
    } else if (strcmp(kind, "realloc") == 0) {
        for (long i = 0; i < n; i++) {
            void *p = malloc(16 + (size_t)(i & 7) * 16);
            p = realloc(p, 256 + (size_t)(i & 7) * 16);
            sink = p;
            free(p);
        }
    } else {
        fprintf(stderr, "alloc_pairs: unknown kind %s\n", kind);
        return 2;
    }
    return 0;
}
