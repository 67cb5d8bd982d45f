// SPDX-License-Identifier: MIT
// Growth chains and short-lived blocks (docs/growth.md). The per-event path is one probe of the
// live table plus, on a free, a scan of the freeing thread's last GROWTH_WINDOW allocations. Chains
// are summed as they grow (a live block carries its chain's index) and folded into their site when
// their last block is freed, so memory is one record per live chain, not per link.
#include "model/growth.h"

#include "core/fmt.h"
#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"

#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// docs/growth.md#allocate-copy-free: the new block is one of the freeing thread's last
// GROWTH_WINDOW heap events before the free of the old one ...
#define GROWTH_WINDOW 4u
// ... and the free comes at most this long after the new block's allocation, plus
// GROWTH_COPY_NS_PER_BYTE for each byte of the old block (a copy at >= 10 MB/s). Generous on
// purpose: the event window above is the real test, and a profiled thread may be descheduled
// between the copy and the free: 150 ms between a vector's 512 KiB allocation and the free of
// its 256 KiB predecessor in the test suite on 2 busy cores (session 13), where 50 ms was the
// bound; what it keeps out is a double buffer swapped after a long computation.
#define GROWTH_SLACK_NS 1000000000ull
#define GROWTH_COPY_NS_PER_BYTE 100ull
#define HB_MAX_STEPS 40 // longest chain checked against hashbrown's layout (4 << 40 buckets)

#define BLOCK_HAS_PRED (1ull << 63) // in gblock_t.seq: a link already leads to this block
#define STACK_CACHE 256u // per thread: stack -> its latest allocation there (direct-mapped)
#define PREV_UNKNOWN UINT64_MAX
#define SHORT_SLOTS 256u // direct-mapped origin -> short-lived counts in front of the map
#define CHANGED_MIN 1024u // growth_scan_chains' table of changed words: its smallest size

// growth_scan_chains' changed words: fixes[q][k - 1] changed the block allocated as serial
// (serial 0: empty).
typedef struct changed {
    uint64_t serial;
    uint32_t q, k;
} changed_t;

typedef struct short_slot {
    uint64_t origin;
    growth_short_t sh; // blocks 0: empty
} short_slot_t;

// Attached to a replay, a block is replay's live block: the head is replay's (its size and
// time are the block's; written by replay after on_alloc) and the rest are companion words.
typedef struct gblock {
    replay_block_t head; // size, time_ns: the block's; stack: replay's own
    uint64_t seq;        // allocation number, from 1; | BLOCK_HAS_PRED
    uint64_t stack;      // stack of the event that made it
    uint64_t origin;     // the site: the stack of the first block of its realloc chain
    uint64_t chain;      // index + 1 of the chain it ends, 0 while it is linked to nothing
} gblock_t;
#define GBLOCK_WORDS ((sizeof(gblock_t) - sizeof(replay_block_t)) / sizeof(uint64_t))

static inline uint64_t seq_of(const gblock_t *b) { return b->seq & ~BLOCK_HAS_PRED; }

// In the scan (growth_scan_links), a recent allocation's own state, which the one-thread pass reads
// from the live table (find_copy): its block is gone (freed, or replaced at its address), or
// already has a predecessor.
#define RECENT_GONE 1u
#define RECENT_PRED 2u

typedef struct recent {
    uint64_t seq, stack;
    // the allocation's event, for its addr, size and time_ns: in growth_scan_links the round's
    // own (valid until the round ends, when the scan copies it into own), else own
    const reader_event_t *at;
    uint64_t ev;       // the thread's event number of the allocation
    uint64_t prev_seq; // the thread's allocation before it at the same stack: 0 or
                       // PREV_UNKNOWN when none is known (none, or the stack cache lost track)
    unsigned flags;    // RECENT_GONE, RECENT_PRED (growth_scan_links only)
    reader_event_t own;
} recent_t;

typedef struct stack_last {
    uint64_t stack, seq; // 0, 0: empty
} stack_last_t;

typedef struct gthread {
    uint64_t n_events; // heap events of this thread (a realloc is one)
    uint64_t last_seq; // its latest allocation
    recent_t ring[GROWTH_WINDOW];
    unsigned ring_pos; // next slot to write
    uint64_t scanned;  // growth_scan_links: the last round with an event of this thread
    bool has_pending;  // the freeing half of a realloc was seen, its new half not yet
    uint64_t pending_addr;
    gblock_t pending;
    stack_last_t last[STACK_CACHE];
} gthread_t;

#define LINK_REALLOC 1u
#define LINK_MOVED 2u

// One chain's figures so far. The hashbrown check runs as the chain grows: sizes 0 and 1 are kept
// until size 2 gives the element size, then every later size must fit.
typedef struct chain {
    uint64_t origin; // site of the first block
    uint64_t first, final;
    uint64_t steps, realloc_steps, moves, copied;
    uint64_t increment; // of the first growth step
    uint64_t hb_s0, hb_s1, hb_elem;
    uint32_t hb_n; // sizes seen (the first block's included)
    bool doubling, constant, hb_ok;
    bool dead; // summed into its site already; the slot is on the free list
} chain_t;

// Chains of one site that ended at one final size.
typedef struct final_count {
    uint64_t chains, steps, copied;
} final_count_t;

// A copy step's new block (an allocate-copy-free step found by growth_scan_links), for
// growth_scan_chains: the ring entry's fields that its link needs.
typedef struct scan_link {
    uint64_t addr, seq, stack, size, time_ns;
} scan_link_t;

// What growth_scan_links tells growth_scan_chains an event does, in the low SCAN_BITS of an op
// (the event's index above them); an event that does nothing for the chains has no op.
#define SCAN_FREE 1u         // a free of a known block (not a realloc's freeing half)
#define SCAN_PENDING 2u      // a realloc's freeing half: its block waits for the new half
#define SCAN_SHORT 4u        // ... its thread's latest allocation, short-lived whatever its
                             // age (with SCAN_FREE; growth_scan_chains checks the age)
#define SCAN_COPY 8u         // ... linked to the next scan_link_t (with SCAN_FREE)
#define SCAN_REALLOC 16u     // an allocation that continues its thread's pending realloc
#define SCAN_BITS 5u

typedef struct site_acc {
    growth_site_t s;
    hmap_t finals; // final size -> final_count_t: memory by distinct sizes, not chains
    uint64_t n_finals;
    uint64_t max_chain_steps;
    bool any_multi;      // a chain with >= 2 growth steps
    bool all_constant;   // every such chain had one constant increment
    bool same_increment; // ... and all the same one
    bool hb_conflict;
} site_acc_t;

