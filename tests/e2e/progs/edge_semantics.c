// SPDX-License-Identifier: MIT
// Prints what libc returns (NULL or not, errno, return codes) for the allocator's edge cases.
// Run with and without the shim: the two outputs must be identical, byte for byte.
#include <errno.h>
#include <malloc.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// realloc(p, SIZE_MAX) fails and leaves p valid; gcc cannot know that and warns on later use.
#pragma GCC diagnostic ignored "-Wuse-after-free"

static void *volatile sink;
static volatile size_t big = SIZE_MAX; // volatile: keep gcc from folding the calls

#define SHOW(label, expr)                                                                          \
    do {                                                                                           \
        errno = 12345;                                                                             \
        void *p_ = (expr);                                                                         \
        printf("%-34s %s errno=%d\n", label, p_ ? "ptr " : "NULL", errno);                       \
        sink = p_;                                                                                 \
    } while (0)

int main(void) {
    setvbuf(stdout, NULL, _IONBF, 0);
    SHOW("malloc(0)", malloc(0));
    free(sink);
    SHOW("malloc(SIZE_MAX)", malloc(big));
    SHOW("malloc(SIZE_MAX/2)", malloc(big / 2));
    SHOW("calloc(SIZE_MAX, 2) overflow", calloc(big, 2));
    SHOW("calloc(0, 16)", calloc(0, 16));
    free(sink);
    SHOW("realloc(NULL, 32)", realloc(NULL, 32));
    void *p = sink;
    SHOW("realloc(p, SIZE_MAX) keeps p", realloc(p, big));
    SHOW("realloc(p, 64)", realloc(p, 64));
    p = sink;
    SHOW("realloc(p, 0) frees", realloc(p, 0));
    SHOW("reallocarray(NULL, SIZE_MAX, 2)", reallocarray(NULL, big, 2));
    SHOW("reallocarray(NULL, 4, 8)", reallocarray(NULL, 4, 8));
    p = sink;
    SHOW("reallocarray(p, SIZE_MAX, 2)", reallocarray(p, big, 2));
    free(p);
    SHOW("aligned_alloc(3, 64) bad align", aligned_alloc(3, 64));
    SHOW("aligned_alloc(64, 64)", aligned_alloc(64, 64));
    printf("aligned to 64: %d\n", ((uintptr_t)sink & 63) == 0);
    free(sink);
    SHOW("aligned_alloc(64, SIZE_MAX)", aligned_alloc(64, big));
    SHOW("memalign(4096, 100)", memalign(4096, 100));
    printf("aligned to 4096: %d\n", ((uintptr_t)sink & 4095) == 0);
    free(sink);
    SHOW("memalign(3, 100) rounds up", memalign(3, 100));
    free(sink);
    SHOW("valloc(10)", valloc(10));
    free(sink);
    SHOW("pvalloc(10)", pvalloc(10));
    printf("pvalloc usable >= page: %d\n", malloc_usable_size(sink) >= (size_t)getpagesize());
    free(sink);
    void *q = NULL;
    errno = 777;
    int rc = posix_memalign(&q, 3, 64);
    printf("posix_memalign(3) rc=%d q=%s errno=%d\n", rc, q ? "ptr" : "NULL", errno);
    errno = 777;
    rc = posix_memalign(&q, 64, big);
    printf("posix_memalign(64, SIZE_MAX) rc=%d errno=%d\n", rc, errno);
    errno = 777;
    rc = posix_memalign(&q, 64, 100);
    printf("posix_memalign(64, 100) rc=%d aligned=%d errno=%d\n", rc, ((uintptr_t)q & 63) == 0, errno);
    free(q);
    errno = 4242;
    free(NULL);
    printf("free(NULL) errno=%d\n", errno);
    void *r = malloc(100);
    errno = 4343;
    free(r);
    printf("free(p) errno=%d\n", errno);
    printf("malloc_usable_size(NULL)=%zu\n", malloc_usable_size(NULL));
    r = malloc(100);
    printf("malloc_usable_size(100)>=100: %d\n", malloc_usable_size(r) >= 100);
    free(r);
    return 0;
}
