// SPDX-License-Identifier: MIT
// Live-block table and heap totals. The peak is taken on allocation only (live bytes grow
// nowhere else) and only when strictly exceeded, so it marks the first moment of the maximum
// (with REPLAY_DHAT: when reached, so the last moment). The per-event path is one hash probe;
// keep it that way. With REPLAY_SITES a live block carries its site's index instead of its
// stack id, and each site keeps DHAT's figures. Live-at-peak per site is exact in one pass: a
// new peak only bumps an epoch, and a site saves its live counts the first time it changes
// after that (copy on write), so the snapshot costs O(1) per event instead of O(sites) per peak.
#include "model/replay.h"

#include "core/hmap.h"
#include "core/xalloc.h"

#include <stdlib.h>

#define BLOCK_COUNTED (1ull << 63) // in live_block.stack: the block passed the filter
#define BLOCK_ZEROED (1ull << 62)  // a calloc block (its touch is touched_nz)
#define SEEN_TIDS 64u
#define THREAD_SLOTS 64u  // direct-mapped per-thread state; the rest spills to a hash map
#define STACK_SLOTS 1024u // direct-mapped stack id -> site index cache

// stack: stack id (or site index with REPLAY_SITES) | BLOCK_COUNTED | BLOCK_ZEROED
typedef replay_block_t live_block_t;

typedef struct site_acc {
    uint64_t stack;
    uint64_t blocks, bytes;
    uint64_t live_bytes, live_blocks;
    uint64_t max_bytes, max_blocks;
    uint64_t snap_bytes, snap_blocks; // live counts at the peak of epoch snap_epoch
    uint64_t snap_epoch;
    uint64_t lifetime_ns;  // of the blocks freed so far
    uint64_t birth_sum_ns; // sum of the birth times of live blocks (mod 2^64)
    uint64_t temp_blocks, temp_bytes;
    uint64_t touch_blocks, touch_bytes, touched_bytes, touch_resident_blocks, touch_sampled_blocks;
} site_acc_t;

typedef struct thread_state {
    uint32_t tid;
    bool valid;
    bool has_pending;      // the old half of a realloc was seen, its new half not yet
    uint32_t pending_site; // site of the block that realloc replaced
    uint64_t pending_addr;
    uint64_t last_addr, last_time_ns; // this thread's latest allocation
} thread_state_t;

typedef struct stack_slot {
    uint64_t stack;
    uint64_t site; // index + 1; 0 = empty
} stack_slot_t;

struct replay {
    hmap_t live;                   // address -> live_block_t
    hmap_t tids;                   // tid -> nothing (set)
    uint32_t seen_tids[SEEN_TIDS]; // recently seen tids, by tid % SEEN_TIDS
    bool filtered;
    replay_keep_fn keep;
    void *keep_ctx;
    replay_totals_t t;

    unsigned mode;
    site_acc_t *sites;
    size_t n_sites, sites_cap;
    hmap_t site_of;                         // stack id -> site index
    stack_slot_t stack_slots[STACK_SLOTS];  // cache in front of site_of
    thread_state_t threads[THREAD_SLOTS];   // by tid % THREAD_SLOTS
    hmap_t spilled;                         // tid -> thread_state_t pushed out of threads[]
    uint64_t epoch;                         // bumped at every new global peak
    uint32_t last_site;                     // the site the latest change touched (timeline.c)
    replay_companion_fn companion_alloc, companion_free; // NULL: no companion
    void *companion_ctx;
};

replay_t *replay_new(replay_keep_fn keep, void *keep_ctx) {
    replay_t *rp = xcalloc(1, sizeof *rp);
    hmap_init_ordered(&rp->live, sizeof(live_block_t));
    hmap_init(&rp->tids, 1);
    hmap_init(&rp->site_of, sizeof(uint64_t));
    hmap_init(&rp->spilled, sizeof(thread_state_t));
    rp->keep = keep;
    rp->keep_ctx = keep_ctx;
    rp->filtered = keep != NULL;
    rp->epoch = 1; // snap_epoch 0: never saved
    return rp;
}

