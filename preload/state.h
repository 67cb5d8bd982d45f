// SPDX-License-Identifier: MIT
// Lifecycle of the shim: start-up, the on/disabled/finished state every entry point checks,
// fork, exec and exit.
#ifndef HEAPPROF_PRELOAD_STATE_H
#define HEAPPROF_PRELOAD_STATE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

enum hp_state_value {
    HP_STATE_OFF = 0,      // not started yet: pass through
    HP_STATE_ON = 1,       // recording
    HP_STATE_DISABLED = 2, // internal failure: pass through for good
    HP_STATE_FINISHED = 3, // after the exit flush: pass through
};

extern _Atomic int hp_state;

static inline bool hp_state_is_on(void) {
    return atomic_load_explicit(&hp_state, memory_order_relaxed) == HP_STATE_ON;
}

// Stops profiling for good after an internal failure: says why once on stderr; the trace stays
// valid up to the last chunk written. Safe from any thread, any time.
void hp_state_disable(const char *reason);

// Makes sure this process has an open trace and a running writer (a fork child starts its trace
// on its first event). Returns false if profiling cannot go on. Cold; takes a lock.
bool hp_state_ensure_trace(void);

// Called by an entry point while the state is still OFF: starts recording early if that is safe
// now. Returns whether recording is on. Cold.
bool hp_state_start_early(void);

// Flushes everything recorded so far before the image is replaced; waits at most ~2 s. Nothing
// in a vfork child: what it would flush and stop is the parent's.
void hp_state_before_exec(void);

// After a failed exec (the image goes on): resumes what hp_state_before_exec stopped (timer
// sampling). errno preserved. Cold.
void hp_state_exec_failed(void);

// _exit/_Exit: the exit flush and trailer the destructor would write, which _exit skips; does
// nothing in a vfork child (the parent's writer is not its own) or where this thread is inside
// the shim (a signal handler interrupted it). Waits for the writer. Cold.
void hp_state_before_exit_now(void);

// Whether this is a vfork child (or another clone sharing the memory of the image that set the
// shim up): getpid() is not the pid recorded at set-up or by the last fork handler. Such a child
// must touch nothing the parent owns. Cold (a system call).
bool hp_state_is_vfork_child(void);

// CLOCK_MONOTONIC nanoseconds since the trace started. Hot path (vDSO).
uint64_t hp_state_now(void);

// The trace's start on the CLOCK_MONOTONIC scale (the file header's start_ns).
uint64_t hp_state_start_ns(void);

#endif
