// SPDX-License-Identifier: MIT
// Stack interning: an open-addressing table read without locks (entries are published with a
// release store of their hash) and grown under a lock by copying into a new table; old tables
// are never freed, so a reader holding one stays safe. Runs inside malloc: no host allocation.
#include "stacktab.h"

#include "debug.h"
#include "mem.h"

#include <pthread.h>
#include <stdatomic.h>
#include <string.h>

typedef struct entry {
    _Atomic uint64_t hash; // 0 = empty; published last
    uint32_t id;
    uint32_t n;
    const uint64_t *frames;
} entry_t;

typedef struct table {
    uint64_t mask;
    uint64_t used;
    entry_t slots[];
} table_t;

static _Atomic(table_t *) cur;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static hp_arena_t arena;
static uint32_t next_id = 1;
static _Atomic uint64_t n_overflow;

static uint64_t stack_hash(const uint64_t *f, uint32_t n) {
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    for (uint32_t i = 0; i < n; i++) {
        h = (h ^ f[i]) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    return h ? h : 1;
}

static const entry_t *find(const table_t *t, uint64_t h, const uint64_t *f, uint32_t n) {
    for (uint64_t i = h & t->mask;; i = (i + 1) & t->mask) {
        const entry_t *e = &t->slots[i];
        uint64_t eh = atomic_load_explicit(&e->hash, memory_order_acquire);
        if (!eh)
            return NULL;
        if (eh == h && e->n == n && !memcmp(e->frames, f, n * sizeof *f))
            return e;
    }
}

// Whether any slot of t holds the stack, looked for without the probe sequence (a check of
// HEAPPROF_DEBUG_FULL builds; unused, it costs nothing).
__attribute__((unused)) static bool table_holds(const table_t *t, uint64_t h, const uint64_t *f, uint32_t n) {
    for (uint64_t i = 0; i <= t->mask; i++) {
        const entry_t *e = &t->slots[i];
        if (atomic_load_explicit(&e->hash, memory_order_relaxed) == h && e->n == n &&
            !memcmp(e->frames, f, n * sizeof *f))
            return true;
    }
    return false;
}

static table_t *table_new(uint64_t slots) {
    return hp_mem_map(sizeof(table_t) + slots * sizeof(entry_t));
}

static void put(table_t *t, uint64_t h, uint32_t id, uint32_t n, const uint64_t *frames) {
    // a free slot ends every probe (find, and this loop): the table stays at most half full
    HP_ASSERT(h != 0 && id != HPT_STACK_UNKNOWN && (t->used + 1) * 2 <= t->mask + 1);
    uint64_t i = h & t->mask;
    while (atomic_load_explicit(&t->slots[i].hash, memory_order_relaxed))
        i = (i + 1) & t->mask;
    entry_t *e = &t->slots[i];
    e->id = id;
    e->n = n;
    e->frames = frames;
    atomic_store_explicit(&e->hash, h, memory_order_release);
    t->used++;
}

// Called with the lock held: a table with room for one more entry at load <= 1/2, or NULL.
static table_t *table_with_room(void) {
    table_t *t = atomic_load_explicit(&cur, memory_order_relaxed);
    if (t && (t->used + 1) * 2 <= t->mask + 1)
        return t;
    uint64_t slots = t ? (t->mask + 1) * 2 : 4096;
    table_t *nt = table_new(slots);
    if (!nt)
        return NULL;
    nt->mask = slots - 1;
    HP_ASSERT(!(slots & (slots - 1)));
    if (t)
        for (uint64_t i = 0; i <= t->mask; i++) {
            const entry_t *e = &t->slots[i];
            uint64_t h = atomic_load_explicit(&e->hash, memory_order_relaxed);
            if (h)
                put(nt, h, e->id, e->n, e->frames);
        }
    HP_ASSERT(!t || nt->used == t->used); // every entry moved, none lost
    atomic_store_explicit(&cur, nt, memory_order_release);
    return nt;
}

// Encodes the STACK record of frames f[0..n) as id into buf (HP_REC_MAX bytes); its length.
static size_t encode_stack_record(uint8_t *buf, uint32_t id, const uint64_t *f, uint32_t n) {
    uint8_t *p = buf;
    *p++ = HPT_REC_STACK;
    p = hpt_put_varint(p, id);
    p = hpt_put_varint(p, n);
    for (uint32_t i = 0; i < n; i++)
        p = hpt_put_varint(p, i == 0 ? f[0] : hpt_zigzag((int64_t)(f[i] - f[i - 1])));
    HP_ASSERT((size_t)(p - buf) <= HP_REC_MAX);
    return (size_t)(p - buf);
}

void hp_stacktab_each_record(void (*emit)(void *ctx, const uint8_t *rec, size_t len), void *ctx) {
    uint8_t buf[HP_REC_MAX];
    pthread_mutex_lock(&lock);
    const table_t *t = atomic_load_explicit(&cur, memory_order_relaxed);
    for (uint64_t i = 0; t && i <= t->mask; i++) {
        const entry_t *e = &t->slots[i];
        if (atomic_load_explicit(&e->hash, memory_order_relaxed))
            emit(ctx, buf, encode_stack_record(buf, e->id, e->frames, e->n));
    }
    pthread_mutex_unlock(&lock);
}

static void emit_stack_record(hp_ring_t *r, uint32_t id, const uint64_t *f, uint32_t n) {
    uint8_t buf[HP_REC_MAX];
    uint8_t *p = buf;
    *p++ = HPT_REC_STACK;
    p = hpt_put_varint(p, id);
    p = hpt_put_varint(p, n);
    for (uint32_t i = 0; i < n; i++)
        p = hpt_put_varint(p, i == 0 ? f[0] : hpt_zigzag((int64_t)(f[i] - f[i - 1])));
    HP_ASSERT((size_t)(p - buf) <= sizeof buf);
    hp_tbuf_append(r, buf, (size_t)(p - buf));
}

uint32_t hp_stacktab_intern(hp_ring_t *r, const uint64_t *f, uint32_t n) {
    if (!n)
        return HPT_STACK_UNKNOWN;
    HP_ASSERT(n <= HPT_MAX_FRAMES); // the STACK record's buffer and the reader's limit
    uint64_t h = stack_hash(f, n);
    pthread_mutex_lock(&lock);
    uint32_t id = HPT_STACK_UNKNOWN;
    table_t *t = atomic_load_explicit(&cur, memory_order_relaxed);
    const entry_t *e = t ? find(t, h, f, n) : NULL;
    if (e) {
        id = e->id;
        HP_ASSERT(id != HPT_STACK_UNKNOWN && id < next_id);
    } else if ((t = table_with_room())) {
        HP_ASSERT_EXPENSIVE(!table_holds(t, h, f, n)); // find's probe missed nothing
        HP_ASSERT(next_id < UINT32_MAX);
        uint64_t *copy = hp_arena_alloc(&arena, n * sizeof *f);
        if (copy) {
            memcpy(copy, f, n * sizeof *f);
            id = next_id++;
            emit_stack_record(r, id, f, n);
            put(t, h, id, n, copy);
        }
    }
    if (id == HPT_STACK_UNKNOWN)
        atomic_fetch_add_explicit(&n_overflow, 1, memory_order_relaxed);
    pthread_mutex_unlock(&lock);
    return id;
}

uint32_t hp_stacktab_find(const uint64_t *frames, uint32_t n) {
    uint64_t h = stack_hash(frames, n);
    const table_t *t = atomic_load_explicit(&cur, memory_order_acquire);
    const entry_t *e = t ? find(t, h, frames, n) : NULL;
    return HP_LIKELY(e != NULL) ? e->id : HPT_STACK_UNKNOWN;
}

uint64_t hp_stacktab_count(void) {
    return next_id - 1;
}

uint64_t hp_stacktab_overflows(void) {
    return atomic_load_explicit(&n_overflow, memory_order_relaxed);
}

void hp_stacktab_fork_prepare(void) {
    pthread_mutex_lock(&lock);
}

void hp_stacktab_fork_parent(void) {
    pthread_mutex_unlock(&lock);
}

void hp_stacktab_fork_child(void) {
    // The child writes a new trace, so every stack must be defined again in it. The parent's
    // tables stay mapped (they are copy-on-write pages the child never touches again).
    atomic_store_explicit(&cur, NULL, memory_order_relaxed);
    arena.cur = arena.end = NULL;
    next_id = 1;
    atomic_store_explicit(&n_overflow, 0, memory_order_relaxed);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    lock = fresh;
}
