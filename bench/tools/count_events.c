/* SPDX-License-Identifier: MIT */
/* count_events.so: LD_PRELOAD counter of allocation events for bench/run.sh.
 * Counts calls to malloc, calloc, realloc and the memalign family (the same
 * events heaptrack_print calls "calls to allocation functions") and appends
 * "<pid> <events> <frees>" to $BENCH_COUNT_OUT at exit.  Used only when no
 * heaptrack trace gives the count; never used for timing (the counter is a
 * shared atomic).  Adapted from shared/notes/baseline-bench/probes/probe.c. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void *(*next_malloc)(size_t);
static void (*next_free)(void *);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);
static int (*next_posix_memalign)(void **, size_t, size_t);
static void *(*next_aligned_alloc)(size_t, size_t);
static void *(*next_memalign)(size_t, size_t);
static void *(*next_valloc)(size_t);
static void *(*next_pvalloc)(size_t);

static unsigned long n_events, n_frees;
#define COUNT(var) __atomic_fetch_add(&(var), 1, __ATOMIC_RELAXED)

/* dlsym() may call calloc/malloc before the real ones are known: serve those
 * from a static arena, never freed and never counted. */
static char boot_arena[64 * 1024] __attribute__((aligned(16)));
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n)
{
    n = (n + 15) & ~(size_t)15;
    if (boot_used + n > sizeof boot_arena) return NULL;
    void *p = boot_arena + boot_used;
    boot_used += n;
    return p;
}
static int is_boot(void *p)
{
    return (char *)p >= boot_arena && (char *)p < boot_arena + sizeof boot_arena;
}

static void resolve(void)
{
    resolving = 1;
    next_malloc = dlsym(RTLD_NEXT, "malloc");
    next_free = dlsym(RTLD_NEXT, "free");
    next_calloc = dlsym(RTLD_NEXT, "calloc");
    next_realloc = dlsym(RTLD_NEXT, "realloc");
    next_posix_memalign = dlsym(RTLD_NEXT, "posix_memalign");
    next_aligned_alloc = dlsym(RTLD_NEXT, "aligned_alloc");
    next_memalign = dlsym(RTLD_NEXT, "memalign");
    next_valloc = dlsym(RTLD_NEXT, "valloc");
    next_pvalloc = dlsym(RTLD_NEXT, "pvalloc");
    resolving = 0;
}

/* Runs after main returns or exit() is called; no stdio (it allocates). */
__attribute__((destructor)) static void report(void)
{
    const char *path = getenv("BENCH_COUNT_OUT");
    if (!path) return;
    char b[96];
    int n = snprintf(b, sizeof b, "%ld %lu %lu\n", (long)getpid(),
                     __atomic_load_n(&n_events, __ATOMIC_RELAXED),
                     __atomic_load_n(&n_frees, __ATOMIC_RELAXED));
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return;
    if (write(fd, b, (size_t)n) < 0) { /* nothing to do */ }
    close(fd);
}

void *malloc(size_t n)
{
    if (!next_malloc) {
        if (resolving) return boot_alloc(n);
        resolve();
    }
    COUNT(n_events);
    return next_malloc(n);
}

void *calloc(size_t a, size_t b)
{
    if (!next_calloc) {
        if (resolving) return boot_alloc(a * b); /* static arena is zeroed */
        resolve();
    }
    COUNT(n_events);
    return next_calloc(a, b);
}

void free(void *p)
{
    if (!p || is_boot(p)) return;
    if (!next_free) resolve();
    COUNT(n_frees);
    next_free(p);
}

void *realloc(void *old, size_t n)
{
    if (!next_realloc) {
        if (resolving) return boot_alloc(n);
        resolve();
    }
    if (is_boot(old)) { /* move a bootstrap block to the real heap */
        void *p = next_malloc(n);
        size_t avail = (size_t)(boot_arena + sizeof boot_arena - (char *)old);
        if (p) memcpy(p, old, n < avail ? n : avail);
        return p;
    }
    COUNT(n_events);
    return next_realloc(old, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    if (!next_posix_memalign) resolve();
    COUNT(n_events);
    return next_posix_memalign(out, align, n);
}

void *aligned_alloc(size_t align, size_t n)
{
    if (!next_aligned_alloc) resolve();
    COUNT(n_events);
    return next_aligned_alloc(align, n);
}

void *memalign(size_t align, size_t n)
{
    if (!next_memalign) resolve();
    COUNT(n_events);
    return next_memalign(align, n);
}

void *valloc(size_t n)
{
    if (!next_valloc) resolve();
    COUNT(n_events);
    return next_valloc(n);
}

void *pvalloc(size_t n)
{
    if (!next_pvalloc) resolve();
    COUNT(n_events);
    return next_pvalloc(n);
}