struct growth {
    uint64_t short_ns;
    uint64_t seq;
    hmap_t live;    // address -> gblock_t; unused once attached to a replay
    replay_t *rp;   // attached (growth_attach): the blocks live in its table
    hmap_t threads; // tid -> gthread_t * (stable while the map grows)
    uint32_t cached_tid;
    gthread_t *cached;
    hmap_t shorts; // stack -> growth_short_t, plus what sits in short_slots
    short_slot_t short_slots[SHORT_SLOTS];
    chain_t *chains;
    size_t n_chains, cap_chains;
    uint64_t *free_chains; // indexes of dead chain slots, for reuse
    size_t n_free_chains, cap_free_chains;
    site_acc_t *accs; // per site, in order of first chain; ranked into sites at finish
    size_t n_accs, cap_accs;
    growth_site_t *sites; // after finish, ranked
    size_t n_sites;
    hmap_t site_of; // stack -> index + 1 into accs during the pass, into sites after finish
    // growth_scan_chains: the words changed in the last D rounds (D = depth, the rounds in
    // flight), by the round's slot (round % D): for the shards D rounds on (fixes) and for the
    // frees until then (changed: serial -> slot and index, one open-addressed table for all D
    // slots, kept across rounds; a slot's entries leave it when its list is emptied). A block
    // joins a chain at most once, so a serial has at most one entry.
    bool scan;
    unsigned depth; // growth_scan_start's
    unsigned slot;  // of the round being scanned
    replay_cfix_t *fixes[REPLAY_DEPTH_MAX];
    size_t n_fixes[REPLAY_DEPTH_MAX], cap_fixes[REPLAY_DEPTH_MAX];
    size_t n_fixes_open; // in all D lists: 0, and a free reads no slot
    changed_t *changed;     // NULL until the first change
    size_t changed_mask;    // its size - 1 (a power of two)
    size_t n_changed;       // entries in use: at most half of it
    // growth_scan_links: the threads with an event in the round being scanned (scan_keep),
    // and those of them whose thread ended in it (freed after scan_keep)
    gthread_t **touched;
    size_t n_touched, cap_touched;
    gthread_t **ended;
    size_t n_ended, cap_ended;
    // growth_scan_links -> growth_scan_chains, by the round's slot: the ops (index << SCAN_BITS
    // | SCAN_*) of the events that do something for the chains, in stream order (most
    // allocations do nothing there: the chains pass does not look at them), and the copy steps'
    // new blocks
    uint32_t *ops[REPLAY_DEPTH_MAX];
    size_t n_ops[REPLAY_DEPTH_MAX], ops_cap[REPLAY_DEPTH_MAX];
    scan_link_t *links[REPLAY_DEPTH_MAX];
    size_t n_links[REPLAY_DEPTH_MAX], cap_links[REPLAY_DEPTH_MAX];
    // growth_scan_chains' own per-thread state: the block the freeing half of a realloc took
    // out (tid -> gblock_t *), and its latest thread
    hmap_t pend;
    uint64_t pend_tid; // UINT64_MAX: none
    gblock_t *pend_cached;
};

growth_t *growth_new(uint64_t short_ns) {
    growth_t *g = xcalloc(1, sizeof *g);
    g->short_ns = short_ns;
    hmap_init_ordered(&g->live, sizeof(gblock_t));
    hmap_init(&g->threads, sizeof(gthread_t *));
    hmap_init(&g->shorts, sizeof(growth_short_t));
    hmap_init(&g->site_of, sizeof(uint64_t));
    hmap_init(&g->pend, sizeof(gblock_t *));
    g->pend_tid = UINT64_MAX;
    return g;
}

void growth_free(growth_t *g) {
    if (!g)
        return;
    hmap_fini(&g->live);
    size_t it = 0;
    uint64_t key;
    gthread_t **tp;
    while ((tp = hmap_next(&g->threads, &it, &key)))
        free(*tp);
    hmap_fini(&g->threads);
    hmap_fini(&g->shorts);
    hmap_fini(&g->site_of);
    free(g->ended); // emptied at every round's end
    free(g->changed);
    for (unsigned k = 0; k < REPLAY_DEPTH_MAX; k++) {
        free(g->fixes[k]);
        free(g->ops[k]);
        free(g->links[k]);
    }
    gblock_t **bp;
    it = 0;
    while ((bp = hmap_next(&g->pend, &it, &key)))
        free(*bp);
    hmap_fini(&g->pend);
    free(g->touched);
    free(g->chains);
    free(g->free_chains);
    for (size_t i = 0; i < g->n_accs; i++)
        hmap_fini(&g->accs[i].finals);
    free(g->accs);
    free(g->sites);
    free(g);
}

uint64_t growth_short_ns(const growth_t *g) { return g->short_ns; }

size_t growth_threads_held(const growth_t *g) { return hmap_count(&g->threads); }

__attribute__((noinline, cold)) static gthread_t *thread_of_slow(growth_t *g, uint32_t tid) {
    bool existed;
    gthread_t **tp = hmap_put(&g->threads, tid, &existed);
    if (!existed)
        *tp = xcalloc(1, sizeof **tp);
    gthread_t *t = *tp;
    g->cached_tid = tid;
    g->cached = t;
    return t;
}

static inline gthread_t *thread_of(growth_t *g, uint32_t tid) {
    if (g->cached && g->cached_tid == tid)
        return g->cached;
    return thread_of_slow(g, tid);
}

// A thread's state goes with its end (READER_THREAD_END): a trace of a server that makes a
// thread per request kept ~4.4 KiB for every thread it ever made (bench/README.md, session 16:
// `report` 248 MB on 50,000 short threads). A later event of the tid (a TLS destructor's after
// the shim's exit hook, or a new thread the kernel gave the same id) starts a fresh state, in
// every pass alike. Returns the state, out of the map, for the caller to free; NULL if none.
static gthread_t *thread_take(growth_t *g, uint32_t tid) {
    gthread_t *t;
    if (!hmap_take(&g->threads, tid, &t))
        return NULL;
    if (g->cached == t)
        g->cached = NULL;
    return t;
}

// ---- chains ----

// hashbrown's allocation for a table of `buckets` buckets of elem-byte entries: the entries rounded
// up to the control bytes' 16-byte alignment, one control byte per bucket, and one SSE2 group of
// trailing control bytes (docs/growth.md#advice).
static uint64_t hb_size(uint64_t buckets, uint64_t elem) {
    return ((buckets * elem + 15) & ~15ull) + buckets + 16;
}

// A new chain whose first block is b; returns its index + 1. May allocate.
static uint64_t chain_new(growth_t *g, const gblock_t *b) {
    size_t i;
    if (g->n_free_chains) {
        i = g->free_chains[--g->n_free_chains];
    } else {
        g->chains = xgrow(g->chains, &g->cap_chains, g->n_chains + 1, sizeof *g->chains);
        i = g->n_chains++;
    }
    g->chains[i] = (chain_t){.origin = b->origin,
                                       .first = b->head.size,
                                       .final = b->head.size,
                                       .hb_s0 = b->head.size,
                                       .hb_n = 1,
                                       .doubling = true,
                                       .constant = true,
                                       .hb_ok = true};
    return i + 1;
}

// The chain grows by one link from a block of old_size to one of new_size.
static void chain_add(chain_t *c, uint64_t old_size, uint64_t new_size, unsigned flags) {
    c->final = new_size;
    if (new_size <= old_size) {
        c->hb_ok = false; // a shrink or same-size realloc keeps the chain but is no growth
        return;
    }
    uint64_t delta = new_size - old_size;
    if (c->steps == 0)
        c->increment = delta;
    else if (delta != c->increment)
        c->constant = false;
    if (new_size != 2 * old_size)
        c->doubling = false;
    c->steps++;
    if (flags & LINK_REALLOC) {
        c->realloc_steps++;
        c->hb_ok = false;
    }
    if (flags & LINK_MOVED) {
        c->moves++;
        c->copied += old_size;
    }
    if (!c->hb_ok)
        return;
    uint32_t i = c->hb_n++; // index of new_size: a table of 4 << i buckets
    if (i >= HB_MAX_STEPS) {
        c->hb_ok = false;
    } else if (i == 1) {
        c->hb_s1 = new_size;
    } else if (i == 2) {
        // 16 buckets: size = 16 * elem + 16 + 16 exactly (16 * elem needs no rounding)
        uint64_t e = new_size >= 32 && (new_size - 32) % 16 == 0 ? (new_size - 32) / 16 : 0;
        c->hb_ok = e && hb_size(4, e) == c->hb_s0 && hb_size(8, e) == c->hb_s1;
        c->hb_elem = e;
    } else {
        c->hb_ok = hb_size(4ull << i, c->hb_elem) == new_size;
    }
}

static void chain_end(growth_t *g, uint64_t chain);

