// SPDX-License-Identifier: MIT
// The shim's state every entry point and module reads (off, on, disabled, finished), the one way
// to stop for good after a failure, and the trace's clock origin. A leaf: it includes no module
// that could include it back; the lifecycle (lifecycle.c) drives the state, everyone else reads
// it. Hot path (hp_state_is_on, hp_state_now): no locks, no allocation.
#ifndef HEAPPROF_PRELOAD_STATE_H
#define HEAPPROF_PRELOAD_STATE_H

#include "clock.h"
#include "compiler.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum hp_state_value {
    HP_STATE_OFF = 0,      // not started yet: pass through
    HP_STATE_ON = 1,       // recording
    HP_STATE_DISABLED = 2, // internal failure: pass through for good
    HP_STATE_FINISHED = 3, // after the exit flush: pass through
};

// Written by the lifecycle (start, exit) and by hp_state_disable, through hp_state_set and
// hp_state_cas; read by everyone. The process's own state: a child inherits it.
extern _Atomic int hp_state;

// hp_state as this process's entry points see it (hp_state_is_on): a copy on a page of its own,
// which the kernel zeroes in every child that does not share our memory (MADV_WIPEONFORK,
// hp_state_protect). A child made without our fork handlers (by the clone system call itself,
// as Chromium's zygote and sandboxes make them) so reads HP_STATE_OFF and passes every call
// through, where it used to write into rings it does not have (mapped MADV_DONTFORK) and die;
// a child of fork() gets the copy back in the fork handler (hp_state_after_fork).
typedef struct hp_state_page {
    _Atomic int seen;
    char pad[4096 - sizeof(_Atomic int)];
} __attribute__((aligned(4096))) hp_state_page_t;
extern hp_state_page_t hp_state_page;

static inline bool hp_state_is_on(void) {
    return atomic_load_explicit(&hp_state_page.seen, memory_order_relaxed) == HP_STATE_ON;
}

// Sets the state (the copy first: this process never sees it off while hp_state is not), and
// compares and sets it; neither touches the copy in a raw child (hp_state_raw_child), which
// stays off for good.
void hp_state_set(int v);
bool hp_state_cas(int *expected, int v);

// Whether this process is a child its parent's fork handlers never ran in (the copy wiped, the
// state not off): it passes through and must not touch what the parent's threads held (locks,
// the writer, the sampler). Cold.
bool hp_state_raw_child(void);

// Asks the kernel to wipe the copy's page in children (once, at set-up, before recording
// starts). False where it cannot (Linux before 4.14): a raw child is then not told apart.
bool hp_state_protect(void);

// In the child of fork(), from the fork handler: the copy again equal to the state.
void hp_state_after_fork(void);

// Stops profiling for good after an internal failure: says why once on stderr; the trace stays
// valid up to the last chunk written. Safe from any thread, any time.
void hp_state_disable(const char *reason);

// The trace's start (hp_state_set_start_ns); read by hp_state_now only.
extern uint64_t hp_state_start_ns_;

// CLOCK_MONOTONIC nanoseconds since the trace started. Hot path: inline, the TSC read and one
// multiply (clock.h); a call of its own cost ~8 instructions an event.
static inline uint64_t hp_state_now(void) {
    // the TSC clock starts a little behind the vDSO's (clock.h): never before the start
    uint64_t t = hp_clock_ns();
    return HP_LIKELY(t > hp_state_start_ns_) ? t - hp_state_start_ns_ : 0;
}

// The trace's start on the CLOCK_MONOTONIC scale (the file header's start_ns), and setting it:
// by the lifecycle, at set-up and in a fork child, before any event is timed.
uint64_t hp_state_start_ns(void);
void hp_state_set_start_ns(uint64_t ns);

#endif
