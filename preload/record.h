// SPDX-License-Identifier: MIT
// One allocation event -> one record: clock, stack, encode, append to the thread's ring.
// Callers (interpose.c) hold the recursion guard and have checked that recording is on.
#ifndef HEAPPROF_PRELOAD_RECORD_H
#define HEAPPROF_PRELOAD_RECORD_H

#include "touch.h"

#include <stddef.h>
#include <stdint.h>

// Records a new block (tag HPT_REC_MALLOC, CALLOC or ALIGNED) after the real call returned p.
void hp_record_alloc(uint8_t tag, const void *p, size_t size, size_t align);

// Records a free of p (non-NULL). Must be called before the real free runs.
void hp_record_free(const void *p);

// What realloc's begin measured of the old block, for its end.
typedef struct hp_realloc_touch {
    hp_touch_t touch;
    size_t old_usable;
} hp_realloc_touch_t;

// realloc brackets the real call: begin before it (measures the old block, returns the
// "before" time and marks the thread busy), end after it with the outcome.
uint64_t hp_record_realloc_begin(const void *old, hp_realloc_touch_t *rt);
void hp_record_realloc_end(uint64_t t_before, const hp_realloc_touch_t *rt, const void *old,
                           const void *p, size_t size);

// Thread exit hook (pthread key destructor): writes THREAD_END, marks the ring closed.
void hp_record_thread_exit(void *ring);

// fork child: this thread's ring and encoder state belong to the parent; forget them.
void hp_record_fork_child(void);

#endif
