// SPDX-License-Identifier: MIT
// Finds the real allocator with dlsym(RTLD_NEXT). dlsym itself may call calloc/malloc before the
// answer is known; those calls are served from a static arena whose blocks are never freed.
#include "real.h"

#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

hp_real_t hp_real;

_Alignas(64) char hp_real_boot_arena[HP_REAL_BOOT_BYTES];
#define boot_arena hp_real_boot_arena
static size_t boot_used; // only touched while resolving, i.e. single-threaded start-up
static int resolving;

void *hp_real_boot_alloc(size_t size, size_t align) {
    if (align < 16)
        align = 16;
    // 16-byte size prefix before the block lets realloc copy the right amount
    size_t start = (boot_used + 16 + align - 1) & ~(align - 1);
    if (size > sizeof boot_arena || start + size > sizeof boot_arena)
        return NULL;
    boot_used = start + size;
    *(size_t *)(boot_arena + start - 16) = size;
    return boot_arena + start;
}

size_t hp_real_boot_size(const void *p) {
    return *(const size_t *)((const char *)p - 16);
}

// POSIX guarantees dlsym's object pointer converts to a function pointer; ISO C does not, so
// copy the bits instead of casting.
#define RESOLVE(name)                                                                              \
    do {                                                                                           \
        void *sym_ = dlsym(RTLD_NEXT, #name);                                                      \
        memcpy(&hp_real.name, &sym_, sizeof sym_);                                                 \
    } while (0)

bool hp_real_resolve(void) {
    if (__atomic_load_n(&hp_real.free, __ATOMIC_ACQUIRE))
        return true;
    if (resolving)
        return false;
    resolving = 1;
    RESOLVE(malloc);
    RESOLVE(calloc);
    RESOLVE(realloc);
    RESOLVE(reallocarray);
    RESOLVE(posix_memalign);
    RESOLVE(aligned_alloc);
    RESOLVE(memalign);
    RESOLVE(valloc);
    RESOLVE(pvalloc);
    RESOLVE(malloc_usable_size);
    RESOLVE(execve);
    RESOLVE(execvpe);
    RESOLVE(fexecve);
    RESOLVE(sigaction);
    RESOLVE(signal);
    RESOLVE(unshare);
    RESOLVE(pthread_exit);
    RESOLVE(setns);
    void *exit_sym = dlsym(RTLD_NEXT, "_exit");
    memcpy(&hp_real.exit_now, &exit_sym, sizeof exit_sym);
    void (*f)(void *);
    void *sym = dlsym(RTLD_NEXT, "free");
    memcpy(&f, &sym, sizeof sym);
    __atomic_store_n(&hp_real.free, f, __ATOMIC_RELEASE); // published last: the "ready" flag
    resolving = 0;
    return hp_real.malloc && hp_real.free;
}
