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
#include "model/live_table.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_COUNTED (1ull << 63) // in live_block.stack: the block passed the filter
#define BLOCK_ZEROED (1ull << 62)  // a calloc block (its touch is touched_nz)
#define BLOCK_PENDING (1ull << 61) // a shard's block whose site the scan has not told it yet:
                                   // the low 32 bits are its allocation's index in the round,
#define PENDING_SLOT_SHIFT 32      // and these 3 bits its round's slot, round % depth (up to
#define PENDING_SLOTS (7ull << PENDING_SLOT_SHIFT) // REPLAY_DEPTH_MAX rounds may be open)
_Static_assert(REPLAY_DEPTH_MAX <= 8, "a pending mark holds a round's slot in 3 bits");
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
    // sampled traces only: the weighted figures (replay_set_sampled)
    double est_blocks, est_bytes, est_live_blocks, est_live_bytes, est_snap_blocks, est_snap_bytes;
    uint64_t touch_pages_blocks;
} site_acc_t;

// The split scan's sites of part k (replay_scan_apply): sites k, k + K, k + 2K, ... at k / K.
typedef struct replay_part {
    site_acc_t *sites;
    size_t n, cap;
    replay_totals_t t; // the summed totals of its ops (replay_totals_add at the merge)
} __attribute__((aligned(64))) replay_part_t; // the parts are written by threads side by side

typedef struct thread_state {
    uint32_t tid;
    bool valid;
    bool has_pending;      // the old half of a realloc was seen, its new half not yet
    uint32_t pending_site; // site of the block that realloc replaced
    uint64_t pending_addr;
    uint64_t last_addr, last_time_ns; // this thread's latest allocation
} thread_state_t;

typedef struct replay_fix {
    uint32_t value; // the block's value in the live table (live_table_put_index)
    uint32_t index; // the allocation's index in its round
} replay_fix_t;

typedef struct stack_slot {
    uint64_t stack;
    uint64_t site; // index + 1; 0 = empty
} stack_slot_t;

struct replay {
    live_table_t live;             // address -> live_block_t (and a companion's words)
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
    replay_thread_end_fn companion_thread_end;           // NULL: none
    void *companion_ctx;
    uint64_t sample_interval; // bytes; 0: every allocation was recorded
    replay_totals_t shown;    // replay_totals_shown's copy
    unsigned shard_bits; // a shard of 2^shard_bits (replay_set_shard); 0: the whole stream
    // a shard's pending blocks of the last `depth` rounds, by the round's slot (round % depth;
    // replay_shard_find)
    replay_fix_t *fix[REPLAY_DEPTH_MAX];
    size_t n_fix[REPLAY_DEPTH_MAX], fix_cap[REPLAY_DEPTH_MAX];
    unsigned depth; // replay_shard_set_depth: rounds in flight (2 unless set)
    bool cwords; // a shard's blocks carry replay_cwords_t (replay_shard_keep_words)
    bool prefetch_results; // replay_shard_prefetch_results
    // a shard's place in the whole stream: the event being replayed (round << 32 | index) and
    // the one of its first sized-free mismatch, so the merge keeps the stream's first
    uint64_t ordinal, mismatch_ordinal;
    // the split scan's live totals, peak and epoch (replay_scan_peak, on a thread of its own:
    // a cache line apart from what replay_scan_order writes) until replay_scan_merge
    struct {
        uint64_t live_bytes, live_blocks, peak_bytes, peak_blocks, peak_time_ns, epoch;
    } __attribute__((aligned(64))) pk;
    // the split scan (replay_scan_split): the sites' figures in 2^part_bits parts until
    // replay_scan_merge
    replay_part_t *parts;
    unsigned part_bits;
};

replay_t *replay_new(replay_keep_fn keep, void *keep_ctx) {
    replay_t *rp = xcalloc(1, sizeof *rp);
    live_table_init(&rp->live, sizeof(live_block_t));
    hmap_init(&rp->tids, 1);
    hmap_init(&rp->site_of, sizeof(uint64_t));
    hmap_init(&rp->spilled, sizeof(thread_state_t));
    rp->keep = keep;
    rp->keep_ctx = keep_ctx;
    rp->filtered = keep != NULL;
    rp->epoch = 1; // snap_epoch 0: never saved
    rp->depth = 2;
    return rp;
}

void replay_free(replay_t *rp) {
    if (!rp)
        return;
    live_table_fini(&rp->live);
    hmap_fini(&rp->tids);
    hmap_fini(&rp->site_of);
    hmap_fini(&rp->spilled);
    free(rp->sites);
    for (unsigned k = 0; k < REPLAY_DEPTH_MAX; k++)
        free(rp->fix[k]);
    if (rp->parts)
        for (unsigned k = 0; k < 1u << rp->part_bits; k++)
            free(rp->parts[k].sites);
    free(rp->parts);
    free(rp);
}

void replay_set_mode(replay_t *rp, unsigned mode) {
    // DHAT's conventions live in the per-site path only
    rp->mode = (mode & REPLAY_DHAT) ? mode | REPLAY_SITES : mode;
}

void replay_set_sampled(replay_t *rp, uint64_t interval_bytes) {
    rp->sample_interval = interval_bytes;
}

uint64_t replay_sample_interval(const replay_t *rp) { return rp->sample_interval; }

double replay_sample_weight(uint64_t size, uint64_t interval_bytes) {
    if (size == 0 || interval_bytes == 0)
        return 1;
    // -expm1(-x) = 1 - exp(-x) without the cancellation that loses tiny blocks' probability
    double p = -expm1(-(double)size / (double)interval_bytes);
    return p > 0 ? 1 / p : 1;
}

// A counted block's weighted figures enter (sign +1) or leave (-1) the estimated live heap.
static inline void est_live(replay_totals_t *t, site_acc_t *s, uint64_t size, uint64_t interval,
                            double sign) {
    double w = replay_sample_weight(size, interval) * sign;
    t->est_live_blocks += w;
    t->est_live_bytes += w * (double)size;
    if (s) {
        s->est_live_blocks += w;
        s->est_live_bytes += w * (double)size;
    }
}

// A sampled allocation's estimates: its weight added to the totals and to s (if not NULL), and
// the estimated heap's peak moved. Returns whether this allocation is a new peak: a sampled
// trace's peak is the estimated heap's.
static inline bool est_alloc(replay_totals_t *t, site_acc_t *s, uint64_t size, uint64_t interval) {
    double w = replay_sample_weight(size, interval);
    if (s) {
        s->est_blocks += w;
        s->est_bytes += w * (double)size;
    }
    t->est_blocks += w;
    t->est_bytes += w * (double)size;
    est_live(t, s, size, interval, 1);
    if (t->est_live_bytes <= t->est_peak_bytes)
        return false;
    t->est_peak_bytes = t->est_live_bytes;
    t->est_peak_blocks = t->est_live_blocks;
    return true;
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
    live_table_fini(&rp->live);
    live_table_init(&rp->live, sizeof(live_block_t) + words * sizeof(uint64_t));
    rp->companion_alloc = on_alloc;
    rp->companion_free = on_free;
    rp->companion_ctx = ctx;
}

