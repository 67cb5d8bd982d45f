// SPDX-License-Identifier: MIT
// Per-thread record ring: the owner thread appends whole records (ringent.h: fixed-width entries
// for heap events, trace records for the rest) and publishes them with one release store; one
// drainer at a time (a pipeline worker, the flusher, or the owner itself when the ring is full)
// turns them into a chunk. Single producer, single consumer, no locks and no
// read-modify-write on the append path.
#ifndef HEAPPROF_PRELOAD_TBUF_H
#define HEAPPROF_PRELOAD_TBUF_H

#include "compiler.h"
#include "debug.h"
#include "format/hpt_codec.h"
#include "ringent.h"
#include "state.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct hp_ring {
    // written by the owner thread
    _Alignas(64) _Atomic uint64_t head; // bytes ever committed
    _Atomic uint32_t busy;              // between taking an event's time and committing it
    _Atomic uint64_t last_t;            // time of the event in flight (or the last one)
    uint64_t n_lost;                    // events dropped (no pipeline yet, or it failed); read at exit
    uint64_t wait_ns, n_waits;          // time the owner spent on a full ring (back-pressure)
    uint64_t t_hi;                      // the high time bits of the last THI committed (ringent.h)
    uint64_t lim; // owner-private: head may reach this with no other check (hp_tbuf_reserve)
    // written by whoever holds `drain` (a pipeline worker, the flusher or the owner itself)
    _Alignas(64) _Atomic uint64_t tail; // bytes ever drained: written to the file, or given up
    hpt_dstate_t wstate;                // delta state after the last drained record
    uint64_t raw_time, raw_hi;          // the drain's hp_rc_pos_t beside wstate (ringcols.h)
    _Atomic uint32_t queued;            // on the pipeline's work list; the taker clears it
    // After each drain, once its chunks are in the file: the head it drained to, and the time
    // of its last record, which every later record of the ring has at least (a thread's times
    // never go back). The flusher's watermark reads them instead of waiting for drains.
    _Atomic uint64_t out_head, out_t;
    pthread_mutex_t drain;              // one drainer at a time; held across the chunk's write
    // data and cap change only by the owner, holding `drain`, with the ring empty (growth)
    _Alignas(64) uint8_t *data;
    uint32_t cap; // power of two, at most hp_config.ring_bytes
    uint32_t cap0; // its first size (tbuf.c counts what rings grew by)
    uint32_t tid; // 0: the CPU sampler's ring
    _Atomic int closed; // owner thread ran its exit hook; the flusher reaps the ring once it is gone
    struct hp_ring *next;      // the registry (tbuf.c); only the flusher unlinks
    struct hp_ring *prev;      // the registry's other way (under its lock): unlinked in place
    struct hp_ring *closed_next; // tbuf.c's stack of closed rings, then the reaper's list
    struct hp_ring *work_next; // the pipeline's work list (pipeline.c)
    uint64_t sync_head;        // flusher-private: head when the current watermark was taken
    uint64_t pooled_ns;        // in tbuf.c's pool of ended threads' rings: since when
} hp_ring_t;

// Largest record the shim ever appends (a STACK of HPT_MAX_FRAMES frames).
#define HP_REC_MAX (16 + HPT_MAX_FRAMES * HPT_VARINT_MAX)

// Creates and registers a ring for thread tid, of the smallest size (it grows with need). NULL
// on failure. Takes the list lock; cold.
hp_ring_t *hp_tbuf_new(uint32_t tid);

// The registry of rings, newest first. Rings are unlinked only by hp_tbuf_reap (the flusher),
// so the flusher may walk a snapshot without the lock; others lock around the walk.
hp_ring_t *hp_tbuf_list_lock(void);
void hp_tbuf_list_unlock(void);
// The owner thread's exit hook is done with r (its last records appended): marks it closed and
// hands it to the reaper, which then asks only closed rings whether they can go.
void hp_tbuf_close(hp_ring_t *r);
// Of the closed rings, unlinks those for which dead(ring) is true and frees them (into tbuf.c's
// pool for the next threads, or unmapped), and unmaps pooled rings unused for a second. Only
// closed rings are visited: the rings of threads still alive cost it nothing. Caller is the
// flusher.
void hp_tbuf_reap(bool (*dead)(hp_ring_t *));
// In a fork child: forgets every ring (they belong to the parent) and reinitialises the lock.
void hp_tbuf_forget_all(void);
// Unmaps the pool of ended threads' rings (tbuf.c), when the trace ends: a program that goes on
// after a detach keeps none of them. Cold; takes the list lock.
void hp_tbuf_pool_drop(void);

// Who drains the rings: the pipeline (pipeline.c), which sits above this file and registers
// itself here once, before any ring exists (hp_pipeline_attach). Only the cold paths below call
// these; the append path never does. running: whether drains write to a trace now; enqueue: as
// hp_pipeline_enqueue; drain: as hp_pipeline_drain (the caller holds r->drain).
typedef struct hp_tbuf_drainer {
    bool (*running)(void);
    void (*enqueue)(hp_ring_t *r);
    bool (*drain)(hp_ring_t *r);
    void (*help_one)(void); // drains one ring of the work list, if any, on the calling thread
} hp_tbuf_drainer_t;

