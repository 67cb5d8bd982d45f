// SPDX-License-Identifier: MIT
// Process-wide stack interning: each distinct stack gets an id and is written to the trace once.
#ifndef HEAPPROF_PRELOAD_STACKTAB_H
#define HEAPPROF_PRELOAD_STACKTAB_H

#include "tbuf.h"

#include <stdint.h>

// Returns the id of frames[0..n) (innermost first), or HPT_STACK_UNKNOWN if it has none yet.
// Hot path: lock-free, never allocates.
uint32_t hp_stacktab_find(const uint64_t *frames, uint32_t n);

// Interns frames[0..n): the STACK record is appended to r before the id is published, so no
// event can use an id whose definition is not in some thread's stream. Takes the table lock; cold.
// Returns HPT_STACK_UNKNOWN if n == 0 or the shim is out of memory (counted as an overflow).
uint32_t hp_stacktab_intern(hp_ring_t *r, const uint64_t *frames, uint32_t n);

uint64_t hp_stacktab_count(void);

// Calls emit with the STACK record of every stack interned so far (a second trace of the same
// process, `heapprof attach` again, must define the ids its threads still reuse). Takes the
// table lock; cold.
void hp_stacktab_each_record(void (*emit)(void *ctx, const uint8_t *rec, size_t len), void *ctx);
uint64_t hp_stacktab_overflows(void);

// fork support: prepare takes the lock, parent releases it, child starts from an empty table.
void hp_stacktab_fork_prepare(void);
void hp_stacktab_fork_parent(void);
void hp_stacktab_fork_child(void);

#endif
