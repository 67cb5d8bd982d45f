// SPDX-License-Identifier: MIT
// reserve: one program in two versions for `heapprof check --baseline` (test_check.c). Built
// as-is, load_records grows its array one record at a time with realloc; built with -DRESERVE
// (the fix), it allocates room for every record up front. The heap at exit is the same.
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline, noipa))
#define N_RECORDS 1000

typedef struct record {
    uint64_t id, a, b, c;
} record_t;

static volatile uintptr_t sink;

static NOINLINE record_t *load_records(size_t n) {
#ifdef RESERVE
    record_t *v = malloc(n * sizeof *v);
    if (!v)
        abort();
#else
    record_t *v = NULL;
#endif
    for (size_t i = 0; i < n; i++) {
#ifndef RESERVE
        v = realloc(v, (i + 1) * sizeof *v);
        if (!v)
            abort();
#endif
        v[i] = (record_t){i, i * 2, i * 3, i * 4};
    }
    return v;
}

int main(void) {
    record_t *v = load_records(N_RECORDS);
    sink += (uintptr_t)v + v[N_RECORDS - 1].c;
    free(v);
    return 0;
}