// Links old block a to new block b of b_size bytes, which continues a's chain.
static void link_blocks(growth_t *g, gblock_t *a, gblock_t *b, uint64_t b_size, unsigned flags) {
    uint64_t ca = a->chain ? a->chain : chain_new(g, a);
    chain_add(&g->chains[ca - 1], a->head.size, b_size, flags);
    b->chain = ca;
    if (flags & LINK_REALLOC)
        b->origin = a->origin; // replay's site of a realloc'd block: where it started
}

// The block at addr, wherever the live blocks are kept.
static gblock_t *live_get(growth_t *g, uint64_t addr) {
    return g->rp ? (gblock_t *)replay_block(g->rp, addr) : hmap_get(&g->live, addr);
}

// on_alloc's realloc link, out of line: the new block's chain and origin come back by value,
// so the scan's block (a local) stays in registers.
typedef struct chain_origin {
    uint64_t chain, origin;
} chain_origin_t;

__attribute__((noinline)) static chain_origin_t link_realloc(growth_t *g, gblock_t *pending,
                                                             const reader_event_t *ev) {
    gblock_t b = {.origin = ev->stack};
    // the same chain whether or not the address moved (docs/growth.md#realloc)
    link_blocks(g, pending, &b, ev->size,
                LINK_REALLOC | (ev->addr != ev->old_addr ? LINK_MOVED : 0));
    return (chain_origin_t){b.chain, b.origin};
}

// b: where the new block goes in the live table; its head is the caller's to write (replay's,
// after this, when attached: the old head is still there if the address was live). Its fields
// (and the ring entry's) are written one by one, where they stay: a block built aside and copied
// whole was read back with 16-byte loads from 8-byte stores, a store-forwarding stall that was
// the largest cost of this function.
// seq: the allocation's number (0: the next of growth's own count; the scan passes the serial
// the shard gave it, which orders allocations the same way).
// t: ev's thread. Inlined: the scan's copy keeps b in registers and pays no call
// (growth_scan_links).
// links (a constant): growth_scan_links', which leaves the realloc's link to growth_scan_chains
// (b's chain and origin stay unset). Returns whether the allocation continues a realloc.
static inline __attribute__((always_inline)) bool on_alloc(growth_t *g, gthread_t *t,
                                                           const reader_event_t *ev, gblock_t *b,
                                                           uint64_t seq, bool links) {
    if (!links && !seq) // (the scan's serials are never 0)
        seq = ++g->seq;
    b->seq = seq;
    b->stack = ev->stack;
    b->origin = ev->stack;
    b->chain = 0;
    bool realloc = false;
    if (ev->sub == READER_REALLOC && ev->old_addr && t->has_pending &&
        t->pending_addr == ev->old_addr) {
        if (!links) {
            chain_origin_t co = link_realloc(g, &t->pending, ev);
            b->chain = co.chain;
            b->origin = co.origin;
        }
        b->seq |= BLOCK_HAS_PRED;
        realloc = true;
    }
    t->has_pending = false;
    t->n_events++;
    t->last_seq = seq;
    stack_last_t *sl = &t->last[(ev->stack * 0x9E3779B97F4A7C15ull) >> 56];
    // another stack's entry may have evicted this one's; an empty one (0, 0) was never written:
    // no allocation at this stack before, which reads as 0 or as PREV_UNKNOWN, and either is
    // no allocation's number
    uint64_t prev = sl->stack == ev->stack ? sl->seq : PREV_UNKNOWN;
    sl->stack = ev->stack;
    sl->seq = seq;
    recent_t *r = &t->ring[t->ring_pos];
    if (links) { // (the scan's fields of own, at its round's end: scan_keep)
        r->at = ev;
    } else {
        r->own.addr = ev->addr;
        r->own.size = ev->size;
        r->own.time_ns = ev->time_ns;
        r->at = &r->own;
    }
    r->seq = seq;
    r->stack = ev->stack;
    r->ev = t->n_events;
    r->prev_seq = prev;
    r->flags = realloc ? RECENT_PRED : 0;
    t->ring_pos = (t->ring_pos + 1) % GROWTH_WINDOW;
    return realloc;
}

// The newest of the thread's allocations in the window at the old block's stack, if newer
// than the old block (its serial a_seq). Scalars, not the block: the scan's block stays in
// registers.
static const recent_t *scan_ring(const gthread_t *t, uint64_t a_stack, uint64_t a_seq) {
    for (unsigned k = 1; k <= GROWTH_WINDOW; k++) {
        const recent_t *e = &t->ring[(t->ring_pos + GROWTH_WINDOW - k) % GROWTH_WINDOW];
        // empty, out of the window, or older than the old block: so is the rest
        if (e->seq == 0 || e->ev + GROWTH_WINDOW < t->n_events || e->seq <= a_seq)
            return NULL;
        if (e->stack == a_stack)
            return e;
    }
    return NULL;
}

static inline size_t changed_home(const growth_t *g, uint64_t serial) {
    return (size_t)((serial * 0x9E3779B97F4A7C15ull) >> 40) & g->changed_mask;
}

// The entry of serial in the changed table, or the empty one where it would go.
static inline changed_t *changed_at(const growth_t *g, uint64_t serial) {
    size_t i = changed_home(g, serial);
    while (g->changed[i].serial && g->changed[i].serial != serial)
        i = (i + 1) & g->changed_mask;
    return &g->changed[i];
}

// Doubles the changed table (or makes it), at most half full after.
__attribute__((noinline)) static void changed_grow(growth_t *g) {
    changed_t *old = g->changed;
    size_t n_old = old ? g->changed_mask + 1 : 0, n = n_old ? 2 * n_old : CHANGED_MIN;
    g->changed = xcalloc(n, sizeof *g->changed);
    g->changed_mask = n - 1;
    for (size_t i = 0; i < n_old; i++)
        if (old[i].serial)
            *changed_at(g, old[i].serial) = old[i];
    free(old);
}

// Takes entry i out of the changed table, moving back the entries after it in its run that
// could sit nearer their home (linear probing without tombstones: a lookup stops at the first
// empty entry).
static void changed_del(growth_t *g, size_t i) {
    size_t mask = g->changed_mask;
    for (size_t j = (i + 1) & mask; g->changed[j].serial; j = (j + 1) & mask) {
        size_t h = changed_home(g, g->changed[j].serial);
        // j's entry may move to i if its home is not in (i, j], cyclically
        if (((j - h) & mask) >= ((j - i) & mask)) {
            g->changed[i] = g->changed[j];
            i = j;
        }
    }
    g->changed[i].serial = 0;
    g->n_changed--;
}

// growth_scan_chains: a block's words changed (it joined a chain): the shards get them D rounds on,
// and a free of the block until then reads them here (scan_block).
static void note_changed(growth_t *g, uint64_t addr, uint64_t serial, uint64_t origin,
                         uint64_t chain) {
    if (chain > UINT32_MAX) {
        fprintf(stderr, "heapprof: more than 2^32 growth chains live at once\n");
        abort();
    }
    unsigned q = g->slot;
    if (g->n_fixes[q] == g->cap_fixes[q]) // (no call to xgrow per link)
        g->fixes[q] =
            xgrow(g->fixes[q], &g->cap_fixes[q], g->n_fixes[q] + 1, sizeof *g->fixes[q]);
    g->fixes[q][g->n_fixes[q]++] =
        (replay_cfix_t){.addr = addr, .serial = serial, .origin = origin, .chain = (uint32_t)chain};
    g->n_fixes_open++;
    if (2 * (g->n_changed + 1) > (g->changed ? g->changed_mask + 1 : 0))
        changed_grow(g);
    changed_t *c = changed_at(g, serial);
    if (!c->serial) // (else a newer change of the same block: it wins, as in the lists)
        g->n_changed++;
    *c = (changed_t){.serial = serial, .q = q, .k = (uint32_t)g->n_fixes[q]};
}

