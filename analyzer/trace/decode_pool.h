// SPDX-License-Identifier: MIT
// decode_pool: decodes chunks (chunk_decode.h) on worker threads while the reader frames the
// next ones and applies the earlier ones: a ring of chunk slots, submitted and taken back in
// order, decoded by whichever worker is free (docs/design.md#analyzer-threads). With no
// workers (asked for, or none could start) a slot is decoded when it is submitted, on the
// caller's thread: the same results, one thread.
#ifndef HEAPPROF_ANALYZER_DECODE_POOL_H
#define HEAPPROF_ANALYZER_DECODE_POOL_H

#include "trace/chunk_decode.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct decode_pool decode_pool_t;

// workers: threads to start (0: decode on the caller's thread). Allocates (exits on OOM).
decode_pool_t *decode_pool_new(unsigned workers);
void decode_pool_free(decode_pool_t *p); // stops the workers; NULL is fine

// Worker threads running (0: chunks are decoded as they are submitted).
unsigned decode_pool_workers(const decode_pool_t *p);
// With HEAPPROF_STAGE_TIMES=2: how long the consumer waited for a chunk a worker was still
// decoding (0 otherwise); and the most chunks that were in flight at once. The consumer's
// thread only.
uint64_t decode_pool_waited_ns(const decode_pool_t *p);
size_t decode_pool_most_in_flight(const decode_pool_t *p);
// Slots submitted and not yet given back.
size_t decode_pool_in_flight(const decode_pool_t *p);
// Whether another slot may be submitted (in flight < the ring's size).
bool decode_pool_has_room(const decode_pool_t *p);

// The slot to fill next (only with room); its buffers are the ones it had, for reuse. Fill its
// input fields, then submit it.
dchunk_t *decode_pool_next(decode_pool_t *p);
void decode_pool_submit(decode_pool_t *p);

// The oldest submitted slot, decoded (waits for its worker); NULL if none is in flight. Valid
// until decode_pool_release.
dchunk_t *decode_pool_oldest(decode_pool_t *p);
void decode_pool_release(decode_pool_t *p);

// Workers to use when the user does not say: the online CPUs beyond the two that read and
// replay, at most 4; 0 on a machine of two CPUs or fewer. HEAPPROF_DECODE_THREADS (0-16)
// overrides it.
unsigned decode_pool_default_workers(void);

#endif