void replay_free(replay_t *rp) {
    if (!rp)
        return;
    hmap_fini(&rp->live);
    hmap_fini(&rp->tids);
    hmap_fini(&rp->site_of);
    hmap_fini(&rp->spilled);
    free(rp->sites);
    free(rp);
}

void replay_set_mode(replay_t *rp, unsigned mode) {
    // DHAT's conventions live in the per-site path only
    rp->mode = (mode & REPLAY_DHAT) ? mode | REPLAY_SITES : mode;
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

void replay_set_companion(replay_t *rp, size_t words, replay_companion_fn on_alloc,
                          replay_companion_fn on_free, void *ctx) {
    if (words > REPLAY_COMPANION_WORDS_MAX)
        words = REPLAY_COMPANION_WORDS_MAX;
    hmap_fini(&rp->live);
    hmap_init_ordered(&rp->live, sizeof(live_block_t) + words * sizeof(uint64_t));
    rp->companion_alloc = on_alloc;
    rp->companion_free = on_free;
    rp->companion_ctx = ctx;
}

replay_block_t *replay_block(const replay_t *rp, uint64_t addr) {
    return hmap_get(&rp->live, addr);
}

// The slot of a new block at ev->addr; the companion writes its words first. The slot is
// valid until the next change of the live table.
static inline live_block_t *put_block(replay_t *rp, const reader_event_t *ev, bool *existed) {
    live_block_t *b = hmap_put(&rp->live, ev->addr, existed);
    if (rp->companion_alloc)
        rp->companion_alloc(rp->companion_ctx, ev, b);
    return b;
}

// A counted allocation's requested size into the histogram (replay_totals_t.size_blocks).
static inline void count_size(replay_totals_t *t, uint64_t size) {
    unsigned k = replay_size_bucket(size);
    t->size_blocks[k]++;
    t->size_bytes[k] += size;
}

// ---- per-site figures (REPLAY_SITES) ----

static uint32_t site_index(replay_t *rp, uint64_t stack) {
    stack_slot_t *slot = &rp->stack_slots[(stack * 0x9E3779B97F4A7C15ull) >> 54];
    if (slot->site && slot->stack == stack)
        return (uint32_t)(slot->site - 1);
    bool existed;
    uint64_t *idx = hmap_put(&rp->site_of, stack, &existed);
    if (!existed) {
        rp->sites = xgrow(rp->sites, &rp->sites_cap, rp->n_sites + 1, sizeof *rp->sites);
        rp->sites[rp->n_sites] = (site_acc_t){.stack = stack};
        *idx = rp->n_sites++;
    }
    slot->stack = stack;
    slot->site = *idx + 1;
    return (uint32_t)*idx;
}

// The rare half of thread_state: another thread holds the slot, or none ever did.
__attribute__((noinline, cold)) static thread_state_t *thread_state_slow(replay_t *rp,
                                                                         uint32_t tid) {
    thread_state_t *ts = &rp->threads[tid % THREAD_SLOTS];
    if (ts->valid)
        *(thread_state_t *)hmap_put(&rp->spilled, ts->tid, NULL) = *ts;
    if (!hmap_take(&rp->spilled, tid, ts))
        *ts = (thread_state_t){.tid = tid};
    ts->valid = true;
    return ts;
}

// The per-thread state of tid, swapped into its direct-mapped slot.
static inline thread_state_t *thread_state(replay_t *rp, uint32_t tid) {
    thread_state_t *ts = &rp->threads[tid % THREAD_SLOTS];
    if (ts->valid && ts->tid == tid)
        return ts;
    return thread_state_slow(rp, tid);
}

// Saves the site's live counts for the current peak epoch before its first change in it.
// idx is s's index (taken as it is: from the pointer it cost a division by the record size).
static inline void site_touch(replay_t *rp, site_acc_t *s, uint32_t idx) {
    rp->last_site = idx;
    if (s->snap_epoch != rp->epoch) {
        s->snap_epoch = rp->epoch;
        s->snap_bytes = s->live_bytes;
        s->snap_blocks = s->live_blocks;
    }
}

static void site_release(replay_t *rp, uint32_t idx, const live_block_t *b, uint64_t now) {
    site_acc_t *s = &rp->sites[idx];
    site_touch(rp, s, idx);
    s->live_bytes -= b->size;
    s->live_blocks--;
    s->birth_sum_ns -= b->time_ns;
    if (now > b->time_ns)
        s->lifetime_ns += now - b->time_ns;
}

// Adds a freed block's bytes-touched measure (docs/trace-format.md#touch) to the totals and,
// when s is not NULL, to its site.
static void add_touched(replay_t *rp, site_acc_t *s, const reader_event_t *ev,
                        const live_block_t *b) {
    bool resident = ev->touch == 1 + HPT_TOUCH_RESIDENT;
    bool sampled = ev->touch == 1 + HPT_TOUCH_FILL_SAMPLED;
    uint64_t touched = (b->stack & BLOCK_ZEROED) && !resident ? ev->touched_nz : ev->touched;
    // the measure covers the allocator's usable size, which may exceed what was asked for
    if (touched > b->size)
        touched = b->size;
    replay_totals_t *t = &rp->t;
    t->touch_blocks++;
    t->touch_bytes += b->size;
    t->touched_bytes += touched;
    t->touch_resident_blocks += resident;
    t->touch_sampled_blocks += sampled;
    if (s) {
        s->touch_blocks++;
        s->touch_bytes += b->size;
        s->touched_bytes += touched;
        s->touch_resident_blocks += resident;
        s->touch_sampled_blocks += sampled;
    }
}

static void on_alloc_sites(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool counted = !rp->keep || rp->keep(rp->keep_ctx, ev);
    uint64_t size = ev->size;
    if (size == 0 && (rp->mode & REPLAY_DHAT))
        size = 1; // DHAT records malloc(0) as a 1-byte block
    bool existed;
    live_block_t *b = put_block(rp, ev, &existed);
    if (existed) {
        t->n_double_allocs++;
        if (b->stack & BLOCK_COUNTED) {
            t->live_bytes -= b->size;
            t->live_blocks--;
            site_release(rp, (uint32_t)(b->stack & ~BLOCK_COUNTED), b, ev->time_ns);
        }
    }
    if (!counted) {
        b->size = size;
        b->time_ns = ev->time_ns;
        b->stack = 0;
        return;
    }
    thread_state_t *ts = thread_state(rp, ev->tid);
    uint32_t idx;
    if (ev->sub == READER_REALLOC && ev->old_addr && ts->has_pending &&
        ts->pending_addr == ev->old_addr)
        idx = ts->pending_site; // the new block stays with the site of the one it replaced
    else
        idx = site_index(rp, ev->stack);
    ts->has_pending = false;
    ts->last_addr = ev->addr;
    ts->last_time_ns = ev->time_ns;
    b->size = size;
    b->time_ns = ev->time_ns;
    b->stack = idx | BLOCK_COUNTED | (ev->sub == READER_CALLOC ? BLOCK_ZEROED : 0);

    site_acc_t *s = &rp->sites[idx];
    site_touch(rp, s, idx);
    s->blocks++;
    s->bytes += size;
    s->live_bytes += size;
    s->live_blocks++;
    s->birth_sum_ns += ev->time_ns;
    if (s->live_bytes > s->max_bytes) {
        s->max_bytes = s->live_bytes;
        s->max_blocks = s->live_blocks;
    }

    note_thread(rp, ev->tid);
    t->n_blocks++;
    t->n_bytes += size;
    count_size(t, ev->size);
    t->n_events++;
    t->live_blocks++;
    t->live_bytes += size;
    if (t->live_bytes > t->peak_bytes ||
        (t->live_bytes == t->peak_bytes && (rp->mode & REPLAY_DHAT))) {
        t->peak_bytes = t->live_bytes;
        t->peak_blocks = t->live_blocks;
        t->peak_time_ns = ev->time_ns;
        rp->epoch++; // every site's current live counts are now the snapshot
    }
}

// A free that named its block's size (READER_FREE_SIZED) checks it against the block's: a
// difference is a bug in the program (a Rust Layout that is not the one allocated with), which
// the allocator may not notice. A sized free of an unknown block changes nothing else: the
// block was never counted (made before recording started, or its record was lost), so its size
// must not be taken off the live figures either. b: the counted block, or NULL when unknown.
static void note_sized_free(replay_t *rp, const reader_event_t *ev, const live_block_t *b) {
    replay_totals_t *t = &rp->t;
    if (!b) {
        t->n_sized_unknown_frees++;
        return;
    }
    t->n_sized_frees++;
    // DHAT mode counts a 0-byte block as 1 byte
    bool same = b->size == ev->size || (ev->size == 0 && b->size == 1 && (rp->mode & REPLAY_DHAT));
    if (same)
        return;
    if (t->n_sized_mismatches++ == 0) {
        t->mismatch_block_size = b->size;
        t->mismatch_freed_size = ev->size;
        t->mismatch_time_ns = ev->time_ns;
    }
}

// The part of a free both modes share: takes the block out of the live table and the totals.
// Returns the block (in the table's slot, valid until the next change of the table), or NULL
// when there is nothing more to do (unknown or uncounted block).
static inline const live_block_t *free_block(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    live_block_t *b = hmap_take_ref(&rp->live, ev->addr);
    if (!b) {
        t->n_unknown_frees++;
        if (ev->flags & READER_FREE_SIZED)
            note_sized_free(rp, ev, NULL);
        if (!rp->filtered) {
            note_thread(rp, ev->tid);
            t->n_events += !realloc_half;
        }
        return NULL;
    }
    if (rp->companion_free)
        rp->companion_free(rp->companion_ctx, ev, b);
    if (!(b->stack & BLOCK_COUNTED))
        return NULL;
    if (ev->flags & READER_FREE_SIZED)
        note_sized_free(rp, ev, b);
    note_thread(rp, ev->tid);
    t->live_bytes -= b->size;
    t->live_blocks--;
    return b;
}

static void on_free_sites(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    const live_block_t *taken = free_block(rp, ev);
    if (!taken)
        return;
    const live_block_t b = *taken;
    uint32_t idx = (uint32_t)(b.stack & ~BLOCK_COUNTED);
    site_release(rp, idx, &b, ev->time_ns);
    if (ev->touch)
        add_touched(rp, &rp->sites[idx], ev, &b);
    thread_state_t *ts = thread_state(rp, ev->tid);
    if (realloc_half) {
        ts->has_pending = true;
        ts->pending_addr = ev->addr;
        ts->pending_site = idx;
        return;
    }
    t->n_frees++;
    t->n_events++;
    if (ts->last_addr == ev->addr && ts->last_time_ns == b.time_ns) {
        rp->sites[idx].temp_blocks++;
        rp->sites[idx].temp_bytes += b.size;
        ts->last_addr = 0;
    }
}

size_t replay_n_sites(const replay_t *rp) { return rp->n_sites; }

void replay_site(const replay_t *rp, size_t i, replay_site_t *out) {
    const site_acc_t *s = &rp->sites[i];
    uint64_t end = rp->t.last_time_ns;
    // modular arithmetic: the true sum of live lifetimes fits even if birth_sum wrapped
    uint64_t live_lifetimes = s->live_blocks * end - s->birth_sum_ns;
    bool changed_since_peak = s->snap_epoch == rp->epoch;
    *out = (replay_site_t){
        .stack = s->stack,
        .blocks = s->blocks,
        .bytes = s->bytes,
        .lifetime_ns = s->lifetime_ns + live_lifetimes,
        .max_bytes = s->max_bytes,
        .max_blocks = s->max_blocks,
        .peak_bytes = changed_since_peak ? s->snap_bytes : s->live_bytes,
        .peak_blocks = changed_since_peak ? s->snap_blocks : s->live_blocks,
        .end_bytes = s->live_bytes,
        .end_blocks = s->live_blocks,
        .temp_blocks = s->temp_blocks,
        .temp_bytes = s->temp_bytes,
        .touch_blocks = s->touch_blocks,
        .touch_bytes = s->touch_bytes,
        .touched_bytes = s->touched_bytes,
        .touch_resident_blocks = s->touch_resident_blocks,
        .touch_sampled_blocks = s->touch_sampled_blocks,
    };
}

// ---- totals only (the default mode) ----

static void on_alloc(replay_t *rp, const reader_event_t *ev) {
    replay_totals_t *t = &rp->t;
    bool counted = !rp->keep || rp->keep(rp->keep_ctx, ev);
    bool existed;
    live_block_t *b = put_block(rp, ev, &existed);
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
    b->stack = (ev->stack & ~(BLOCK_COUNTED | BLOCK_ZEROED)) | (counted ? BLOCK_COUNTED : 0) |
               (ev->sub == READER_CALLOC ? BLOCK_ZEROED : 0);
    if (!counted)
        return;
    note_thread(rp, ev->tid);
    t->n_blocks++;
    t->n_bytes += ev->size;
    count_size(t, ev->size);
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
    const live_block_t *b = free_block(rp, ev);
    if (!b)
        return;
    if (ev->touch)
        add_touched(rp, NULL, ev, b);
    if (!realloc_half) {
        t->n_frees++;
        t->n_events++;
    }
}

// One event; inlined into both entry points so a batch pays no call frame per event (the
// frame of the old per-event call was 17 of ~220 instructions an event on c_churn).
static inline __attribute__((always_inline)) void replay_one(replay_t *rp,
                                                             const reader_event_t *ev) {
    if (ev->time_ns > rp->t.last_time_ns)
        rp->t.last_time_ns = ev->time_ns;
    if (rp->mode & REPLAY_SITES) {
        if (ev->kind == READER_ALLOC)
            on_alloc_sites(rp, ev);
        else if (ev->kind == READER_FREE)
            on_free_sites(rp, ev);
    } else if (ev->kind == READER_ALLOC) {
        on_alloc(rp, ev);
    } else if (ev->kind == READER_FREE) {
        on_free(rp, ev);
    }
}

void replay_event(replay_t *rp, const reader_event_t *ev) { replay_one(rp, ev); }

#define PREFETCH_AHEAD 8

void replay_events(replay_t *rp, const reader_event_t *ev, size_t n) {
    size_t i = 0;
    for (size_t k = 0; k < n && k < PREFETCH_AHEAD; k++)
        hmap_prefetch(&rp->live, ev[k].addr);
    if (rp->live.ordered) {
        // the common table: the slot address without hmap_prefetch's choice of rule per event
        // (a table that stops being ordered within the batch only gets useless hints)
        for (; i + PREFETCH_AHEAD < n; i++) {
            hmap_prefetch_ordered(&rp->live, ev[i + PREFETCH_AHEAD].addr);
            replay_one(rp, &ev[i]);
        }
    }
    for (; i + PREFETCH_AHEAD < n; i++) {
        hmap_prefetch(&rp->live, ev[i + PREFETCH_AHEAD].addr);
        replay_one(rp, &ev[i]);
    }
    for (; i < n; i++)
        replay_one(rp, &ev[i]);
}

const replay_totals_t *replay_totals(const replay_t *rp) { return &rp->t; }

uint32_t replay_last_site(const replay_t *rp) { return rp->last_site; }

void replay_prefetch(const replay_t *rp, uint64_t addr) { hmap_prefetch(&rp->live, addr); }
