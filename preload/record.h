// SPDX-License-Identifier: MIT
// One allocation event -> one ring entry (ringent.h): clock, stack, a few stores into the
// thread's ring.
// Callers (interpose.c) hold the recursion guard and have checked that recording is on.
#ifndef HEAPPROF_PRELOAD_RECORD_H
#define HEAPPROF_PRELOAD_RECORD_H

#include "unwind.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Records a new block (tag HPT_REC_MALLOC, CALLOC or ALIGNED) after the real call returned p;
// from: the entry point's caller (HP_CALLER_FRAME), where its stack starts. The caller asked
// hp_sample_alloc first (sample.h) and got true.
void hp_record_alloc(uint8_t tag, const void *p, size_t size, size_t align,
                     const hp_frame_t *from);

// Records a free of p (non-NULL). Must be called before the real free runs. The caller asked
// hp_sample_free first (sample.h) and got true.
void hp_record_free(const void *p);

// realloc brackets the real call: begin before it (returns the "before" time, marks the thread
// busy and gives the old block's usable size), end after it with the outcome. size: the size
// asked for. In sampled mode (sample.h) begin decides for both blocks, and where neither is
// sampled, neither call touches the ring or reads the clock.
uint64_t hp_record_realloc_begin(const void *old, size_t size, size_t *old_usable);
void hp_record_realloc_end(uint64_t t_before, size_t old_usable, const void *old, const void *p,
                           size_t size, const hp_frame_t *from);

// The same for an allocator the shim is not preloaded over (patched or interposed by name,
// allocscan.h): its blocks are not libc's, so they are never filled or measured for bytes
// touched (which asks libc's malloc_usable_size); frees carry "not measured". realloc end: a
// failed call (NULL) with size 0 records a free, as the libc form does.
void hp_record_alloc_foreign(uint8_t tag, const void *p, size_t size, size_t align,
                             const hp_frame_t *from);
void hp_record_free_foreign(const void *p);
// A free that names the block's size (and alignment; 0: not given), as Rust's dealloc, C++'s
// sized delete, jemalloc's sdallocx and mimalloc's mi_free_size do: a FREE_SIZED record, so the
// analyzer can check the size against the block's (docs/trace-format.md#sized-frees).
void hp_record_free_sized_foreign(const void *p, size_t size, size_t align);
uint64_t hp_record_realloc_begin_foreign(const void *old, size_t size);
void hp_record_realloc_end_foreign(uint64_t t_before, const void *old, const void *p, size_t size,
                                   const hp_frame_t *from);

// Appends a record without a time (an ALLOCATOR found after start, allocscan.c) to this
// thread's stream. The caller holds the recursion guard. Cold.
void hp_record_note(const uint8_t *rec, size_t len);

// What a thread's first event calls before it makes the thread's ring: makes sure this process
// has a trace to write to (a fork child starts its own then). False: the thread records nothing
// (the hook has already stopped profiling). Registered once by the lifecycle, before recording
// is switched on; none registered means nothing to make sure of.
void hp_record_set_trace_hook(bool (*ensure_trace)(void));

// Thread exit hook (pthread key destructor): writes THREAD_END, marks the ring closed.
void hp_record_thread_exit(void *ring);

// An entry point found the recursion guard held (guard.h). Returns whether it may record after
// all: the holder's frame is gone (a longjmp out of a signal handler that interrupted the shim
// abandoned it) and the thread's state was put back. Otherwise the call passes through: a real
// nesting, or a thread that cannot resume, whose later events are counted lost (trailer).
// here: the entry point's frame (HP_GUARD_HERE). Cold; async-signal-safe.
bool hp_record_guard_slow(uintptr_t here);

// fork child: this thread's ring and stack state belong to the parent; forget them.
void hp_record_fork_child(void);

#endif
