// SPDX-License-Identifier: MIT
// The tracing pipeline behind the rings: a ring's records become self-contained EVENTS chunks
// (columns built from the ring's entries, compressed, checksummed) on whichever thread holds the
// ring's drain lock: a worker of a pool that grows with demand, the flusher, or the app thread
// itself when its ring is full. No stage is shared by all rings except the write(2) of each
// finished chunk (traceout.c), so the work spreads with the threads that make it
// (docs/design.md#the-pipeline).
#ifndef HEAPPROF_PRELOAD_PIPELINE_H
#define HEAPPROF_PRELOAD_PIPELINE_H

#include "tbuf.h"

#include <stdbool.h>
#include <stdint.h>

// Makes the pipeline the rings' drainer (hp_tbuf_set_drainer): a ring over half full is put on
// its work list, a full one drained by its owner through it. Once, before the first ring.
void hp_pipeline_attach(void);

// Makes the pipeline ready for a new trace (no worker yet). False if out of memory.
bool hp_pipeline_start(void);
bool hp_pipeline_running(void);

// Writes everything committed in r as EVENTS chunks and moves its tail. The caller holds
// r->drain. If the trace cannot be written the records are given up (their events counted lost)
// and false is returned; the ring is empty either way. May wait for a drainer context.
bool hp_pipeline_drain(hp_ring_t *r);

// Puts r on the work list unless it is there or being drained by a worker. Never blocks long.
void hp_pipeline_enqueue(hp_ring_t *r);

// Drains rings from the work list on the calling thread until the list is empty (the flusher
// does its share instead of waiting).
void hp_pipeline_help(void);

// Flusher: returns once every ring of the list from head that is queued has been drained,
// by the workers (this thread waits) or, with none running, by this thread.
void hp_pipeline_settle(hp_ring_t *head);

// Whether a worker runs: records queued now are drained without the caller's help.
bool hp_pipeline_has_workers(void);
// How many workers run (the flusher alone starts and stops them).
unsigned hp_pipeline_worker_count(void);

// Flusher: starts one more worker if work is waiting and every worker is busy, up to the limit
// (half the CPUs, at least one). Creating threads only here, on a thread of ours, keeps
// pthread_create out of the host's malloc calls (glibc may allocate under its stack lock).
void hp_pipeline_grow(void);

// Stops the workers and waits for them; drains still work, on the calling threads (the
// flusher's final flush). Returns how many workers it joined.
unsigned hp_pipeline_stop(void);
// After hp_pipeline_stop for a pause (writer.c: the process made single-threaded for a moment):
// the flusher may start workers again.
void hp_pipeline_resume(void);
// After the TRAILER: nothing is drained any more; a full ring's records are counted lost.
void hp_pipeline_end(void);

// Totals for the TRAILER: events written, events given up.
uint64_t hp_pipeline_events(void);
uint64_t hp_pipeline_lost(void);
// CPU time of the workers (added as each one ends), the most that ran at once, and the
// calling thread's own CPU time: what the TRAILER says the pipeline cost.
uint64_t hp_pipeline_workers_cpu_ns(void);
unsigned hp_pipeline_most_workers(void);
uint64_t hp_pipeline_thread_cpu_ns(void);

// fork: the child has no workers and must not reuse contexts another thread was using.
void hp_pipeline_fork_prepare(void);
void hp_pipeline_fork_parent(void);
void hp_pipeline_fork_child(void);

#endif