// docs/growth.md#allocate-copy-free: the newest allocation at the old block's stack among the
// thread's last GROWTH_WINDOW events, made after the old block, larger than it, and with no
// allocation at that stack between the two. Returns whether it linked a to it.
// Its last step, out of line (most frees link nothing): links a to r's block if that block is
// still live without a predecessor.
// a by value: the scan's old block (a local) stays in registers on the common path.
__attribute__((noinline)) static bool link_copy(growth_t *g, gblock_t a, const recent_t *r) {
    gblock_t *b = live_get(g, r->at->addr);
    if (!b || b->seq != r->seq) // freed, or already has a predecessor (BLOCK_HAS_PRED)
        return false;
    b->seq |= BLOCK_HAS_PRED;
    link_blocks(g, &a, b, b->head.size, LINK_MOVED);
    return true;
}

// find_recent's answer once a ring entry names a as the allocation before it at its stack (in
// the scan, inlined into note_copy, which is out of line: the scan's loop keeps its registers).
static inline __attribute__((always_inline)) const recent_t *find_recent_slow(const gthread_t *t,
                                                                  uint64_t a_stack,
                                                                  uint64_t a_seq,
                                                                  uint64_t a_size, uint64_t now) {
    const recent_t *r = scan_ring(t, a_stack, a_seq);
    if (!r || r->at->size <= a_size || r->prev_seq != a_seq)
        return NULL;
    if (now - r->at->time_ns > GROWTH_SLACK_NS + GROWTH_COPY_NS_PER_BYTE * a_size)
        return NULL;
    return r;
}

// Whether a ring entry names the allocation a_seq as its stack's allocation before it
// (prev_seq), which find_recent's new block must: most frees are of blocks that no entry
// names, seen in GROWTH_WINDOW compares, without the stack's hash (an entry out of the window
// or overwritten may name it too: find_recent_slow sorts them out).
static inline bool ring_names(const gthread_t *t, uint64_t a_seq) {
    _Static_assert(GROWTH_WINDOW == 4, "one compare per ring entry");
    const recent_t *e = t->ring;
    return (e[0].prev_seq == a_seq) | (e[1].prev_seq == a_seq) | (e[2].prev_seq == a_seq) |
           (e[3].prev_seq == a_seq);
}

// find_copy's choice of the new block (NULL: none), all but the last step.
static inline __attribute__((always_inline)) const recent_t *find_recent(const gthread_t *t,
                                                                        const gblock_t *a,
                                                                        uint64_t now) {
    uint64_t a_seq = seq_of(a);
    return ring_names(t, a_seq) ? find_recent_slow(t, a->stack, a_seq, a->head.size, now)
                                : NULL;
}

// Inlined into every caller of on_free: the common answer (no link) is a few loads away.
static inline __attribute__((always_inline)) bool find_copy(growth_t *g, gthread_t *t,
                                                            gblock_t *a, uint64_t now) {
    const recent_t *r = find_recent(t, a, now);
    return r && link_copy(g, *a, r);
}

// growth_scan_links' find_recent once a ring entry names the freed block (f, w), and the last
// step of find_copy, where the block lives in a shard: the ring entry
// knows whether it is still live without a predecessor, and its size is the block's (replay's
// size outside DHAT mode); a block without a predecessor never joined a chain, so its origin
// is its stack and its chain none. The link itself is growth_scan_chains', from the new
// block's fields noted here. Out of line, as link_copy.
__attribute__((noinline)) static bool note_copy(growth_t *g, unsigned q, gthread_t *t,
                                                const replay_found_t *f,
                                                const replay_cwords_t *w, uint64_t now) {
    recent_t *r = (recent_t *)find_recent_slow(t, w->stack, w->serial & ~BLOCK_HAS_PRED,
                                               f->size, now);
    if (!r || r->flags & (RECENT_GONE | RECENT_PRED))
        return false;
    r->flags |= RECENT_PRED;
    if (g->n_links[q] == g->cap_links[q])
        g->links[q] = xgrow(g->links[q], &g->cap_links[q], g->n_links[q] + 1, sizeof *g->links[q]);
    g->links[q][g->n_links[q]++] = (scan_link_t){
        .addr = r->at->addr,
        .seq = r->seq,
        .stack = r->stack,
        .size = r->at->size,
        .time_ns = r->at->time_ns};
    return true;
}

// A short-lived block's count, by its origin.
static inline void short_add(growth_t *g, uint64_t origin, uint64_t size) {
    short_slot_t *sl = &g->short_slots[(origin * 0x9E3779B97F4A7C15ull) >> 56];
    if (sl->sh.blocks && sl->origin != origin) {
        growth_short_t *s = hmap_put(&g->shorts, sl->origin, NULL);
        s->blocks += sl->sh.blocks;
        s->bytes += sl->sh.bytes;
        sl->sh = (growth_short_t){0, 0};
    }
    sl->origin = origin;
    sl->sh.blocks++;
    sl->sh.bytes += size;
}

// a: the freed block, already out of the live table (read in place: see on_alloc).
// t: ev's thread. Inlined as on_alloc.
static inline __attribute__((always_inline)) void on_free(growth_t *g, gthread_t *t,
                                                          const reader_event_t *ev, gblock_t *a) {
    if (ev->flags & READER_FREE_OF_REALLOC) {
        t->has_pending = true;
        t->pending_addr = ev->addr;
        t->pending = *a;
        return;
    }
    t->n_events++;
    // short-lived: within short_ns, or replay's "temporary" (docs/growth.md#short-lived)
    if ((g->short_ns && ev->time_ns >= a->head.time_ns &&
         ev->time_ns - a->head.time_ns <= g->short_ns) ||
        t->last_seq == seq_of(a))
        short_add(g, a->origin, a->head.size);
    bool linked = ev->time_ns >= a->head.time_ns && find_copy(g, t, a, ev->time_ns);
    if (!linked && a->chain)
        chain_end(g, a->chain); // its last block is gone: the chain is complete
}

// on_free in growth_scan_links, where the block (its head in f, its words in w) lives in a
// shard: decides what only the per-thread state can, and leaves to growth_scan_chains what
// needs the block's origin and chain (the short-lived count by origin and the age test, the
// link, the chain's end), told by the SCAN_* bits it returns (and note_copy's list of round
// slot q). The block's fields are read where they are needed, not gathered into a block: the
// loop's registers are scarce.
static inline __attribute__((always_inline)) unsigned scan_free(growth_t *g, gthread_t *t,
                                                                const reader_event_t *ev,
                                                                const replay_found_t *f,
                                                                const replay_cwords_t *w,
                                                                unsigned q) {
    if (ev->flags & READER_FREE_OF_REALLOC) {
        t->has_pending = true;
        t->pending_addr = ev->addr;
        return SCAN_PENDING;
    }
    t->n_events++;
    uint64_t a_seq = w->serial & ~BLOCK_HAS_PRED;
    unsigned op = t->last_seq == a_seq ? SCAN_FREE | SCAN_SHORT : SCAN_FREE;
    if (ev->time_ns >= f->time_ns && ring_names(t, a_seq) &&
        note_copy(g, q, t, f, w, ev->time_ns))
        op |= SCAN_COPY;
    return op;
}

void growth_event(growth_t *g, const reader_event_t *ev) {
    gblock_t *b;
    if (ev->kind == READER_ALLOC) {
        b = hmap_put(&g->live, ev->addr, NULL);
        on_alloc(g, thread_of(g, ev->tid), ev, b, 0, false);
        b->head.size = ev->size; // growth's own table: the head is growth's to write
        b->head.time_ns = ev->time_ns;
    } else if (ev->kind == READER_FREE && (b = hmap_take_ref(&g->live, ev->addr))) {
        on_free(g, thread_of(g, ev->tid), ev, b);
    } else if (ev->kind == READER_THREAD_END) {
        free(thread_take(g, ev->tid));
    }
}

