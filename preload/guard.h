// SPDX-License-Identifier: MIT
// Thread-local recursion guard. While it is held, every entry point goes straight to the real
// allocator: allocations made by the shim itself (libunwind, dlsym, zstd) are never recorded.
//
// The guard holds the frame address of the entry point that took it (HP_GUARD_HERE), so that a
// holder abandoned by a longjmp out of a signal handler that interrupted the shim can be told
// from a real nesting: a later entry from a shallower frame (a higher address) than the holder's
// knows that frame is gone (record.c, hp_record_guard_slow; issue #17 item 9). Its low bit marks
// a holder in a cold path that may hold a lock (HP_GUARD_COLD): abandoned there, the thread
// cannot resume. Small values mean "held for good": HP_GUARD_FOREVER (the shim's own threads
// store 1), HP_GUARD_LOST (abandoned in a cold path: events pass through and are counted lost).
#ifndef HEAPPROF_PRELOAD_GUARD_H
#define HEAPPROF_PRELOAD_GUARD_H

#include "compiler.h"
#include "debug.h"

#include <pthread.h>
#include <stdint.h>

extern HP_TLS uintptr_t hp_tls_guard;

#define HP_GUARD_FOREVER ((uintptr_t)1)
#define HP_GUARD_LOST ((uintptr_t)3)
#define HP_GUARD_COLD ((uintptr_t)1)
// The frame of the function this expands in (inlined helpers: of the function they are in).
#define HP_GUARD_HERE() ((uintptr_t)__builtin_frame_address(0))

static inline __attribute__((always_inline)) int hp_guard_enter(void) {
    if (hp_tls_guard)
        return 0;
    hp_tls_guard = HP_GUARD_HERE();
    return 1;
}
static inline void hp_guard_leave(void) {
    HP_ASSERT(hp_tls_guard != 0);
    hp_tls_guard = 0;
}

// Cancellation off while a host's thread is inside the shim's cold paths. pthread_cancel acts at
// the thread's next cancellation point, and the shim's cold paths have some (write, open, a
// condition wait): one there unwound the thread out of malloc with the shim's locks held, and
// every other thread then waited for them for good (tests/e2e/progs/cancel_alloc.c). The CFI
// walker's event path has none and pays nothing; the libunwind path (HEAPPROF_UNWIND=libunwind,
// and frames it hands over) pays a pair of calls, 7.2 ns here. Returns the state to give back
// to hp_nocancel_end.
static inline int hp_nocancel_begin(void) {
    int old = PTHREAD_CANCEL_ENABLE;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &old);
    return old;
}
static inline void hp_nocancel_end(int old) {
    int was;
    pthread_setcancelstate(old, &was);
}

// Marks the holder as in a cold path (locks, libdw, libunwind), with cancellation off, until the
// returned value is given back to hp_guard_cold_leave. Cold.
typedef struct hp_guard_cold {
    uintptr_t guard;
    int cancel;
} hp_guard_cold_t;
static inline hp_guard_cold_t hp_guard_cold_enter(void) {
    hp_guard_cold_t c = {hp_tls_guard, hp_nocancel_begin()};
    hp_tls_guard = c.guard | HP_GUARD_COLD;
    return c;
}
static inline void hp_guard_cold_leave(hp_guard_cold_t c) {
    // Nothing in the cold path took or dropped the guard: a nested entry only passes through,
    // and a longjmp out of it never comes back here.
    HP_ASSERT(hp_tls_guard == (c.guard | HP_GUARD_COLD));
    hp_tls_guard = c.guard;
    hp_nocancel_end(c.cancel);
}

#endif
