// SPDX-License-Identifier: MIT
// The shim's per-thread state that is too big for static TLS. glibc carves a module's static TLS
// out of every thread's stack, the host's threads included, also with HEAPPROF_ENABLE=0: 29.6 KiB
// of it made pthread_create fail with EINVAL for 16 KiB stacks (issue #17). So each thread that
// records gets one block from mem.c on its first event, reached through the one pointer
// hp_tls_thread, given back at thread exit and reused by the next thread. Static TLS keeps only
// a few words (guard.h, record.c). Runs inside malloc: no allocation of the host's, no stdio.
#ifndef HEAPPROF_PRELOAD_THREAD_H
#define HEAPPROF_PRELOAD_THREAD_H

#include "compiler.h"
#include "unwind.h"

#include <pthread.h>
#include <stdint.h>

// record.c's known steps: (previous stack id, where the shared part starts, the new frames) ->
// stack id. Two-way set-associative; see record.c. 256 sets (24 KiB a thread; session 11): on
// unwind_torture, which makes steps between many call sites, 128 entries hit ~29k of ~280k
// steps, 512 ~169k, 2048 ~197k; a hit or a miss costs the same instructions at any size.
#define HP_STEP_CACHE 512u
typedef struct hp_step {
    uint32_t from_id, to_id; // to_id 0: empty
    uint32_t base, n_fresh;
    uint64_t fresh[HP_DELTA_FRESH_MAX];
} hp_step_t;

typedef struct hp_thread {
    _Alignas(64) unsigned char unwind[HP_UNWIND_THREAD_BYTES]; // the unwinder's; first, so its
                                                               // pointer is the block's
    hp_step_t steps[HP_STEP_CACHE];
    struct hp_thread *next_free;
} hp_thread_t;

// Starts a thread of the shim's own (the flusher, pipeline workers, the CPU sampler) with every
// signal blocked, so that the host's handlers never run on it. Returns pthread_create's result.
// Cold.
int hp_thread_spawn(pthread_t *t, void *(*fn)(void *));

// The process's threads as the kernel counts them (/proc/self/stat, field 20: a main thread
// that ended with pthread_exit is still one), or -1. Plain system calls, no allocation. Cold.
long hp_thread_kernel_count(void);

// This thread's block, or NULL: before its first recorded event, after its exit hook gave the
// block back (other TLS destructors may still allocate), or when memory ran out. Every user
// copes with NULL by a slower path that keeps no per-thread state (record.c, unwind_cfi.c).
extern HP_TLS hp_thread_t *hp_tls_thread;

// Gives this thread a block if it has none: one an exited thread gave back (reset), else fresh
// pages. Returns it, or NULL when out of memory. Cold; takes the free list's lock (held around
// nothing that allocates or can be interrupted by our own signals' work).
hp_thread_t *hp_thread_attach(void);

// Thread exit: puts this thread's block on the free list; hp_tls_thread becomes NULL. Cold.
void hp_thread_detach(void);

// Empties this thread's block, as a new thread finds it (its caches were left half-written).
void hp_thread_reset(void);

// fork child: the free list's lock may have been held by a thread that does not exist here.
// Blocks of the parent's other threads stay with them (unreachable here, bounded by their number).
void hp_thread_fork_child(void);

#endif