static void companion_alloc(void *ctx, const reader_event_t *ev, replay_block_t *b) {
    growth_t *g = ctx;
    on_alloc(g, thread_of(g, ev->tid), ev, (gblock_t *)b, 0, false);
}

static void companion_free(void *ctx, const reader_event_t *ev, replay_block_t *b) {
    growth_t *g = ctx;
    on_free(g, thread_of(g, ev->tid), ev, (gblock_t *)b);
}

static void companion_thread_end(void *ctx, uint32_t tid) {
    free(thread_take(ctx, tid));
}

void growth_attach(growth_t *g, replay_t *rp) {
    _Static_assert(GBLOCK_WORDS <= REPLAY_COMPANION_WORDS_MAX,
                   "a growth block must fit replay's companion words");
    _Static_assert(offsetof(gblock_t, seq) == sizeof(replay_block_t),
                   "the companion words follow replay's head");
    g->rp = rp;
    replay_set_companion(rp, GBLOCK_WORDS, companion_alloc,
                         companion_free, g);
    replay_set_companion_thread_end(rp, companion_thread_end);
}

// ---- in replay_par's ordered scan ----

void growth_scan_start(growth_t *g, unsigned depth) {
    g->scan = true;
    g->depth = depth < 2 ? 2 : depth > REPLAY_DEPTH_MAX ? REPLAY_DEPTH_MAX : depth;
}

// The origin and chain of the block a shard found (its words in w), with the changes of this
// round and of the D - 1 before, which the shard has not applied yet.
static inline chain_origin_t scan_words(const growth_t *g, const replay_cwords_t *w) {
    chain_origin_t co = {.chain = (uint32_t)w->tid_chain, .origin = w->origin};
    // no link in any open round: no table to read
    if (g->n_fixes_open) {
        const changed_t *c = changed_at(g, w->serial);
        if (c->serial) {
            const replay_cfix_t *x = &g->fixes[c->q][c->k - 1];
            co = (chain_origin_t){.chain = x->chain, .origin = x->origin};
        }
    }
    return co;
}

// The block a shard found (its head in f, its words in w, its origin and chain in co).
static inline gblock_t scan_block(const replay_found_t *f, const replay_cwords_t *w,
                                  chain_origin_t co) {
    return (gblock_t){.head = {.size = f->size, .time_ns = f->time_ns, .stack = f->stack},
                      .seq = w->serial,
                      .stack = w->stack,
                      .origin = co.origin,
                      .chain = co.chain};
}

// growth_scan_chains' copy step: links the freed block (f, w, co) to the new block r, which had
// no predecessor (note_copy). Out of line: the chains' loop keeps its registers.
__attribute__((noinline)) static void scan_copy(growth_t *g, const replay_found_t *f,
                                                const replay_cwords_t *w, chain_origin_t co,
                                                const scan_link_t *r) {
    gblock_t a = scan_block(f, w, co);
    gblock_t b = {.head = {.size = r->size, .time_ns = r->time_ns},
                  .seq = r->seq | BLOCK_HAS_PRED,
                  .stack = r->stack,
                  .origin = r->stack};
    link_blocks(g, &a, &b, r->size, LINK_MOVED);
    note_changed(g, r->addr, r->seq, b.origin, b.chain);
}

// The block a shard found left the table: its allocating thread's ring entry, if it still has
// one, no longer leads to a live block (find_copy's lookup in the one-thread pass).
// t: the thread of tid, the scanned event's (most blocks are freed by their allocating thread).
static inline void scan_gone(growth_t *g, gthread_t *t, uint32_t tid, const replay_cwords_t *w) {
    uint32_t owner = (uint32_t)(w->tid_chain >> 32);
    if (owner != tid) { // no thread_of: the event's thread stays the cached one
        gthread_t **tp = hmap_get(&g->threads, owner);
        if (!tp)
            return;
        t = *tp;
    }
    // the ring's oldest entry is the next to be written (0 while the ring has never filled):
    // a block allocated before it has no entry, and most frees are of such blocks
    uint64_t serial = w->serial;
    if (serial < t->ring[t->ring_pos].seq)
        return;
    // else one compare per entry (serials are distinct; 0: empty)
    _Static_assert(GROWTH_WINDOW == 4, "one compare per ring entry");
    recent_t *e = t->ring;
    e[0].flags |= e[0].seq == serial ? RECENT_GONE : 0;
    e[1].flags |= e[1].seq == serial ? RECENT_GONE : 0;
    e[2].flags |= e[2].seq == serial ? RECENT_GONE : 0;
    e[3].flags |= e[3].seq == serial ? RECENT_GONE : 0;
}

// growth_scan_links: t has an event in round `round` (its ring entries may point into the
// round's events).
static inline void scan_touch(growth_t *g, gthread_t *t, uint64_t round) {
    if (t->scanned != round) {
        t->scanned = round;
        g->touched = xgrow(g->touched, &g->cap_touched, g->n_touched + 1, sizeof *g->touched);
        g->touched[g->n_touched++] = t;
    }
}

// growth_scan_links, at the end of a round: the ring entries that point into the round's
// events (valid only until the round's batches are given back; an entry points at its own copy
// or into the round it was made in, and every earlier round's were copied at its end) get
// their own copy.
static void scan_keep(growth_t *g) {
    for (size_t j = 0; j < g->n_touched; j++) {
        gthread_t *t = g->touched[j];
        for (unsigned k = 0; k < GROWTH_WINDOW; k++) {
            recent_t *r = &t->ring[k];
            if (r->at && r->at != &r->own) {
                r->own = *r->at;
                r->at = &r->own;
            }
        }
    }
    g->n_touched = 0;
    for (size_t j = 0; j < g->n_ended; j++)
        free(g->ended[j]);
    g->n_ended = 0;
}

void growth_scan_links(growth_t *g, const reader_event_t *const *ev, size_t n,
                       const replay_found_t *found, const replay_cwords_t *cw, uint64_t round) {
    unsigned q = (unsigned)(round % g->depth);
    if (g->ops_cap[q] < n)
        g->ops[q] = xgrow(g->ops[q], &g->ops_cap[q], n, sizeof *g->ops[q]);
    g->n_links[q] = 0;
    g->n_ops[q] = 0;
    uint32_t *op = g->ops[q];
    if (!n)
        return;
    uint32_t tid = ev[0]->tid;
    gthread_t *t = thread_of(g, tid);
    scan_touch(g, t, round);
    for (size_t i = 0; i < n; i++) {
        const reader_event_t *e = ev[i];
        const replay_found_t *f = &found[i];
        if (e->kind == READER_ALLOC) {
            if (e->tid != tid) {
                t = thread_of(g, tid = e->tid);
                scan_touch(g, t, round);
            }
            if (f->had)
                scan_gone(g, t, tid, &cw[i]); // replaced without a free, as in the live table
            gblock_t b; // on_alloc writes all but the head's stack, which nothing reads
            b.head.size = e->size;
            b.head.time_ns = e->time_ns;
            if (on_alloc(g, t, e, &b, round << 32 | i, true))
                *op++ = (uint32_t)i << SCAN_BITS | SCAN_REALLOC;
        } else if (e->kind == READER_FREE && f->had) {
            if (e->tid != tid) { // (touched too: its next allocation may not switch)
                t = thread_of(g, tid = e->tid);
                scan_touch(g, t, round);
            }
            scan_gone(g, t, tid, &cw[i]);
            *op++ = (uint32_t)i << SCAN_BITS | scan_free(g, t, e, f, &cw[i], q);
        } else if (e->kind == READER_THREAD_END) {
            gthread_t *gone = thread_take(g, e->tid);
            if (gone && gone->scanned == round) { // in `touched`: scan_keep still reads it
                g->ended = xgrow(g->ended, &g->cap_ended, g->n_ended + 1, sizeof *g->ended);
                g->ended[g->n_ended++] = gone;
            } else {
                free(gone);
            }
            if (e->tid == tid)
                tid = UINT32_MAX; // no thread's (tids stay below 2^22): the next event looks up
        }
    }
    g->n_ops[q] = (size_t)(op - g->ops[q]);
    scan_keep(g);
}