// Registers the drainer (kept by pointer). Call before the first ring is made; not thread-safe.
void hp_tbuf_set_drainer(const hp_tbuf_drainer_t *d);

// The ring is full: drain it on this thread (waiting for a drainer that holds it first), and
// grow it if it is below its largest size. The owner waits, never loses, while the pipeline
// lives; false (the event is counted lost) only when there is none. Cold.
bool hp_tbuf_wait_slow(hp_ring_t *r, size_t n);
// The ring is over half full: ask the pipeline to drain it. Cold.
void hp_tbuf_nudge_slow(hp_ring_t *r);

// Marks the ring's owner busy, then takes the time of its next record: the order the writer's
// watermark relies on (docs/trace-format.md#merge). The time never goes back from the ring's
// previous one, also when the clock switches to the TSC, which starts a little behind
// (clock.h). Hot path.
static inline uint64_t hp_tbuf_busy_now(hp_ring_t *r) {
    atomic_store_explicit(&r->busy, 1, memory_order_relaxed);
    atomic_signal_fence(memory_order_seq_cst);
    uint64_t t = hp_state_now();
    uint64_t last = atomic_load_explicit(&r->last_t, memory_order_relaxed);
    if (HP_UNLIKELY(t < last))
        t = last;
    atomic_store_explicit(&r->last_t, t, memory_order_relaxed);
    return t;
}

// The owner committed everything it timed.
static inline void hp_tbuf_idle(hp_ring_t *r) {
    atomic_store_explicit(&r->busy, 0, memory_order_release);
}

// hp_tbuf_reserve past r->lim: sets a new limit from the drained tail, asks for a drain where
// the ring is over half full, or returns NULL (no room without a wrap). Cold: once per few
// hundred KiB of entries.
uint8_t *hp_tbuf_reserve_slow(hp_ring_t *r, size_t max);

// Where the owner may write its next entry, of at most max bytes, straight into the ring:
// room for max bytes without a wrap. NULL: write it aside and use hp_tbuf_append. Nothing may be
// appended between this and hp_tbuf_commit. Hot path: a record encoded byte by byte on the
// stack and then copied was read back with vector loads, a store-forwarding stall per event.
// One compare: the room, the wrap and the half-full nudge are all in r->lim, which the slow
// path sets (the checks themselves were ~20 instructions an event, callgrind).
static inline uint8_t *hp_tbuf_reserve(hp_ring_t *r, size_t max) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    if (HP_UNLIKELY(h + max > r->lim))
        return hp_tbuf_reserve_slow(r, max);
    HP_ASSERT(h + max - atomic_load_explicit(&r->tail, memory_order_relaxed) <= r->cap);
    HP_ASSERT(((uint32_t)h & (r->cap - 1)) + max <= r->cap);
    return r->data + ((uint32_t)h & (r->cap - 1));
}

// Before the owner marks its ring busy: where the ring may lack room for n bytes (past r->lim),
// drains it first if it is full, so that the wait for the drain happens outside the busy
// window (a thread that waits busy holds every SYNC's watermark at its time: with a thousand
// threads on two CPUs, for over a second). Hot path: one compare.
void hp_tbuf_room_slow(hp_ring_t *r, size_t n);
static inline void hp_tbuf_room(hp_ring_t *r, size_t n) {
    if (HP_UNLIKELY(atomic_load_explicit(&r->head, memory_order_relaxed) + n > r->lim))
        hp_tbuf_room_slow(r, n);
}

// Publishes the n bytes written at hp_tbuf_reserve's pointer.
static inline void hp_tbuf_commit(hp_ring_t *r, size_t n) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    // the record stayed inside what hp_tbuf_reserve found room for: no wrap, no overrun
    HP_ASSERT(n > 0 && ((uint32_t)h & (r->cap - 1)) + n <= r->cap);
    HP_ASSERT(h + n - atomic_load_explicit(&r->tail, memory_order_relaxed) <= r->cap);
    atomic_store_explicit(&r->head, h + n, memory_order_release);
}

// Appends one whole record and publishes it. Hot path. Returns false if the record was dropped.
static inline bool hp_tbuf_append(hp_ring_t *r, const uint8_t *rec, size_t n) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    HP_ASSERT(n > 0 && t <= h);
    if (HP_UNLIKELY(h + n - t > r->cap)) {
        if (!hp_tbuf_wait_slow(r, n))
            return false;
        // drained (and maybe grown) by this thread: room for the whole record now
        HP_ASSERT(h + n - atomic_load_explicit(&r->tail, memory_order_relaxed) <= r->cap);
    }
    uint32_t off = (uint32_t)h & (r->cap - 1);
    uint32_t first = r->cap - off;
    if (HP_LIKELY(n <= first)) {
        memcpy(r->data + off, rec, n);
    } else {
        memcpy(r->data + off, rec, first);
        memcpy(r->data, rec + first, n - first);
    }
    atomic_store_explicit(&r->head, h + n, memory_order_release);
    if (HP_UNLIKELY(h + n - t > r->cap / 2) &&
        !atomic_load_explicit(&r->queued, memory_order_relaxed))
        hp_tbuf_nudge_slow(r);
    return true;
}

#endif
