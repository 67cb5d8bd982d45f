// SPDX-License-Identifier: MIT
// Alternate signal stacks the shim lends to the threads that arm their own CPU-time timer
// (cpu_timer.c). A timer's signal lands wherever its thread is, and an allocating thread may be
// deep in the shim's cold paths (a new stack's unwind rules, draining its own ring) on a stack
// of 16 KiB: the signal frame and the handler must not add to that. The handler is installed
// with SA_ONSTACK, so on a thread with an alternate stack (its own, or one lent here) they go
// there. See docs/design.md#cpu-samples.
#ifndef HEAPPROF_PRELOAD_ALTSTACK_H
#define HEAPPROF_PRELOAD_ALTSTACK_H

#include <stdbool.h>

// The calling thread: makes sure a signal of ours runs on an alternate stack. The thread's own
// (the program's) where it has one large enough for the kernel's signal frame and our handler;
// else one of the pool's, installed here and returned in *lent (NULL otherwise), to be given
// back once the thread is gone. False: neither (the program's is too small, the pool is at its
// cap, or out of memory). Cold: a few system calls, a lock held for a few stores.
bool hp_altstack_lend(void **lent);

// The calling thread, whose stack from hp_altstack_lend (lent; NULL: nothing) is not to be
// kept after all: uninstalled where it is still the thread's, and back to the pool.
void hp_altstack_unlend(void *lent);

// A stack lent to a thread that is gone (the kernel can no longer put a frame on it): back to
// the pool. Any thread.
void hp_altstack_give_back(void *stack);

// Stacks lent now, and stacks mapped in all (bench, tests).
unsigned hp_altstack_lent(void);
unsigned hp_altstack_mapped(void);

// fork child: the calling thread is the only one left; every other stack lent is free again.
void hp_altstack_fork_child(void);

#endif