// growth_scan_chains' block a realloc's freeing half took out on thread tid.
static inline gblock_t *pending_of(growth_t *g, uint32_t tid) {
    if (g->pend_tid != tid) {
        bool existed;
        gblock_t **bp = hmap_put(&g->pend, tid, &existed);
        if (!existed)
            *bp = xcalloc(1, sizeof **bp);
        g->pend_tid = tid;
        g->pend_cached = *bp;
    }
    return g->pend_cached;
}

void growth_scan_chains(growth_t *g, const reader_event_t *const *ev, size_t n,
                        const replay_found_t *found, const replay_cwords_t *cw, uint64_t round) {
    // the shards applied the changes of round - D before this round's finds: their lists
    // take this round's
    unsigned q = g->slot = (unsigned)(round % g->depth);
    for (size_t k = g->n_fixes[q]; k-- > 0;) {
        changed_t *c = changed_at(g, g->fixes[q][k].serial);
        if (c->serial && c->q == q && c->k == k + 1)
            changed_del(g, (size_t)(c - g->changed));
    }
    g->n_fixes_open -= g->n_fixes[q];
    g->n_fixes[q] = 0;
    (void)n; // the links pass's ops name the events it needs, all below n
    const uint64_t short_ns = g->short_ns;
    const uint32_t *ops = g->ops[q];
    const scan_link_t *lk = g->links[q];
    for (size_t k = 0, m = g->n_ops[q]; k < m; k++) {
        size_t i = ops[k] >> SCAN_BITS;
        unsigned op = ops[k] & ((1u << SCAN_BITS) - 1);
        const reader_event_t *e = ev[i];
        if (op & SCAN_REALLOC) { // on_alloc's link
            chain_origin_t co = link_realloc(g, pending_of(g, e->tid), e);
            note_changed(g, e->addr, round << 32 | i, co.origin, co.chain);
            continue;
        }
        const replay_found_t *f = &found[i];
        const replay_cwords_t *w = &cw[i];
        chain_origin_t co = scan_words(g, w);
        if (op & SCAN_PENDING) {
            *pending_of(g, e->tid) = scan_block(f, w, co);
            continue;
        }
        if ((op & SCAN_SHORT) ||
            (short_ns && e->time_ns >= f->time_ns && e->time_ns - f->time_ns <= short_ns))
            short_add(g, co.origin, f->size);
        if (op & SCAN_COPY) // find_copy's link (a block without a predecessor: note_copy)
            scan_copy(g, f, w, co, lk++);
        else if (co.chain)
            chain_end(g, co.chain); // its last block is gone: the chain is complete
    }
}

const replay_cfix_t *growth_scan_fixes(const growth_t *g, uint64_t round, size_t *n) {
    *n = g->n_fixes[round % g->depth];
    return g->fixes[round % g->depth];
}

#define PREFETCH_AHEAD 8 // as replay_events: overlap the cache misses of a big live table

void growth_events(growth_t *g, const reader_event_t *ev, size_t n) {
    for (size_t i = 0; i < n; i++) {
        if (i + PREFETCH_AHEAD < n)
            hmap_prefetch(&g->live, ev[i + PREFETCH_AHEAD].addr);
        growth_event(g, &ev[i]);
    }
}

growth_short_t growth_short_of(const growth_t *g, uint64_t stack) {
    const growth_short_t *s = hmap_get(&g->shorts, stack);
    growth_short_t r = s ? *s : (growth_short_t){0, 0};
    const short_slot_t *sl = &g->short_slots[(stack * 0x9E3779B97F4A7C15ull) >> 56];
    if (sl->sh.blocks && sl->origin == stack) {
        r.blocks += sl->sh.blocks;
        r.bytes += sl->sh.bytes;
    }
    return r;
}

// ---- per site ----

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int cmp_sites(const void *a, const void *b) {
    const growth_site_t *x = a, *y = b;
    if (x->bytes_copied != y->bytes_copied)
        return x->bytes_copied > y->bytes_copied ? -1 : 1;
    if (x->n_steps != y->n_steps)
        return x->n_steps > y->n_steps ? -1 : 1;
    return x->stack < y->stack ? -1 : x->stack > y->stack;
}

static void site_add_chain(growth_t *g, const chain_t *c) {
    site_acc_t **accs = &g->accs;
    size_t *n = &g->n_accs, *cap = &g->cap_accs;
    bool existed;
    uint64_t *idx = hmap_put(&g->site_of, c->origin, &existed);
    if (!existed) {
        *accs = xgrow(*accs, cap, *n + 1, sizeof **accs);
        (*accs)[*n] =
            (site_acc_t){.s = {.stack = c->origin, .first_min = UINT64_MAX, .doubling = true},
                         .all_constant = true,
                         .same_increment = true};
        hmap_init(&(*accs)[*n].finals, sizeof(final_count_t));
        *idx = ++*n;
    }
    site_acc_t *a = &(*accs)[*idx - 1];
    growth_site_t *s = &a->s;
    s->n_chains++;
    s->n_steps += c->steps;
    s->n_realloc_steps += c->realloc_steps;
    s->n_moves += c->moves;
    s->bytes_copied += c->copied;
    if (c->first < s->first_min)
        s->first_min = c->first;
    s->doubling = s->doubling && c->doubling;
    final_count_t *fc = hmap_put(&a->finals, c->final, NULL);
    fc->chains++;
    fc->steps += c->steps;
    fc->copied += c->copied;
    a->n_finals++;
    if (c->steps > a->max_chain_steps)
        a->max_chain_steps = c->steps;
    if (c->steps >= 2) {
        if (!c->constant)
            a->all_constant = false;
        else if (a->any_multi && c->increment != s->increment)
            a->same_increment = false;
        if (!a->any_multi)
            s->increment = c->increment;
        a->any_multi = true;
        uint64_t e = c->hb_ok && c->hb_n >= 3 ? c->hb_elem : 0;
        if (e == 0 || (s->hashbrown_elem && s->hashbrown_elem != e))
            a->hb_conflict = true;
        else
            s->hashbrown_elem = e;
    }
}

// The largest final size of a site's chains, their lower median and the size that covers
// GROWTH_COVER_PCT% of them with what it saves, from the counts per size.
static void finals_figures(site_acc_t *a) {
    size_t n = hmap_count(&a->finals), k = 0, it = 0;
    uint64_t *sizes = xmalloc(n * sizeof *sizes), size;
    while (hmap_next(&a->finals, &it, &size))
        sizes[k++] = size;
    sort_items(sizes, n, sizeof *sizes, cmp_u64);
    a->s.final_max = sizes[n - 1];
    uint64_t mid = (a->n_finals - 1) / 2; // index of the lower median
    // chains that must end at or below the covering size: ceil(pct% of them)
    uint64_t need = (a->n_finals * GROWTH_COVER_PCT + 99) / 100;
    uint64_t below = 0;
    bool median_set = false;
    for (k = 0; k < n; k++) {
        const final_count_t *fc = hmap_get(&a->finals, sizes[k]);
        below += fc->chains;
        a->s.cover_chains += fc->chains;
        a->s.cover_steps += fc->steps;
        a->s.cover_copied += fc->copied;
        if (!median_set && below > mid) {
            a->s.final_median = sizes[k];
            median_set = true;
        }
        if (below >= need) {
            a->s.final_cover = sizes[k];
            break;
        }
    }
    free(sizes);
}

