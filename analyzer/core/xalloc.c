// SPDX-License-Identifier: MIT
// Out-of-memory policy of the analyzer (and the page-size hint its big tables share): one message
// on stderr, exit status 2. The only place besides main.c allowed to print and exit, because no
// caller could do anything better.
#include "core/xalloc.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void xalloc_fail(size_t n) {
    fprintf(stderr, "heapprof: out of memory (allocating %zu bytes)\n", n);
    exit(2);
}

void *xmalloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p)
        xalloc_fail(n);
    return p;
}

void *xcalloc(size_t n, size_t size) {
    if (size && n > SIZE_MAX / size)
        xalloc_fail(SIZE_MAX);
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        xalloc_fail(n * size);
    return p;
}

void *xrealloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q)
        xalloc_fail(n);
    return q;
}

char *xstrdup(const char *s) {
    size_t n = strlen(s) + 1;
    return memcpy(xmalloc(n), s, n);
}

void *xgrow(void *p, size_t *cap, size_t need, size_t elem_bytes) {
    if (need <= *cap)
        return p;
    size_t c = *cap ? *cap : 16;
    while (c < need) {
        if (c > SIZE_MAX / 2)
            xalloc_fail(SIZE_MAX);
        c *= 2;
    }
    if (elem_bytes && c > SIZE_MAX / elem_bytes)
        xalloc_fail(SIZE_MAX);
    *cap = c;
    return xrealloc(p, c * elem_bytes);
}