void replay_set_companion_thread_end(replay_t *rp, replay_thread_end_fn fn) {
    rp->companion_thread_end = fn;
}

// A thread ended: its companion state may go (growth.c). Out of line: rare.
__attribute__((noinline, cold)) static void on_thread_end(replay_t *rp, const reader_event_t *ev) {
    if (rp->companion_thread_end)
        rp->companion_thread_end(rp->companion_ctx, ev->tid);
}

replay_block_t *replay_block(const replay_t *rp, uint64_t addr) {
    return live_table_get(&rp->live, addr);
}

// The slot of a new block at ev->addr, whose table key is key (the address itself, with shards
// or without: the table hashes it); the companion writes its words first. The slot is valid
// until the next put.
static inline live_block_t *put_block(replay_t *rp, const reader_event_t *ev, uint64_t key,
                                      bool *existed) {
    live_block_t *b = live_table_put(&rp->live, key, existed);
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

// always_inline: called from both the one-thread path and the scan (replay_scan_order), gcc
// would otherwise keep one out-of-line copy and the one-thread path pays a call an event.
static inline __attribute__((always_inline)) uint32_t site_index(replay_t *rp, uint64_t stack) {
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

// Saves the site's live counts for peak epoch `epoch` before its first change in it.
static inline void site_snap(site_acc_t *s, uint64_t epoch) {
    if (s->snap_epoch != epoch) {
        s->snap_epoch = epoch;
        s->snap_bytes = s->live_bytes;
        s->snap_blocks = s->live_blocks;
        s->est_snap_bytes = s->est_live_bytes;
        s->est_snap_blocks = s->est_live_blocks;
    }
}

// site_snap for the current epoch. idx is s's index (taken as it is: from the pointer it cost a
// division by the record size).
static inline void site_touch(replay_t *rp, site_acc_t *s, uint32_t idx) {
    rp->last_site = idx;
    site_snap(s, rp->epoch);
}

// A counted block of size bytes made at time_ns joins the site (after site_snap).
static inline void site_add(site_acc_t *s, uint64_t size, uint64_t time_ns) {
    s->blocks++;
    s->bytes += size;
    s->live_bytes += size;
    s->live_blocks++;
    s->birth_sum_ns += time_ns;
    if (s->live_bytes > s->max_bytes) {
        s->max_bytes = s->live_bytes;
        s->max_blocks = s->live_blocks;
    }
}

// A counted block leaves the site at `now` (after site_snap).
static inline void site_sub(site_acc_t *s, const live_block_t *b, uint64_t now) {
    s->live_bytes -= b->size;
    s->live_blocks--;
    s->birth_sum_ns -= b->time_ns;
    if (now > b->time_ns)
        s->lifetime_ns += now - b->time_ns;
}

static void site_release(replay_t *rp, uint32_t idx, const live_block_t *b, uint64_t now) {
    site_acc_t *s = &rp->sites[idx];
    site_touch(rp, s, idx);
    site_sub(s, b, now);
    if (rp->sample_interval)
        est_live(&rp->t, s, b->size, rp->sample_interval, -1);
}

// Adds a freed block's bytes-touched measure (docs/trace-format.md#touch) to the totals and,
// when s is not NULL, to its site.
typedef struct touch_measure {
    uint64_t touched; // bytes, at most the block's size
    bool resident, sampled, pages;
} touch_measure_t;

static inline touch_measure_t touch_measure(const reader_event_t *ev, const live_block_t *b) {
    touch_measure_t m = {.resident = ev->touch == 1 + HPT_TOUCH_RESIDENT,
                         .sampled = ev->touch == 1 + HPT_TOUCH_FILL_SAMPLED,
                         .pages = ev->touch == 1 + HPT_TOUCH_PAGES};
    m.touched = (b->stack & BLOCK_ZEROED) && !m.resident ? ev->touched_nz : ev->touched;
    // the measure covers the allocator's usable size, which may exceed what was asked for
    if (m.touched > b->size)
        m.touched = b->size;
    return m;
}

static inline void site_add_touched(site_acc_t *s, const touch_measure_t *m, uint64_t size) {
    s->touch_blocks++;
    s->touch_bytes += size;
    s->touched_bytes += m->touched;
    s->touch_resident_blocks += m->resident;
    s->touch_sampled_blocks += m->sampled;
    s->touch_pages_blocks += m->pages;
}

static inline void totals_add_touched(replay_totals_t *t, const touch_measure_t *m,
                                      uint64_t size) {
    t->touch_blocks++;
    t->touch_bytes += size;
    t->touched_bytes += m->touched;
    t->touch_resident_blocks += m->resident;
    t->touch_sampled_blocks += m->sampled;
    t->touch_pages_blocks += m->pages;
}

static inline __attribute__((always_inline)) void add_touched(replay_t *rp, site_acc_t *s,
                                                              const reader_event_t *ev,
                                                              const live_block_t *b) {
    touch_measure_t m = touch_measure(ev, b);
    totals_add_touched(&rp->t, &m, b->size);
    if (s)
        site_add_touched(s, &m, b->size);
}

// The part of a counted allocation both per-site paths share (on_alloc_sites with the table,
// scan_order_alloc with what a shard found): its site (a realloc keeps the one of the block it
// replaced) and the thread's state, and with whole (a constant) the live totals, the peak, the
// site's figures and the summed totals too (else replay_scan_peak and replay_scan_apply do them
// on threads of their own, and the scan notes the thread itself). ts: the event's thread's
// state. Returns the site. always_inline: the one-thread path pays no call for it.
static inline __attribute__((always_inline)) uint32_t count_alloc_sites(replay_t *rp,
                                                                        const reader_event_t *ev,
                                                                        thread_state_t *ts,
                                                                        uint64_t size,
                                                                        bool whole) {
    replay_totals_t *t = &rp->t;
    uint32_t idx;
    if (ev->sub == READER_REALLOC && ev->old_addr && ts->has_pending &&
        ts->pending_addr == ev->old_addr)
        idx = ts->pending_site; // the new block stays with the site of the one it replaced
    else
        idx = site_index(rp, ev->stack);
    ts->has_pending = false;
    ts->last_addr = ev->addr;
    ts->last_time_ns = ev->time_ns;

    site_acc_t *s = whole ? &rp->sites[idx] : NULL;
    if (whole) {
        site_touch(rp, s, idx);
        site_add(s, size, ev->time_ns);
        t->n_blocks++;
        t->n_bytes += size;
        count_size(t, ev->size);
        t->n_events++;
    }

    if (!whole) // the split scan's live totals and peak are replay_scan_peak's
        return idx;
    note_thread(rp, ev->tid);
    t->live_blocks++;
    t->live_bytes += size;
    bool new_peak = t->live_bytes > t->peak_bytes ||
                    (t->live_bytes == t->peak_bytes && (rp->mode & REPLAY_DHAT));
    if (rp->sample_interval) // no sampled trace goes to shards
        new_peak = est_alloc(t, s, size, rp->sample_interval);
    if (new_peak) {
        t->peak_bytes = t->live_bytes;
        t->peak_blocks = t->live_blocks;
        t->peak_time_ns = ev->time_ns;
        rp->epoch++; // every site's current live counts are now the snapshot
    }
    return idx;
}

static void on_alloc_sites(replay_t *rp, const reader_event_t *ev, uint64_t key) {
    replay_totals_t *t = &rp->t;
    bool counted = !rp->keep || rp->keep(rp->keep_ctx, ev);
    uint64_t size = ev->size;
    if (size == 0 && (rp->mode & REPLAY_DHAT))
        size = 1; // DHAT records malloc(0) as a 1-byte block
    bool existed;
    live_block_t *b = put_block(rp, ev, key, &existed);
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
    uint32_t idx = count_alloc_sites(rp, ev, thread_state(rp, ev->tid), size, true);
    b->size = size;
    b->time_ns = ev->time_ns;
    b->stack = idx | BLOCK_COUNTED | (ev->sub == READER_CALLOC ? BLOCK_ZEROED : 0);
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
        rp->mismatch_ordinal = rp->ordinal;
    }
}

// The part of a free both modes share: takes the block out of the live table and the totals.
// Returns the block (in the table's slot, valid until the next change of the table), or NULL
// when there is nothing more to do (unknown or uncounted block).
static inline const live_block_t *free_block(replay_t *rp, const reader_event_t *ev,
                                             uint64_t key) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    live_block_t *b = live_table_take(&rp->live, key);
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
    if (rp->sample_interval && !(rp->mode & REPLAY_SITES)) // with sites, site_release does it
        est_live(t, NULL, b->size, rp->sample_interval, -1);
    return b;
}