// Sums a complete chain into its site and frees its slot.
// one allocate-copy-free step alone looks like any free-after-allocate at a site
// (docs/growth.md#allocate-copy-free): such a chain needs a second one
static bool chain_counts(const chain_t *c) {
    return c->realloc_steps > 0 || c->steps - c->realloc_steps >= 2;
}

static void chain_end(growth_t *g, uint64_t chain) {
    chain_t *c = &g->chains[chain - 1];
    if (c->dead)
        return;
    if (chain_counts(c))
        site_add_chain(g, c);
    c->dead = true;
    g->free_chains =
        xgrow(g->free_chains, &g->cap_free_chains, g->n_free_chains + 1, sizeof *g->free_chains);
    g->free_chains[g->n_free_chains++] = chain - 1;
}

void growth_finish(growth_t *g) {
    // chains whose last block is still live (or was lost to damage) end here
    for (size_t i = 0; i < g->n_chains; i++)
        chain_end(g, i + 1);
    free(g->chains);
    g->chains = NULL;
    g->n_chains = g->cap_chains = 0;

    size_t n_accs = g->n_accs;
    g->sites = xcalloc(n_accs ? n_accs : 1, sizeof *g->sites);
    g->n_sites = n_accs;
    for (size_t i = 0; i < n_accs; i++) {
        site_acc_t *a = &g->accs[i];
        finals_figures(a);
        a->s.constant_increment =
            a->any_multi && a->all_constant && a->max_chain_steps >= 4 && !a->s.doubling;
        if (!a->s.constant_increment || !a->same_increment)
            a->s.increment = 0;
        if (a->hb_conflict)
            a->s.hashbrown_elem = 0;
        g->sites[i] = a->s;
        hmap_fini(&a->finals);
    }
    free(g->accs);
    g->accs = NULL;
    g->n_accs = g->cap_accs = 0;
    hmap_fini(&g->site_of); // it indexed accs; now it indexes the ranked sites
    hmap_init(&g->site_of, sizeof(uint64_t));
    sort_items(g->sites, g->n_sites, sizeof *g->sites, cmp_sites);
    for (size_t i = 0; i < g->n_sites; i++)
        *(uint64_t *)hmap_put(&g->site_of, g->sites[i].stack, NULL) = i + 1;
}

void growth_peek(const growth_t *g, growth_peek_fn fn, void *ctx) {
    for (size_t i = 0; i < g->n_accs; i++)
        fn(ctx, g->accs[i].s.stack, g->accs[i].s.n_steps, g->accs[i].s.bytes_copied);
    for (size_t i = 0; i < g->n_chains; i++) // open chains: growth_finish would end them
        if (!g->chains[i].dead && chain_counts(&g->chains[i]))
            fn(ctx, g->chains[i].origin, g->chains[i].steps, g->chains[i].copied);
}

size_t growth_n_sites(const growth_t *g) { return g->n_sites; }

const growth_site_t *growth_site(const growth_t *g, size_t i) { return &g->sites[i]; }

const growth_site_t *growth_site_of(const growth_t *g, uint64_t stack) {
    const uint64_t *i = hmap_get(&g->site_of, stack);
    return i ? &g->sites[*i - 1] : NULL;
}

// ---- advice ----

typedef enum container {
    C_NONE,
    RUST_VEC,
    RUST_STRING,
    RUST_VECDEQUE,
    RUST_HASHMAP,
    RUST_HASHSET,
    RUST_OTHER,
    CXX_VECTOR,
    CXX_STRING,
    CXX_UMAP,
    CXX_USET,
    CXX_OTHER,
    C_PLAIN,
} container_t;

static const struct {
    container_t c;
    const char *api;  // what the advice names
    const char *call; // printed as call(N)
} apis[] = {
    {RUST_VEC, "Vec::with_capacity", "Vec::with_capacity"},
    {RUST_STRING, "String::with_capacity", "String::with_capacity"},
    {RUST_VECDEQUE, "VecDeque::with_capacity", "VecDeque::with_capacity"},
    {RUST_HASHMAP, "HashMap::with_capacity", "HashMap::with_capacity"},
    {RUST_HASHSET, "HashSet::with_capacity", "HashSet::with_capacity"},
    {RUST_OTHER, "with_capacity", "with_capacity"},
    {CXX_VECTOR, "std::vector::reserve", "reserve"},
    {CXX_STRING, "std::string::reserve", "reserve"},
    {CXX_UMAP, "std::unordered_map::reserve", "reserve"},
    {CXX_USET, "std::unordered_set::reserve", "reserve"},
    {CXX_OTHER, "reserve", "reserve"},
};

// the qualified name of a C++ or Rust function: without a C++ return type and Rust's "<"
static const char *qualified(const char *name) {
    const char *q = sites_skip_return_type(name);
    if (*q == '<')
        q++;
    while (*q == '&' || *q == '*')
        q++;
    if (strncmp(q, "mut ", 4) == 0)
        q += 4;
    return q;
}

static bool starts(const char *s, const char *p) { return strncmp(s, p, strlen(p)) == 0; }

static container_t container_of_name(const char *fn) {
    const char *q = qualified(fn);
    if (starts(q, "std::collections::hash::set::") || strstr(q, "HashSet<"))
        return RUST_HASHSET;
    if (starts(q, "std::collections::hash::map::") || starts(q, "hashbrown::"))
        return RUST_HASHMAP;
    if (starts(q, "alloc::string::"))
        return RUST_STRING;
    if (starts(q, "alloc::collections::vec_deque::"))
        return RUST_VECDEQUE;
    if (starts(q, "alloc::vec::") || starts(q, "alloc::raw_vec::"))
        return RUST_VEC;
    if (starts(q, "std::vector<") || starts(q, "std::_Vector_base<"))
        return CXX_VECTOR;
    if (starts(q, "std::unordered_set<"))
        return CXX_USET;
    if (starts(q, "std::unordered_map<") || starts(q, "std::_Hashtable<") ||
        starts(q, "std::__detail::_Map_base<") || starts(q, "std::__detail::_Insert"))
        return CXX_UMAP;
    if (starts(q, "std::__cxx11::basic_string<") || starts(q, "std::basic_string<"))
        return CXX_STRING;
    return C_NONE;
}

static bool ends_with(const char *s, const char *suffix) {
    size_t n = strlen(s), k = strlen(suffix);
    return n >= k && strcmp(s + n - k, suffix) == 0;
}

// The container the site grows: the outermost frame below the naming frame that belongs to a known
// container (a String grows through Vec's RawVec, so the innermost would say Vec); else the
// language of the naming frame.
static container_t container_of(const site_t *s) {
    if (!s || s->n_frames == 0)
        return C_PLAIN;
    for (size_t i = s->name_frame; i-- > 0;) {
        const char *fn = s->frames[i]->function;
        container_t c = fn ? container_of_name(fn) : C_NONE;
        if (c == CXX_UMAP || c == CXX_USET) {
            // _Hashtable serves both: the set's own frame, if any, says which
            for (size_t j = i + 1; j < s->name_frame; j++)
                if (s->frames[j]->function && strstr(s->frames[j]->function, "unordered_set<"))
                    c = CXX_USET;
        }
        if (c != C_NONE)
            return c;
    }
    const symbolize_frame_t *nf = s->frames[s->name_frame];
    const char *file = nf->file ? nf->file : "";
    if (ends_with(file, ".rs"))
        return RUST_OTHER;
    if (ends_with(file, ".cpp") || ends_with(file, ".cc") || ends_with(file, ".cxx") ||
        ends_with(file, ".hpp") || ends_with(file, ".hh") || ends_with(file, ".C") ||
        (nf->function && strstr(nf->function, "::")))
        return CXX_OTHER;
    return C_PLAIN;
}

