// SPDX-License-Identifier: MIT
// Thread-local recursion guard. While it is held, every entry point goes straight to the real
// allocator: allocations made by the shim itself (libunwind, dlsym, zstd) are never recorded.
#ifndef HEAPPROF_PRELOAD_GUARD_H
#define HEAPPROF_PRELOAD_GUARD_H

#include "compiler.h"

extern HP_TLS int hp_tls_guard;

static inline int hp_guard_enter(void) {
    if (hp_tls_guard)
        return 0;
    hp_tls_guard = 1;
    return 1;
}
static inline void hp_guard_leave(void) {
    hp_tls_guard = 0;
}

#endif
