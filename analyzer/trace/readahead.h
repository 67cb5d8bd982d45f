// SPDX-License-Identifier: MIT
// readahead: runs a reader on a second thread (verify, decompress, decode, merge) and hands its
// merged events to the caller's thread in batches, in the reader's order, so the replay of one
// batch overlaps the decoding of the next (docs/design.md#analyzer-throughput). While it runs, the
// reader belongs to its thread: touch it again only after readahead_free.
#ifndef HEAPPROF_ANALYZER_READAHEAD_H
#define HEAPPROF_ANALYZER_READAHEAD_H

#include "core/errmsg.h"
#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct readahead readahead_t;

// Work the reading thread may do while the caller is behind (every batch slot full, or the
// trace read to its end): called there, with the reader (which it may read from, not
// advance), until it returns false for nothing left to do now. It runs only while the thread
// would otherwise wait.
typedef bool (*readahead_idle_fn)(void *ctx, reader_t *r);

// Starts reading r on a new thread. Falls back to reading on the caller's thread when no thread
// can be made (idle is then never called). idle may be NULL. Allocates (exits on OOM).
readahead_t *readahead_new(reader_t *r, readahead_idle_fn idle, void *idle_ctx);

// As reader_next_batch: *evs points at *n >= 1 events, valid until the next call; returns 1, 0 at
// the end, -1 with err filled by the reader's error (after every event read before it).
// *offset (may be NULL): the reader's file offset when the batch was cut, for progress lines.
int readahead_next(readahead_t *ra, const reader_event_t **evs, size_t *n, uint64_t *offset,
                   errmsg_t *err);

// The same, but the batch is the caller's: it stays valid past the next call until the caller
// gives it back with reader_batch_done(r, *keep) (from any thread, before reader_close; after
// readahead_free too). So a consumer that needs a batch longer (replay_par's rounds) takes it
// without a copy.
int readahead_next_keep(readahead_t *ra, const reader_event_t **evs, size_t *n,
                        uint64_t *offset, reader_batch_t **keep, errmsg_t *err);

// Stops the thread (even mid-trace) and frees; the reader is the caller's again. NULL is fine.
// With HEAPPROF_STAGE_TIMES=2: how long the caller waited for batches the reading thread had
// not yet made (0 otherwise).
uint64_t readahead_waited_ns(const readahead_t *ra);

void readahead_free(readahead_t *ra);

#endif