const char *growth_api(const growth_site_t *gs, const site_t *s) {
    container_t c = container_of(s);
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        if (apis[i].c == c)
            return apis[i].api;
    return gs->constant_increment ? "grow geometrically" : "allocate up front";
}

// The element size of the container the site grows, from DWARF (the T of a Vec<T> or VecDeque<T>
// frame, the _Tp of a std::vector<_Tp> frame, symbolize.h): the frame of that container nearest
// the naming frame. 0 when no such frame carries one (no debug info).
static uint32_t elem_size_of(container_t c, const site_t *s) {
    if (!s)
        return 0;
    for (size_t i = s->name_frame; i-- > 0;) {
        const symbolize_frame_t *f = s->frames[i];
        if (f->elem_size && f->function) {
            container_t fc = container_of_name(f->function);
            if (fc == c || (c == RUST_VEC && fc == RUST_VECDEQUE) ||
                (fc == RUST_VEC && c == RUST_VECDEQUE))
                return f->elem_size;
        }
    }
    return 0;
}

// Elements the final block holds (docs/growth.md#advice): the final size divided by the element
// size DWARF gives; without it, only what the layout says for sure (a String's bytes, a
// hashbrown table's buckets); else 0, and the advice gives bytes. Never from an assumed first
// capacity: a Vec made with_capacity(128) and grown looks like one that started at 4 elements
// of 32 bytes.
static uint64_t capacity_of(container_t c, const growth_site_t *gs, const site_t *s,
                            uint64_t f) {
    uint32_t elem = elem_size_of(c, s);
    switch (c) {
    case RUST_STRING:
        return f;
    case RUST_VEC:
    case RUST_VECDEQUE:
        return elem ? f / elem : 0;
    case RUST_HASHMAP:
    case RUST_HASHSET:
        if (gs->hashbrown_elem)
            for (uint64_t b = 4; b && b <= f; b <<= 1)
                if (hb_size(b, gs->hashbrown_elem) == f)
                    return b < 8 ? b - 1 : b / 8 * 7;
        return 0;
    case CXX_VECTOR:
        return elem ? f / elem : 0;
    case CXX_STRING:
        return f > 1 ? f - 1 : 0; // capacity plus the terminating NUL
    case CXX_UMAP:
    case CXX_USET:
        return f / 8; // one bucket pointer each; at max_load_factor 1, as many elements
    default:
        return 0;
    }
}

uint64_t growth_advised_size(const growth_site_t *gs) {
    // many separate buffers whose largest outgrows most of them: cover most, not the largest
    if (gs->n_chains >= 10 && gs->final_cover && gs->final_cover < gs->final_max)
        return gs->final_cover;
    return gs->final_max;
}

// The frame that holds the growing buffer when it is not the program's own: a site the runtime
// named (no frame of the program's), or a standard-library function between the naming frame
// and the container it grows (Path::join growing a PathBuf, operator+ a std::string): there is
// nothing there the program could reserve. NULL when the naming frame holds it.
static const symbolize_frame_t *holder_not_owned(const site_t *s) {
    if (!s || s->n_frames == 0)
        return NULL;
    if (s->kinds[s->name_frame] != SITES_FRAME_USER)
        return s->frames[s->name_frame];
    for (size_t i = s->name_frame; i-- > 0;) {
        const symbolize_frame_t *f = s->frames[i];
        if (f->function && container_of_name(f->function) != C_NONE)
            return NULL; // the container's own frame comes first: the program holds it
        if (s->kinds[i] == SITES_FRAME_LIBRARY)
            return f;
    }
    return NULL;
}

const char *growth_advice(const growth_site_t *gs, const site_t *s, char *buf, size_t cap) {
    const symbolize_frame_t *holder = holder_not_owned(s);
    if (holder) {
        char fn[512], safe[1024], n1[32], b1[32];
        fmt_safe_text(sites_frame_function(holder, fn, sizeof fn), safe, sizeof safe);
        snprintf(buf, cap,
                 "no advice: the buffer grows inside %s, not in the program's own code (%s "
                 "growth step%s, %s copied)",
                 safe, fmt_grouped(gs->n_steps, n1), gs->n_steps == 1 ? "" : "s",
                 fmt_bytes(gs->bytes_copied, b1));
        return buf;
    }
    container_t c = container_of(s);
    uint64_t target = growth_advised_size(gs);
    bool cover = target != gs->final_max;
    uint64_t n_steps = cover ? gs->cover_steps : gs->n_steps;
    char n1[32], b1[32], b2[32], b3[32], tail[160] = "";
    const char *steps = fmt_grouped(n_steps, n1);
    const char *noun = c == RUST_HASHMAP || c == RUST_HASHSET || c == CXX_UMAP || c == CXX_USET
                           ? (n_steps == 1 ? "rehash" : "rehashes")
                           : (n_steps == 1 ? "reallocation" : "reallocations");
    const char *copied = fmt_bytes(cover ? gs->cover_copied : gs->bytes_copied, b1);
    if (gs->n_chains > 1) {
        // what the reservation costs: the size for every chain the site started
        char c1[32], r1[32];
        uint64_t all = target * gs->n_chains;
        if (gs->n_chains && all / gs->n_chains != target)
            all = UINT64_MAX;
        if (cover)
            snprintf(tail, sizeof tail, " (covers %u%% of its %s chains; %s reserved in all)",
                     GROWTH_COVER_PCT, fmt_grouped(gs->n_chains, c1), fmt_bytes(all, r1));
        else
            snprintf(tail, sizeof tail, " (for each of its %s chains: %s reserved in all)",
                     fmt_grouped(gs->n_chains, c1), fmt_bytes(all, r1));
    }
    uint64_t n = capacity_of(c, gs, s, target);
    const char *call = NULL;
    for (size_t i = 0; i < sizeof apis / sizeof *apis; i++)
        if (apis[i].c == c)
            call = apis[i].call;
    if (call && n && c >= CXX_VECTOR)
        snprintf(buf, cap, "`%s(%" PRIu64 ")` (%s) here would save %s %s and %s of copying%s",
                 call, n, growth_api(gs, s), steps, noun, copied, tail);
    else if (call && n)
        snprintf(buf, cap, "`%s(%" PRIu64 ")` here would save %s %s and %s of copying%s", call, n,
                 steps, noun, copied, tail);
    else if (call)
        snprintf(buf, cap, "`%s(..)` for %s here would save %s %s and %s of copying%s", call,
                 fmt_bytes(target, b2), steps, noun, copied, tail);
    else if (gs->constant_increment && gs->increment)
        snprintf(buf, cap,
                 "grow geometrically, not by a constant (+%s a step): %s %s here "
                 "copied %s",
                 fmt_bytes(gs->increment, b3), fmt_grouped(gs->n_steps, n1), noun,
                 fmt_bytes(gs->bytes_copied, b1));
    else if (gs->constant_increment)
        snprintf(buf, cap, "grow geometrically, not by a constant: %s %s here copied %s",
                 fmt_grouped(gs->n_steps, n1), noun, fmt_bytes(gs->bytes_copied, b1));
    else
        snprintf(buf, cap, "allocate %s up front here: would save %s %s and %s of copying%s",
                 fmt_bytes(target, b2), steps, noun, copied, tail);
    return buf;
}