// The part of a free of a counted block both per-site paths share (on_free_sites with the
// table, scan_order_free with what a shard found), from the site's release on: a realloc's
// pending site and the short-lived test; with whole (a constant) the site's figures, bytes
// touched and the frees too (else replay_scan_apply adds them later). Returns whether the block
// was a temporary. ts: the event's thread's state. always_inline, as count_alloc_sites.
static inline __attribute__((always_inline)) bool count_free_sites(replay_t *rp,
                                                                   const reader_event_t *ev,
                                                                   thread_state_t *ts,
                                                                   uint32_t idx,
                                                                   const live_block_t *b,
                                                                   bool whole) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    if (whole) {
        site_release(rp, idx, b, ev->time_ns);
        if (ev->touch)
            add_touched(rp, &rp->sites[idx], ev, b);
    }
    if (realloc_half) {
        ts->has_pending = true;
        ts->pending_addr = ev->addr;
        ts->pending_site = idx;
        return false;
    }
    if (whole) {
        t->n_frees++;
        t->n_events++;
    }
    if (ts->last_addr == ev->addr && ts->last_time_ns == b->time_ns) {
        if (whole) {
            rp->sites[idx].temp_blocks++;
            rp->sites[idx].temp_bytes += b->size;
        }
        ts->last_addr = 0;
        return true;
    }
    return false;
}

static void on_free_sites(replay_t *rp, const reader_event_t *ev, uint64_t key) {
    const live_block_t *taken = free_block(rp, ev, key);
    if (!taken)
        return;
    const live_block_t b = *taken;
    uint32_t idx = (uint32_t)(b.stack & ~BLOCK_COUNTED);
    count_free_sites(rp, ev, thread_state(rp, ev->tid), idx, &b, true);
}

static uint64_t rounded(double v);

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
        .est_blocks = s->est_blocks,
        .est_bytes = s->est_bytes,
        .est_peak_blocks = changed_since_peak ? s->est_snap_blocks : s->est_live_blocks,
        .est_peak_bytes = changed_since_peak ? s->est_snap_bytes : s->est_live_bytes,
        .est_end_blocks = s->est_live_blocks,
        .est_end_bytes = s->est_live_bytes,
        .touch_pages_blocks = s->touch_pages_blocks,
    };
    if (rp->sample_interval) {
        out->blocks = rounded(out->est_blocks);
        out->bytes = rounded(out->est_bytes);
        out->peak_blocks = rounded(out->est_peak_blocks);
        out->peak_bytes = rounded(out->est_peak_bytes);
        out->end_blocks = rounded(out->est_end_blocks);
        out->end_bytes = rounded(out->est_end_bytes);
    }
}

uint64_t replay_site_end_bytes(const replay_t *rp, size_t i) {
    const site_acc_t *s = &rp->sites[i];
    return rp->sample_interval ? rounded(s->est_live_bytes) : s->live_bytes;
}

// ---- totals only (the default mode) ----

