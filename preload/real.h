// SPDX-License-Identifier: MIT
// The real allocator behind the shim, found with dlsym(RTLD_NEXT), and the bootstrap arena that
// serves allocations made before (or while) it is being found.
#ifndef HEAPPROF_PRELOAD_REAL_H
#define HEAPPROF_PRELOAD_REAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct sigaction;

typedef struct hp_real {
    void *(*malloc)(size_t);
    void (*free)(void *);
    void *(*calloc)(size_t, size_t);
    void *(*realloc)(void *, size_t);
    void *(*reallocarray)(void *, size_t, size_t);
    int (*posix_memalign)(void **, size_t, size_t);
    void *(*aligned_alloc)(size_t, size_t);
    void *(*memalign)(size_t, size_t);
    void *(*valloc)(size_t);
    void *(*pvalloc)(size_t);
    size_t (*malloc_usable_size)(void *);
    int (*execve)(const char *, char *const[], char *const[]);
    int (*execvpe)(const char *, char *const[], char *const[]);
    int (*fexecve)(int, char *const[], char *const[]);
    void (*exit_now)(int); // _exit (_Exit is the same function in glibc)
    int (*sigaction)(int, const struct sigaction *, struct sigaction *);
    void (*(*signal)(int, void (*)(int)))(int);
    int (*unshare)(int);
    void (*pthread_exit)(void *);
    int (*setns)(int, int);
} hp_real_t;

extern hp_real_t hp_real;

// Resolves every function once; safe to call repeatedly and from any entry point. Returns false
// while resolution is in progress on this call chain (the caller must use the bootstrap arena).
bool hp_real_resolve(void);

// Bootstrap arena: 16-byte aligned (or `align`) bytes that are never given back. NULL when full.
void *hp_real_boot_alloc(size_t size, size_t align);
// Whether p is a bootstrap block. Inline: every free asks (a call was ~1% of c_churn's time
// under sampled recording, where little else happens per free).
#define HP_REAL_BOOT_BYTES (256 * 1024)
extern char hp_real_boot_arena[HP_REAL_BOOT_BYTES];
static inline bool hp_real_is_boot(const void *p) {
    uintptr_t a = (uintptr_t)p, lo = (uintptr_t)hp_real_boot_arena;
    return a - lo < HP_REAL_BOOT_BYTES;
}
// Usable size of a bootstrap block (what the caller asked for, rounded).
size_t hp_real_boot_size(const void *p);

#endif
