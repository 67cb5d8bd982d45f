// SPDX-License-Identifier: MIT
// Live-block table and heap totals. The peak is taken on allocation only (live bytes grow
// nowhere else) and only when strictly exceeded, so it marks the first moment of the maximum.
// The per-event path is one hash probe; keep it that way.
#include "replay.h"

#include "hmap.h"
#include "xalloc.h"

#include <stdlib.h>

#define BLOCK_COUNTED (1ull << 63) // in live_block.stack: the block passed the filter
#define SEEN_TIDS 64u

typedef struct live_block {
    uint64_t size;
    uint64_t time_ns;
    uint64_t stack; // stack id | BLOCK_COUNTED
} live_block_t;

struct replay {
    hmap_t live;                   // address -> live_block_t
    hmap_t tids;                   // tid -> nothing (set)
    uint32_t seen_tids[SEEN_TIDS]; // recently seen tids, by tid % SEEN_TIDS
    bool filtered;
    replay_keep_fn keep;
    void *keep_ctx;
    replay_totals_t t;
};

replay_t *replay_new(replay_keep_fn keep, void *keep_ctx) {
    replay_t *rp = xcalloc(1, sizeof *rp);
    hmap_init(&rp->live, sizeof(live_block_t));
    hmap_init(&rp->tids, 1);
    rp->keep = keep;
    rp->keep_ctx = keep_ctx;
    rp->filtered = keep != NULL;
    return rp;
}

void replay_free(replay_t *rp) {
    if (!rp)
        return;
    hmap_fini(&rp->live);
    hmap_fini(&rp->tids);
    free(rp);
}

// A thread counts once it produced a counted heap event: with a filter, a main thread that only
// started workers (libc's own blocks) is not one of the program's allocating threads.
static inline void note_thread(replay_t *rp, uint32_t tid) {
    // threads interleave event by event: a tiny direct-mapped cache spares the set lookup
    uint32_t *slot = &rp->seen_tids[tid % SEEN_TIDS];
    if (*slot == tid || tid == 0)
        return;
    *slot = tid;
    bool existed;
    hmap_put(&rp->tids, tid, &existed);
    if (!existed)
        rp->t.n_threads++;
}

static void on_alloc(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool counted = !rp->keep || rp->keep(rp->keep_ctx, ev);
    bool existed;
    live_block_t *b = hmap_put(&rp->live, ev->addr, &existed);
    if (existed) {
        // its free was lost (damage) or never recorded: the new block replaces it
        t->n_double_allocs++;
        if (b->stack & BLOCK_COUNTED) {
            t->live_bytes -= b->size;
            t->live_blocks--;
        }
    }
    b->size = ev->size;
    b->time_ns = ev->time_ns;
    b->stack = (ev->stack & ~BLOCK_COUNTED) | (counted ? BLOCK_COUNTED : 0);
    if (!counted)
        return;
    note_thread(rp, ev->tid);
    t->n_blocks++;
    t->n_bytes += ev->size;
    t->n_events++;
    t->live_blocks++;
    t->live_bytes += ev->size;
    if (t->live_bytes > t->peak_bytes) {
        t->peak_bytes = t->live_bytes;
        t->peak_blocks = t->live_blocks;
        t->peak_time_ns = ev->time_ns;
    }
}

static void on_free(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    live_block_t b;
    if (!hmap_take(&rp->live, ev->addr, &b)) {
        t->n_unknown_frees++;
        if (!rp->filtered) {
            note_thread(rp, ev->tid);
            t->n_events += !realloc_half;
        }
        return;
    }
    if (!(b.stack & BLOCK_COUNTED))
        return;
    note_thread(rp, ev->tid);
    t->live_bytes -= b.size;
    t->live_blocks--;
    if (!realloc_half) {
        t->n_frees++;
        t->n_events++;
    }
}

void replay_event(replay_t *rp, const reader_event_t *ev) {
    if (ev->time_ns > rp->t.last_time_ns)
        rp->t.last_time_ns = ev->time_ns;
    if (ev->kind == READER_ALLOC)
        on_alloc(rp, ev);
    else if (ev->kind == READER_FREE)
        on_free(rp, ev);
}

#define PREFETCH_AHEAD 8

void replay_events(replay_t *rp, const reader_event_t *ev, size_t n) {
    size_t i = 0;
    for (size_t k = 0; k < n && k < PREFETCH_AHEAD; k++)
        hmap_prefetch(&rp->live, ev[k].addr);
    for (; i + PREFETCH_AHEAD < n; i++) {
        hmap_prefetch(&rp->live, ev[i + PREFETCH_AHEAD].addr);
        replay_event(rp, &ev[i]);
    }
    for (; i < n; i++)
        replay_event(rp, &ev[i]);
}

const replay_totals_t *replay_totals(const replay_t *rp) { return &rp->t; }