static void on_alloc(replay_t *rp, const reader_event_t *ev, uint64_t key) {
    replay_totals_t *t = &rp->t;
    bool counted = !rp->keep || rp->keep(rp->keep_ctx, ev);
    bool existed;
    live_block_t *b = put_block(rp, ev, key, &existed);
    if (existed) {
        // its free was lost (damage) or never recorded: the new block replaces it
        t->n_double_allocs++;
        if (b->stack & BLOCK_COUNTED) {
            t->live_bytes -= b->size;
            t->live_blocks--;
            if (rp->sample_interval)
                est_live(t, NULL, b->size, rp->sample_interval, -1);
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
    bool new_peak = t->live_bytes > t->peak_bytes;
    if (rp->sample_interval)
        new_peak = est_alloc(t, NULL, ev->size, rp->sample_interval);
    if (new_peak) {
        t->peak_bytes = t->live_bytes;
        t->peak_blocks = t->live_blocks;
        t->peak_time_ns = ev->time_ns;
    }
}

static void on_free(replay_t *rp, const reader_event_t *ev, uint64_t key) {
    replay_totals_t *t = &rp->t;
    bool realloc_half = ev->flags & READER_FREE_OF_REALLOC;
    const live_block_t *b = free_block(rp, ev, key);
    if (!b)
        return;
    if (ev->touch)
        add_touched(rp, NULL, ev, b);
    if (!realloc_half) {
        t->n_frees++;
        t->n_events++;
    }
}

// A block still live at exit, measured then (docs/trace-format.md#touch): its figure joins the
// freed blocks' in the totals and its site. The block stays live; one not live here (its
// allocation was lost, or filtered out) is passed over.
static void on_touch_live(replay_t *rp, const reader_event_t *ev, uint64_t key) {
    if (!ev->touch)
        return;
    const live_block_t *b = live_table_get(&rp->live, key);
    if (!b || !(b->stack & BLOCK_COUNTED))
        return;
    site_acc_t *s = NULL;
    if (rp->mode & REPLAY_SITES)
        s = &rp->sites[(uint32_t)(b->stack & ~(BLOCK_COUNTED | BLOCK_ZEROED))];
    add_touched(rp, s, ev, b);
    rp->t.touch_live_blocks++;
}

// One event; inlined into both entry points so a batch pays no call frame per event (the
// frame of the old per-event call was 17 of ~220 instructions an event on c_churn).
static inline __attribute__((always_inline)) void replay_one(replay_t *rp,
                                                             const reader_event_t *ev,
                                                             uint64_t key) {
    if (__builtin_expect(ev->kind == READER_TOUCH_LIVE, 0)) {
        on_touch_live(rp, ev, key); // at exit: it moves no time (lifetimes end at the last event)
        return;
    }
    if (ev->time_ns > rp->t.last_time_ns)
        rp->t.last_time_ns = ev->time_ns;
    if (rp->mode & REPLAY_SITES) {
        if (ev->kind == READER_ALLOC)
            on_alloc_sites(rp, ev, key);
        else if (ev->kind == READER_FREE)
            on_free_sites(rp, ev, key);
        else if (ev->kind == READER_THREAD_END)
            on_thread_end(rp, ev);
    } else if (ev->kind == READER_ALLOC) {
        on_alloc(rp, ev, key);
    } else if (ev->kind == READER_FREE) {
        on_free(rp, ev, key);
    } else if (ev->kind == READER_THREAD_END) {
        on_thread_end(rp, ev);
    }
}

// replay_event, replay_events and replay_prefetch serve a replay without shards.
void replay_event(replay_t *rp, const reader_event_t *ev) { replay_one(rp, ev, ev->addr); }

// 16: with the slot and then the value to fetch, 8 left the value's probe waiting for the slot
// (one-thread `report` on rust_hashmap_growth, 43 K live blocks: ~5% more CPU at 8)
#define PREFETCH_AHEAD 16

// The live table's values lie in a pool (live_table.h): a block is its slot, then its value.
// The slot is prefetched PREFETCH_AHEAD events ahead; half as far ahead, when it should be in,
// a free's block is looked up and its value prefetched too (an allocation's value is the one
// freed last, in cache already).
static inline __attribute__((always_inline)) void prefetch_block(const replay_t *rp,
                                                                 const reader_event_t *e,
                                                                 uint64_t key) {
    if (e->kind != READER_ALLOC)
        live_table_prefetch_value(&rp->live, key);
}

void replay_events(replay_t *rp, const reader_event_t *ev, size_t n) {
    size_t i = 0;
    for (size_t k = 0; k < n && k < PREFETCH_AHEAD; k++)
        live_table_prefetch(&rp->live, ev[k].addr);
    for (; i + PREFETCH_AHEAD < n; i++) {
        live_table_prefetch(&rp->live, ev[i + PREFETCH_AHEAD].addr);
        prefetch_block(rp, &ev[i + PREFETCH_AHEAD / 2], ev[i + PREFETCH_AHEAD / 2].addr);
        replay_one(rp, &ev[i], ev[i].addr);
    }
    for (; i < n; i++)
        replay_one(rp, &ev[i], ev[i].addr);
}

const replay_totals_t *replay_totals(const replay_t *rp) { return &rp->t; }

// An estimate as a count: the nearest integer (a float sum's residue around 0 is 0).
static uint64_t rounded(double v) {
    return v < 0.5 ? 0 : v >= 0x1p63 ? (uint64_t)INT64_MAX : (uint64_t)llround(v);
}

const replay_totals_t *replay_totals_shown(replay_t *rp) {
    if (!rp->sample_interval)
        return &rp->t;
    replay_totals_t *s = &rp->shown;
    *s = rp->t;
    s->n_blocks = rounded(s->est_blocks);
    s->n_bytes = rounded(s->est_bytes);
    s->n_frees = rounded(s->est_blocks - s->est_live_blocks);
    s->peak_blocks = rounded(s->est_peak_blocks);
    s->peak_bytes = rounded(s->est_peak_bytes);
    s->live_blocks = rounded(s->est_live_blocks);
    s->live_bytes = rounded(s->est_live_bytes);
    return s;
}

uint32_t replay_last_site(const replay_t *rp) { return rp->last_site; }

void replay_prefetch(const replay_t *rp, uint64_t addr) { live_table_prefetch(&rp->live, addr); }

// ---- shards (replay_par.c) ----

void replay_set_shard(replay_t *rp, unsigned shard_bits) { rp->shard_bits = shard_bits; }

void replay_shard_set_depth(replay_t *rp, unsigned depth) {
    rp->depth = depth < 2 ? 2 : depth > REPLAY_DEPTH_MAX ? REPLAY_DEPTH_MAX : depth;
}

void replay_shard_events(replay_t *rp, const reader_event_t *ev, const uint32_t *idx, size_t m,
                         replay_step_t *steps, uint64_t round) {
    // this shard's events are listed first, so the loop below can prefetch its own blocks ahead
    replay_totals_t *t = &rp->t;
    for (size_t k = 0; k < m && k < PREFETCH_AHEAD; k++)
        live_table_prefetch(&rp->live, ev[idx[k]].addr);
    for (size_t k = 0; k < m; k++) {
        if (k + PREFETCH_AHEAD < m)
            live_table_prefetch(&rp->live, ev[idx[k + PREFETCH_AHEAD]].addr);
        const reader_event_t *e = &ev[idx[k]];
        uint64_t bytes = t->live_bytes, blocks = t->live_blocks, allocs = t->n_blocks;
        rp->ordinal = round << 32 | idx[k];
        replay_one(rp, e, e->addr);
        steps[idx[k]] = (replay_step_t){
            .live_bytes = t->live_bytes - bytes, // modulo 2^64: a decrease wraps, adds back
            .live_blocks = t->live_blocks - blocks,
            .counted_alloc = t->n_blocks != allocs,
        };
    }
}

void replay_totals_add(replay_totals_t *into, const replay_totals_t *from) {
    into->n_blocks += from->n_blocks;
    into->n_bytes += from->n_bytes;
    into->n_frees += from->n_frees;
    into->n_events += from->n_events;
    into->live_bytes += from->live_bytes;
    into->live_blocks += from->live_blocks;
    into->n_unknown_frees += from->n_unknown_frees;
    into->n_double_allocs += from->n_double_allocs;
    into->touch_blocks += from->touch_blocks;
    into->touch_bytes += from->touch_bytes;
    into->touched_bytes += from->touched_bytes;
    into->touch_resident_blocks += from->touch_resident_blocks;
    into->touch_sampled_blocks += from->touch_sampled_blocks;
    into->touch_pages_blocks += from->touch_pages_blocks;
    into->touch_live_blocks += from->touch_live_blocks;
    into->n_sized_frees += from->n_sized_frees;
    into->n_sized_mismatches += from->n_sized_mismatches;
    into->n_sized_unknown_frees += from->n_sized_unknown_frees;
    for (unsigned k = 0; k < REPLAY_SIZE_BUCKETS; k++) {
        into->size_blocks[k] += from->size_blocks[k];
        into->size_bytes[k] += from->size_bytes[k];
    }
    if (from->last_time_ns > into->last_time_ns)
        into->last_time_ns = from->last_time_ns;
    // not sums: n_threads (replay_merge_shard unites the sets), the peak (replay_par.c's scan),
    // the first sized-free mismatch (replay_merge_shard: the stream's first)
}

void replay_merge_shard(replay_t *into, const replay_t *shard) {
    if (shard->t.n_sized_mismatches &&
        (!into->t.n_sized_mismatches || shard->mismatch_ordinal < into->mismatch_ordinal)) {
        into->t.mismatch_block_size = shard->t.mismatch_block_size;
        into->t.mismatch_freed_size = shard->t.mismatch_freed_size;
        into->t.mismatch_time_ns = shard->t.mismatch_time_ns;
        into->mismatch_ordinal = shard->mismatch_ordinal;
    }
    replay_totals_add(&into->t, &shard->t);
    size_t it = 0;
    uint64_t tid;
    while (hmap_next(&shard->tids, &it, &tid)) {
        bool existed;
        hmap_put(&into->tids, tid, &existed);
        if (!existed)
            into->t.n_threads++;
    }
}

void replay_set_peak(replay_t *rp, uint64_t bytes, uint64_t blocks, uint64_t time_ns) {
    rp->t.peak_bytes = bytes;
    rp->t.peak_blocks = blocks;
    rp->t.peak_time_ns = time_ns;
}

// ---- shards with per-site figures (REPLAY_SITES): the table in the shards, the rest in order ----
// A shard only looks blocks up (the part that misses the cache) and reports what it found; the
// scan on one thread applies the events in stream order with what the shards found, through the
// same count_alloc_sites / count_free_sites as the one-thread path (only the table lookups and
// the double-allocation and unknown-free halves differ; test_replay_par compares every figure
// with one thread). A shard stores a new block before its site is known (a realloc
// takes the site of the block it replaced, which may sit in another shard): it marks it
// BLOCK_PENDING with the allocation's index in the round and the round's slot (round % D, D
// the rounds in flight, replay_shard_set_depth). The shards find rounds k + 1 .. k + D - 1
// while the scans of round k and later run (replay_par.c), so when a shard starts round k + D
// the scan has told the sites of round k (site_of of that round, kept until then) but maybe
// not yet those of rounds k + 1 .. k + D - 1: it rewrites round k's marks then, and the scan
// resolves the marks of its own round and of the D - 1 before through those rounds' site_of
// (D rounds, D slots: no two open rounds share one).

void replay_shard_fix(replay_t *rp, const uint32_t *site_of, uint64_t round) {
    unsigned slot = (unsigned)(round % rp->depth);
    const replay_fix_t *fix = rp->fix[slot];
    uint64_t mark = BLOCK_PENDING | (uint64_t)slot << PENDING_SLOT_SHIFT;
    for (size_t k = 0; k < rp->n_fix[slot]; k++) {
        // the value the block had, not a lookup of its address: a value keeps its index while
        // its block lives, and one that still carries this round's mark of this index is that
        // block (a value reused since carries its own allocation's mark; one given back and
        // not reused yet is nobody's, so the write is harmless)
        live_block_t *b = live_table_value(&rp->live, fix[k].value);
        if ((b->stack & (BLOCK_PENDING | PENDING_SLOTS | UINT32_MAX)) == (mark | fix[k].index))
            b->stack = (b->stack & (BLOCK_COUNTED | BLOCK_ZEROED)) | site_of[fix[k].index];
    }
    rp->n_fix[slot] = 0;
}

void replay_shard_prefetch_results(replay_t *rp, bool on) { rp->prefetch_results = on; }

// Asks for the line at p to be owned by this core, for a store to come (PREFETCHW; where the
// CPU lacks it the caller does not ask: replay_par.c checks).
static inline __attribute__((always_inline)) void prefetch_for_store(const void *p) {
#if defined(__x86_64__)
    __asm__ volatile("prefetchw %0" ::"m"(*(const char *)p));
#else
    __builtin_prefetch(p, 1);
#endif
}

void replay_shard_keep_words(replay_t *rp) {
    _Static_assert(sizeof(replay_cwords_t) / sizeof(uint64_t) <= REPLAY_COMPANION_WORDS_MAX,
                   "the scan's words must fit replay's companion words");
    replay_set_companion(rp, sizeof(replay_cwords_t) / sizeof(uint64_t), NULL, NULL, NULL);
    rp->cwords = true;
}

static inline replay_cwords_t *cwords_of(live_block_t *b) { return (replay_cwords_t *)(b + 1); }

void replay_shard_fix_words(replay_t *rp, unsigned shard, const replay_cfix_t *fix, size_t n) {
    for (size_t k = 0; k < n; k++) {
        if (replay_shard_of(fix[k].addr, rp->shard_bits) != shard)
            continue;
        live_block_t *b = live_table_get(&rp->live, fix[k].addr);
        if (!b)
            continue;
        replay_cwords_t *w = cwords_of(b);
        if (w->serial != fix[k].serial) // freed, and another block made there since
            continue;
        w->origin = fix[k].origin;
        w->tid_chain = (w->tid_chain & ~(uint64_t)UINT32_MAX) | fix[k].chain;
    }
}

// The shard's prefetches, in stages: the event PREFETCH_AHEAD * 2 ahead (the round's copy was
// written by other threads, so its lines may sit in their caches), its slot PREFETCH_AHEAD
// ahead, and, in a table too big for the cache (deep), a free's value half as far (an
// allocation's is the one given back last, in cache already). (Keeping each slot's hash from
// its prefetch to its lookup, in a ring, saved no instruction: the ring costs what the hash
// does.)
#define SHARD_DEEP_BYTES ((size_t)4 << 20)

static inline __attribute__((always_inline)) void prefetch_event(const reader_event_t *e) {
    __builtin_prefetch(e);
    __builtin_prefetch((const char *)(e + 1) - 1);
}

// replay_shard_find's loop, with and without the results' prefetch (pfw: a constant in each
// copy, so the one without pays nothing for it).
static inline __attribute__((always_inline)) void
shard_find(replay_t *rp, const reader_event_t *const *ev, const uint32_t *idx, size_t m,
           const uint8_t *verdict, replay_found_t *found, uint64_t round, replay_cwords_t *cw,
           const bool pfw) {
    live_table_t *t = &rp->live;
    const bool words = rp->cwords, dhat = rp->mode & REPLAY_DHAT;
    const unsigned slot = (unsigned)(round % rp->depth);
    const uint64_t pending_slot = (uint64_t)slot << PENDING_SLOT_SHIFT;
    const bool deep = (t->cap * sizeof *t->slots + (t->pool_n << t->vshift)) >= SHARD_DEEP_BYTES;
    // at most one mark an event: room for all first, so the loop checks none
    if (rp->fix_cap[slot] < rp->n_fix[slot] + m)
        rp->fix[slot] =
            xgrow(rp->fix[slot], &rp->fix_cap[slot], rp->n_fix[slot] + m, sizeof *rp->fix[slot]);
    replay_fix_t *fix = rp->fix[slot] + rp->n_fix[slot], *const fix0 = fix;
    const size_t ahead = PREFETCH_AHEAD, ahead2 = 2 * PREFETCH_AHEAD;
    for (size_t k = 0; k < m && k < ahead2; k++)
        prefetch_event(ev[k]);
    for (size_t k = 0; k < m && k < ahead; k++)
        live_table_prefetch(t, ev[k]->addr);
    for (size_t k = 0; k < m; k++) {
        if (k + ahead2 < m)
            prefetch_event(ev[k + ahead2]);
        if (k + ahead < m) {
            live_table_prefetch(t, ev[k + ahead]->addr);
            if (pfw) { // the lines of the results ahead, which other shards' results share
                prefetch_for_store(&found[idx[k + ahead]]);
                if (words && ev[k + ahead]->kind == READER_FREE)
                    prefetch_for_store(&cw[idx[k + ahead]]);
            }
        }
        if (deep && k + ahead / 2 < m) {
            const reader_event_t *later = ev[k + ahead / 2];
            if (later->kind != READER_ALLOC)
                live_table_prefetch_value(t, later->addr);
        }
        uint32_t i = idx[k];
        const reader_event_t *e = ev[k];
        replay_found_t *f = &found[i];
        if (e->kind == READER_ALLOC) {
            bool existed;
            uint32_t v = live_table_put_index(t, e->addr, &existed);
            live_block_t *b = live_table_value(t, v);
            if (__builtin_expect(existed, 0)) {
                *f = (replay_found_t){b->size, b->time_ns, b->stack, 1};
                if (words)
                    cw[i] = *cwords_of(b);
            } else {
                *f = (replay_found_t){0, 0, 0, 0};
            }
            if (words)
                *cwords_of(b) = (replay_cwords_t){.serial = round << 32 | i,
                                                  .stack = e->stack,
                                                  .origin = e->stack,
                                                  .tid_chain = (uint64_t)e->tid << 32};
            uint64_t size = e->size;
            if (size == 0 && dhat)
                size = 1;
            b->size = size;
            b->time_ns = e->time_ns;
            b->stack = 0;
            if (!verdict || verdict[i]) { // counted
                b->stack = BLOCK_PENDING | pending_slot | i | BLOCK_COUNTED |
                           (e->sub == READER_CALLOC ? BLOCK_ZEROED : 0);
                *fix++ = (replay_fix_t){.value = v, .index = i};
            }
        } else if (e->kind == READER_FREE) {
            int64_t v = live_table_take_index(t, e->addr);
            if (v >= 0) { // the value stays as it was until the next put
                const live_block_t *b = live_table_value(t, (uint32_t)v);
                *f = (replay_found_t){b->size, b->time_ns, b->stack, 1};
                if (words)
                    cw[i] = *cwords_of((live_block_t *)b);
            } else {
                *f = (replay_found_t){0, 0, 0, 0};
            }
        } else if (e->kind == READER_TOUCH_LIVE) {
            int64_t v = live_table_find(t, e->addr); // stays live
            const live_block_t *b = v >= 0 ? live_table_value(t, (uint32_t)v) : NULL;
            *f = b ? (replay_found_t){b->size, b->time_ns, b->stack, 1}
                   : (replay_found_t){0, 0, 0, 0};
        }
    }
    rp->n_fix[slot] += (size_t)(fix - fix0);
}

void replay_shard_find(replay_t *rp, const reader_event_t *const *ev, const uint32_t *idx,
                       size_t m, const uint8_t *verdict, replay_found_t *found, uint64_t round,
                       replay_cwords_t *cw) {
    if (rp->prefetch_results)
        shard_find(rp, ev, idx, m, verdict, found, round, cw, true);
    else
        shard_find(rp, ev, idx, m, verdict, found, round, cw, false);
}

// The site of a block a shard found: resolved through the site_of of its round (this one or
// one of the D - 1 before, by the mark's slot) if still pending.
static inline uint32_t found_site(const replay_found_t *f, uint32_t *const *site_of) {
    return f->stack & BLOCK_PENDING
               ? site_of[(f->stack & PENDING_SLOTS) >> PENDING_SLOT_SHIFT][(uint32_t)f->stack]
               : (uint32_t)f->stack;
}

// ---- the ordered scan, split three ways, each part on a thread of its own (replay_par.c):
// replay_scan_order in stream order decides what needs the order of all events but not the
// live totals (site numbers, the per-thread state, the rare totals) and lists what the events
// do to which site (ops); replay_scan_peak, beside it over the same round, adds up the live
// totals for the peak and lists the events that set one (each event's change of the live
// totals is known from the event and what the shards found alone); then replay_scan_apply(k),
// once both are done, applies the ops of part k's sites (site % K), reading only their events:
// a site's figures need only the order of its own events and the epoch each happened in (for
// the snapshot at the peak). Of the summed totals the frees, the events and the size histogram
// are summed per part (integer sums in any order are the same); blocks, bytes and bytes
// touched are the sites' own summed at replay_scan_merge, where the parts' figures join rp's.

void replay_scan_split(replay_t *rp, unsigned parts) {
    unsigned bits = 0;
    while ((2u << bits) <= parts && (2u << bits) <= REPLAY_SCAN_PARTS_MAX)
        bits++;
    rp->part_bits = bits;
    rp->parts = xcalloc((size_t)1 << bits, sizeof *rp->parts);
    rp->pk.epoch = rp->epoch;
}

unsigned replay_scan_parts(const replay_t *rp) { return 1u << rp->part_bits; }

// The order pass's cache of the latest event's thread (most events come from the thread of
// the event before): its state (valid until the next thread_state, which only this cache
// calls), for a thread already given to note_thread, and the last thread given to note_thread
// alone (an unknown free; a second call with it changes nothing; 0 at first, which
// note_thread ignores anyway).
typedef struct order_thread {
    thread_state_t *ts;
    uint64_t tid; // ts's; none at first (UINT64_MAX: no event's)
    uint32_t noted;
} order_thread_t;

static inline void order_note(replay_t *rp, order_thread_t *ot, uint32_t tid) {
    if (__builtin_expect(tid != ot->noted, 0)) {
        note_thread(rp, tid);
        ot->noted = tid;
    }
}

// A counted event's thread: noted (note_thread), and its state. One compare when it is the
// thread of the event before.
static inline thread_state_t *order_thread(replay_t *rp, order_thread_t *ot, uint32_t tid) {
    if (__builtin_expect(ot->tid != tid, 0)) {
        order_note(rp, ot, tid);
        ot->ts = thread_state(rp, tid);
        ot->tid = tid;
    }
    return ot->ts;
}

// Lists op o of event i for `site` (*w: the list's next op).
static inline __attribute__((always_inline)) void order_push(replay_scan_op_t **w, uint32_t site,
                                                             size_t i, unsigned o) {
    *(*w)++ = (replay_scan_op_t){.ev_op = (uint32_t)i | o << REPLAY_OP_SHIFT, .site = site};
}

// on_alloc_sites without the table and the live totals: the old block at the address (if any)
// is what the shard found. Lists the release of the old block, then the allocation.
static inline __attribute__((always_inline)) void scan_order_alloc(
    replay_t *rp, order_thread_t *ot, replay_scan_op_t **w, size_t i,
    const reader_event_t *ev, const replay_found_t *f, bool counted, uint32_t *const *site_of,
    uint32_t *site_of_ev) {
    if (__builtin_expect(f->had, 0)) {
        rp->t.n_double_allocs++;
        if (f->stack & BLOCK_COUNTED)
            order_push(w, found_site(f, site_of), i, REPLAY_OP_RELEASE);
    }
    if (!counted)
        return;
    // sample_interval is 0 with shards
    uint32_t site = count_alloc_sites(rp, ev, order_thread(rp, ot, ev->tid), 0, false);
    *site_of_ev = site;
    order_push(w, site, i, REPLAY_OP_ALLOC);
}

// free_block and on_free_sites without the table and the live totals.
static inline __attribute__((always_inline)) void scan_order_free(
    replay_t *rp, order_thread_t *ot, replay_scan_op_t **w, size_t i,
    const reader_event_t *ev, const replay_found_t *f, uint32_t *const *site_of) {
    replay_totals_t *t = &rp->t;
    if (__builtin_expect(!f->had, 0)) {
        t->n_unknown_frees++;
        if (ev->flags & READER_FREE_SIZED)
            note_sized_free(rp, ev, NULL);
        if (!rp->filtered) {
            order_note(rp, ot, ev->tid);
            t->n_events += !(ev->flags & READER_FREE_OF_REALLOC);
        }
        return;
    }
    if (!(f->stack & BLOCK_COUNTED))
        return;
    if (__builtin_expect(ev->flags & READER_FREE_SIZED, 0)) {
        const live_block_t sized = {f->size, f->time_ns, f->stack}; // its address escapes
        note_sized_free(rp, ev, &sized);
    }
    thread_state_t *ts = order_thread(rp, ot, ev->tid);
    uint32_t site = found_site(f, site_of);
    const live_block_t b = {f->size, f->time_ns, f->stack};
    order_push(w, site, i,
               count_free_sites(rp, ev, ts, site, &b, false) ? REPLAY_OP_FREE | REPLAY_OP_TEMP
                                                              : REPLAY_OP_FREE);
}

// The order's loop, one copy with a filter's verdicts and one without (a constant).
static inline __attribute__((always_inline)) void scan_order_loop(replay_t *rp,
                                                                  replay_scan_round_t *r,
                                                                  uint32_t *const *site_of,
                                                                  bool verdicts) {
    const reader_event_t *const *ev = r->ev;
    const replay_found_t *found = r->found;
    const uint8_t *verdict = r->verdict;
    uint32_t *site_of_ev = r->site_of;
    const size_t n = r->n;
    replay_scan_op_t *w = r->ops;
    order_thread_t ot = {.tid = UINT64_MAX};
    uint64_t last_time = rp->t.last_time_ns;
    for (size_t i = 0; i < n; i++) {
        const reader_event_t *e = ev[i];
        const replay_found_t *f = &found[i];
        if (e->kind == READER_ALLOC) {
            last_time = e->time_ns > last_time ? e->time_ns : last_time;
            scan_order_alloc(rp, &ot, &w, i, e, f, !verdicts || verdict[i], site_of,
                             &site_of_ev[i]);
        } else if (e->kind == READER_FREE) {
            last_time = e->time_ns > last_time ? e->time_ns : last_time;
            scan_order_free(rp, &ot, &w, i, e, f, site_of);
        } else if (e->kind == READER_TOUCH_LIVE) {
            // on_touch_live: moves no time (lifetimes end at the last event); its measure
            // counts in the totals through its site's (replay_scan_merge)
            if (e->touch && f->had && (f->stack & BLOCK_COUNTED)) {
                rp->t.touch_live_blocks++;
                order_push(&w, found_site(f, site_of), i, REPLAY_OP_TOUCH_LIVE);
            }
        } else {
            last_time = e->time_ns > last_time ? e->time_ns : last_time;
        }
    }
    rp->t.last_time_ns = last_time;
    r->n_sites = rp->n_sites;
    r->n_ops = (size_t)(w - r->ops);
}

void replay_scan_order(replay_t *rp, replay_scan_round_t *r, uint32_t *const *site_of) {
    if (r->verdict)
        scan_order_loop(rp, r, site_of, true);
    else
        scan_order_loop(rp, r, site_of, false);
}

// What an event's kind does to the live totals in the peak's loop: bit 0, found[i] counts
// (a block freed, or replaced by an allocation at its address); bit 1, an allocation. found[i]
// is written for allocations, frees and TOUCH_LIVE (which moves nothing), stale for the rest.
static const uint8_t peak_kind[256] = {[READER_ALLOC] = 3, [READER_FREE] = 1};

// The peak's loop, one copy per filter (with verdicts or without) and mode (DHAT or not), both
// constants. It has no branch on the event's kind (allocations and frees interleave as the
// program made them, which no predictor follows): it adds both changes, each times 0 or 1.
static inline __attribute__((always_inline)) void scan_peak_loop(replay_t *rp,
                                                                 replay_scan_round_t *r,
                                                                 bool verdicts, bool dhat) {
    const reader_event_t *const *ev = r->ev;
    const replay_found_t *found = r->found;
    const uint8_t *verdict = r->verdict;
    uint32_t *bump = r->bump;
    const size_t n = r->n;
    uint64_t live = rp->pk.live_bytes, blocks = rp->pk.live_blocks, peak = rp->pk.peak_bytes;
    uint64_t peak_blocks = rp->pk.peak_blocks, peak_time = rp->pk.peak_time_ns;
    size_t n_bump = 0;
    r->epoch0 = rp->pk.epoch;
    for (size_t i = 0; i < n; i++) {
        const reader_event_t *e = ev[i];
        const replay_found_t *f = &found[i];
        unsigned k = peak_kind[e->kind];
        // a counted block taken out (had and BLOCK_COUNTED are 0 or 1)
        uint64_t taken = f->had & (f->stack >> 63) & k;
        uint64_t added = k >> 1;
        if (verdicts)
            added &= verdict[i];
        uint64_t size = e->size;
        if (dhat)
            size += size == 0; // DHAT's 1-byte malloc(0)
        live += size * added - f->size * taken;
        blocks += added - taken;
        // count_alloc_sites' rule: the first moment of the maximum (DHAT: the last). live never
        // exceeds the peak but by an allocation; it may equal it after another event.
        if (__builtin_expect(live + dhat > peak, 0) && added) {
            peak = live;
            peak_blocks = blocks;
            peak_time = e->time_ns;
            bump[n_bump++] = (uint32_t)i;
        }
    }
    bump[n_bump] = UINT32_MAX;
    rp->pk.live_bytes = live;
    rp->pk.live_blocks = blocks;
    rp->pk.peak_bytes = peak;
    rp->pk.peak_blocks = peak_blocks;
    rp->pk.peak_time_ns = peak_time;
    rp->pk.epoch += n_bump;
}

void replay_scan_peak(replay_t *rp, replay_scan_round_t *r) {
    bool dhat = rp->mode & REPLAY_DHAT;
    if (r->verdict)
        dhat ? scan_peak_loop(rp, r, true, true) : scan_peak_loop(rp, r, true, false);
    else
        dhat ? scan_peak_loop(rp, r, false, true) : scan_peak_loop(rp, r, false, false);
}

// Makes part pt's sites cover `n_sites` sites of all parts (a site's first op is its
// allocation, of a round whose order pass counted it), so the apply looks none up.
static void part_grow(replay_part_t *pt, size_t n_sites, unsigned bits) {
    size_t n = (n_sites + (1u << bits) - 1) >> bits;
    if (n <= pt->n)
        return;
    pt->sites = xgrow(pt->sites, &pt->cap, n, sizeof *pt->sites);
    memset(pt->sites + pt->n, 0, (n - pt->n) * sizeof *pt->sites);
    pt->n = n;
}

// Part `part`'s ops of the round in order (one: the only part, a constant: no op to skip). Of
// the summed totals only what the sites do not keep: the frees, the events and the size
// histogram; blocks, bytes and bytes touched are the sums of the sites' own
// (replay_scan_merge).
static inline __attribute__((always_inline)) void scan_apply_loop(replay_t *rp, unsigned part,
                                                                  const replay_scan_round_t *r,
                                                                  bool one) {
    replay_part_t *pt = &rp->parts[part];
    replay_totals_t *t = &pt->t;
    bool dhat = rp->mode & REPLAY_DHAT;
    const unsigned bits = rp->part_bits;
    const uint32_t mask = (1u << bits) - 1;
    part_grow(pt, r->n_sites, bits);
    site_acc_t *sites = pt->sites;
    const reader_event_t *const *ev = r->ev;
    const replay_found_t *found = r->found;
    const replay_scan_op_t *op = r->ops, *end = op + r->n_ops;
    // the epoch of event i: epoch0 + the peaks set before it (bump ends with UINT32_MAX)
    const uint32_t *bump = r->bump;
    uint64_t epoch = r->epoch0;
    uint64_t n_frees = 0, n_events = 0;
    for (; op < end; op++) {
        if (!one && (op->site & mask) != part)
            continue;
        uint32_t i = op->ev_op & ((1u << REPLAY_OP_SHIFT) - 1);
        unsigned o = op->ev_op >> REPLAY_OP_SHIFT;
        while (*bump < i) {
            bump++;
            epoch++;
        }
        site_acc_t *s = &sites[one ? op->site : op->site >> bits];
        const reader_event_t *e = ev[i];
        if (o & REPLAY_OP_ALLOC) { // after the release of the block it replaced, if any
            uint64_t size = e->size == 0 && dhat ? 1 : e->size;
            site_snap(s, epoch);
            site_add(s, size, e->time_ns);
            count_size(t, e->size);
            n_events++;
            continue;
        }
        const replay_found_t *f = &found[i];
        const live_block_t b = {f->size, f->time_ns, f->stack};
        if (o & REPLAY_OP_TOUCH_LIVE) {
            // no change of live counts, no snapshot (as on_touch_live)
            touch_measure_t m = touch_measure(e, &b);
            site_add_touched(s, &m, b.size);
            continue;
        }
        site_snap(s, epoch);
        site_sub(s, &b, e->time_ns);
        if (o & REPLAY_OP_FREE) {
            if (e->touch) {
                touch_measure_t m = touch_measure(e, &b);
                site_add_touched(s, &m, b.size);
            }
            uint64_t whole = !(e->flags & READER_FREE_OF_REALLOC);
            n_frees += whole;
            n_events += whole;
            if (o & REPLAY_OP_TEMP) {
                s->temp_blocks++;
                s->temp_bytes += b.size;
            }
        }
    }
    t->n_frees += n_frees;
    t->n_events += n_events;
}

void replay_scan_apply(replay_t *rp, unsigned part, const replay_scan_round_t *r) {
    if (rp->part_bits == 0)
        scan_apply_loop(rp, part, r, true);
    else
        scan_apply_loop(rp, part, r, false);
}

void replay_scan_merge(replay_t *rp) {
    unsigned bits = rp->part_bits;
    replay_totals_t *t = &rp->t;
    for (unsigned k = 0; k < 1u << bits; k++)
        replay_totals_add(t, &rp->parts[k].t); // only sums there: no time, no peak
    for (size_t i = 0; i < rp->n_sites; i++) {
        const replay_part_t *pt = &rp->parts[i & ((1u << bits) - 1)];
        size_t local = i >> bits;
        if (local >= pt->n)
            continue;
        site_acc_t *s = &rp->sites[i];
        uint64_t stack = s->stack;
        *s = pt->sites[local];
        s->stack = stack;
        // every counted block, and every measure of one (freed or live at exit), is its site's
        // and counts in the totals once (on_alloc_sites, add_touched)
        t->n_blocks += s->blocks;
        t->n_bytes += s->bytes;
        t->touch_blocks += s->touch_blocks;
        t->touch_bytes += s->touch_bytes;
        t->touched_bytes += s->touched_bytes;
        t->touch_resident_blocks += s->touch_resident_blocks;
        t->touch_sampled_blocks += s->touch_sampled_blocks;
        t->touch_pages_blocks += s->touch_pages_blocks;
    }
    t->live_bytes = rp->pk.live_bytes;
    t->live_blocks = rp->pk.live_blocks;
    t->peak_bytes = rp->pk.peak_bytes;
    t->peak_blocks = rp->pk.peak_blocks;
    t->peak_time_ns = rp->pk.peak_time_ns;
    rp->epoch = rp->pk.epoch;
}
