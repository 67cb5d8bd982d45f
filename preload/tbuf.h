// SPDX-License-Identifier: MIT
// Per-thread record ring: the owner thread appends whole records and publishes them with one
// release store; the writer thread drains them at any time. Single producer, single consumer,
// no locks and no read-modify-write on the append path.
#ifndef HEAPPROF_PRELOAD_TBUF_H
#define HEAPPROF_PRELOAD_TBUF_H

#include "compiler.h"
#include "format/hpt_codec.h"
#include "resolve.h"
#include "state.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

// writer-private: one record of an app thread's stage, decoded ahead by the merge (writer.c).
#define HP_RING_LOOKAHEAD 8 // a power of two
typedef struct hp_ring_look {
    hp_resolve_ev_t ev;    // ev.tag: any ring record's tag; ev.time_ns: the time it sorts by
                           // (a REALLOC's first half); the rest only for heap events
    size_t pos;            // where its bytes start in the stage
    uint64_t time0, addr0; // the delta state before it
} hp_ring_look_t;

typedef struct hp_ring {
    // written by the owner thread
    _Alignas(64) _Atomic uint64_t head; // bytes ever committed
    _Atomic uint32_t busy;              // between taking an event's time and committing it
    _Atomic uint64_t last_t;            // time of the event in flight (or the last one)
    uint64_t n_lost;                    // events dropped (buffer stalled); read at exit
    // written by the writer thread
    _Alignas(64) _Atomic uint64_t tail; // bytes ever drained
    _Atomic uint32_t wake_pending;      // owner asked the writer to drain; writer clears
    // fixed at creation
    _Alignas(64) uint8_t *data;
    uint32_t cap; // power of two
    uint32_t tid;
    _Atomic int closed; // owner thread ran its exit hook; the writer reaps the ring once it is gone
    struct hp_ring *next;
    // writer-private: staging of drained records until the next chunk is written
    hpt_dstate_t wstate; // delta state after the last drained record
    hpt_dstate_t stage_base;
    uint8_t *stage;
    size_t stage_len, stage_cap;
    uint32_t stage_nrec;
    size_t stage_fresh; // bytes drained since the last merge: what a full stage means
    // writer-private: the merge's cursor into an app thread's stage (writer.c): the records it
    // decoded ahead, oldest first, so that their table slots are fetched well before use
    uint64_t m_key;        // the time the oldest sorts by
    uint8_t m_half;        // the oldest is a REALLOC whose old block is already out
    uint8_t m_qh, m_qn;    // m_q[m_qh] is the oldest of m_qn
    size_t m_dpos;         // where decoding goes on in the stage
    uint64_t m_dtime, m_daddr; // the delta state there
    hp_resolve_pending_t m_pend;
    hp_ring_look_t m_q[HP_RING_LOOKAHEAD];
} hp_ring_t;

// Largest record the shim ever appends (a STACK of HPT_MAX_FRAMES frames).
#define HP_REC_MAX (16 + HPT_MAX_FRAMES * HPT_VARINT_MAX)

// Creates and registers a ring for thread tid. NULL on failure. Takes the list lock; cold.
hp_ring_t *hp_tbuf_new(uint32_t tid);

// The list of rings, for the writer and for fork. Lock before walking, unlock after.
hp_ring_t *hp_tbuf_list_lock(void);
void hp_tbuf_list_unlock(void);
// Unlinks rings for which dead(ring) is true and frees them; caller holds the list lock.
void hp_tbuf_reap(bool (*dead)(hp_ring_t *));
// In a fork child: forgets every ring (they belong to the parent) and reinitialises the lock.
void hp_tbuf_forget_all(void);

// Wakes the writer (futex). Cold.
void hp_tbuf_wake_writer(void);
// Word the writer sleeps on; hp_tbuf_wake_writer changes it.
extern _Atomic uint32_t hp_tbuf_wake_word;

// Waits until n bytes fit; false if they never will (shim disabled, writer stalled). Cold.
bool hp_tbuf_wait_slow(hp_ring_t *r, size_t n);
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

// Where the owner may encode its next record, of at most max bytes, straight into the ring:
// room for max bytes without a wrap. NULL: encode aside and use hp_tbuf_append. Nothing may be
// appended between this and hp_tbuf_commit. Hot path: a record encoded byte by byte on the
// stack and then copied was read back with vector loads, a store-forwarding stall per event.
static inline uint8_t *hp_tbuf_reserve(hp_ring_t *r, size_t max) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    uint32_t off = (uint32_t)h & (r->cap - 1);
    if (HP_UNLIKELY(h + max - t > r->cap || max > r->cap - off))
        return NULL;
    return r->data + off;
}

// Publishes the n bytes written at hp_tbuf_reserve's pointer.
static inline void hp_tbuf_commit(hp_ring_t *r, size_t n) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    atomic_store_explicit(&r->head, h + n, memory_order_release);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    if (HP_UNLIKELY(h + n - t > r->cap / 2) &&
        !atomic_load_explicit(&r->wake_pending, memory_order_relaxed))
        hp_tbuf_nudge_slow(r);
}

// Appends one whole record and publishes it. Hot path. Returns false if the record was dropped.
static inline bool hp_tbuf_append(hp_ring_t *r, const uint8_t *rec, size_t n) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_acquire);
    if (HP_UNLIKELY(h + n - t > r->cap)) {
        if (!hp_tbuf_wait_slow(r, n))
            return false;
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
        !atomic_load_explicit(&r->wake_pending, memory_order_relaxed))
        hp_tbuf_nudge_slow(r);
    return true;
}

#endif
