// SPDX-License-Identifier: MIT
// The live table's rare paths: growth (the slots, in place; the pool), the rebuild under a new
// seed, and the tests' hooks. The per-event paths are inline in live_table.h.
#include "model/live_table.h"

#include "core/bigmem.h"
#include "core/xalloc.h"

#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/auxv.h>

#define LIVE_TABLE_MIN_CAP 64u
#define LIVE_TABLE_MIN_POOL 32u
// Below this many slots a table is at most half full, above it 3/4. An insert probes
// ~(1 + 1 / (1 - a)^2) / 2 slots at load a (2.5 at 1/2, 8.5 at 3/4), and a run past the
// prefetched line costs a miss: tables up to 256 K keys are cheap to keep sparse (at 1 MiB,
// one-thread `report` on a rust_hashmap_growth trace of 43 K live blocks took ~10% more CPU);
// big ones keep 3/4 (an 8-byte slot is an eighth of a line, so a run of 8 is one line, and
// rust_vec_growth's 2.8 M live blocks fit 4 M slots, 32 MiB, instead of 8 M).
#define LIVE_TABLE_SPARSE_SLOTS ((size_t)512 << 10)

// The slots and the pool are probed at random, one slot and one value an event, over hundreds
// of MiB for the big traces: with 4 KiB pages nearly every probe also missed the TLB. So both
// live in big_alloc's memory, on 2 MiB pages that survive their growth (core/bigmem.h).

static void set_cap(live_table_t *t, size_t cap) {
    if (cap > ((size_t)1 << 31))
        xalloc_fail(SIZE_MAX); // 2^31 slots of one table: out of memory long before, in fact
    t->cap = cap;
    t->mask = cap - 1;
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap)
        bits++;
    t->shift = 32 - bits;
    t->grow_at = cap < LIVE_TABLE_SPARSE_SLOTS ? cap / 2 : cap / 4 * 3;
}

// Fresh zeroed slots (written, not calloc'd: a fresh mapping read first maps the shared zero
// page, and the write after it is a copy-on-write fault that flushes the TLB of every CPU
// running the process).
static live_slot_t *slots_alloc(size_t cap) {
    live_slot_t *s = big_alloc(cap * sizeof *s);
    memset(s, 0, cap * sizeof *s);
    return s;
}

void live_table_init(live_table_t *t, size_t value_bytes) {
    memset(t, 0, sizeof *t);
    t->key_off = (value_bytes + 7) & ~(size_t)7;
    t->vshift = 3;
    while (((size_t)1 << t->vshift) < t->key_off + sizeof(uint64_t))
        t->vshift++;
    set_cap(t, LIVE_TABLE_MIN_CAP);
    t->slots = slots_alloc(t->cap);
    t->pool_cap = LIVE_TABLE_MIN_POOL;
    t->pool = big_alloc(t->pool_cap << t->vshift);
    t->free_cap = t->pool_cap;
    t->free = xmalloc(t->free_cap * sizeof *t->free);
}

void live_table_fini(live_table_t *t) {
    big_free(t->slots, t->cap * sizeof *t->slots);
    big_free(t->pool, t->pool_cap << t->vshift);
    free(t->free);
    memset(t, 0, sizeof *t);
}

// Puts s at the end of its probe run (a table being rebuilt or grown, or a new key).
static size_t place(live_table_t *t, live_slot_t s) {
    size_t i = s.hash >> t->shift;
    while (t->slots[i].vi)
        i = (i + 1) & t->mask;
    t->slots[i] = s;
    return i;
}

// Doubles the slots where they lie: extended by big_realloc (mremap: no copy, never
// the old table and the new at once). A key's home in the doubled table is twice its old home,
// or that plus one, so the old slots are taken out from the top down and each put at the end of
// its new run, which then lies at or above the slot it came from: a run only crosses slots
// already done. A key whose run would reach into the slots not done yet (a run that wraps past
// the end, or a key that sat further from its home than the home's own index) waits in a list
// and goes in at the end. The same as hmap.c's grow_pooled, with the hash kept in the slot.
static void grow(live_table_t *t) {
    size_t old_cap = t->cap;
    t->slots = big_realloc(t->slots, old_cap * sizeof *t->slots, 2 * old_cap * sizeof *t->slots);
    memset(t->slots + old_cap, 0, old_cap * sizeof *t->slots);
    set_cap(t, 2 * old_cap);
    live_slot_t *later = NULL;
    size_t n_later = 0, later_cap = 0;
    for (size_t p = old_cap; p-- > 0;) {
        live_slot_t s = t->slots[p];
        if (!s.vi)
            continue;
        t->slots[p].vi = 0;
        size_t i = s.hash >> t->shift;
        while (i >= p && t->slots[i].vi)
            i = (i + 1) & t->mask;
        if (i >= p) {
            t->slots[i] = s;
            continue;
        }
        later = xgrow(later, &later_cap, n_later + 1, sizeof *later);
        later[n_later++] = s;
    }
    for (size_t k = 0; k < n_later; k++)
        place(t, later[k]);
    free(later);
}

// Rebuilds the slots under a new seed (the values stay where they are).
static void rebuild(live_table_t *t, uint64_t seed) {
    live_slot_t *old = t->slots;
    t->seed = seed;
    t->slots = slots_alloc(t->cap);
    for (size_t j = 0; j < t->cap; j++) {
        if (!old[j].vi)
            continue;
        live_slot_t s = old[j];
        s.hash = live_table_hash(t, live_table_key_of(t, s.vi));
        place(t, s);
    }
    big_free(old, t->cap * sizeof *old);
}

// A seed nobody outside can guess: the process's random bytes from the kernel (AT_RANDOM),
// the table's address and a count, mixed (splitmix64's finalizer).
static uint64_t random_seed(const live_table_t *t) {
    static _Atomic uint64_t count;
    uint64_t x = atomic_fetch_add(&count, 1) * 0x9E3779B97F4A7C15ull ^ (uintptr_t)t;
    const uint64_t *r = (const uint64_t *)getauxval(AT_RANDOM);
    if (r) {
        uint64_t w;
        memcpy(&w, r, sizeof w);
        x ^= w;
    }
    x ^= x >> 30;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 27;
    x *= 0x94D049BB133111EBull;
    x ^= x >> 31;
    return x;
}

// Why live_table_put_index did not settle it: the table is due to double, the pool is full, or
// key's probe run is too long. key is absent (the inline loop met an empty slot first).
uint32_t live_table_put_slow(live_table_t *t, uint64_t key, uint32_t hash, bool *existed) {
    *existed = false;
    if (t->n + 1 > t->grow_at) {
        grow(t);
    } else if (t->cap > t->reseed_cap) {
        // a long run below the load limit: keys forged to collide under the seed (or, at 3/4
        // full, a run of 512 by chance: ~1e-8 an insert). A new seed breaks them up; at most
        // once per doubling, so a rebuild costs no more than the doublings themselves.
        size_t i = hash >> t->shift, probes = 0;
        while (t->slots[i].vi) {
            i = (i + 1) & t->mask;
            probes++;
        }
        if (probes > LIVE_TABLE_PROBE_MAX) {
            t->reseed_cap = t->cap;
            rebuild(t, random_seed(t));
            hash = live_table_hash(t, key);
        }
    }
    uint32_t v;
    if (t->n_free) {
        v = t->free[--t->n_free];
    } else {
        if (t->pool_n == t->pool_cap) {
            if (t->pool_cap >= UINT32_MAX / 2)
                xalloc_fail(SIZE_MAX); // 2^31 values of one table: out of memory, in fact
            // moved by mremap, without a copy, and the pages past pool_n are not touched until
            // used
            t->pool = big_realloc(t->pool, t->pool_cap << t->vshift, 2 * t->pool_cap << t->vshift);
            t->pool_cap *= 2;
            // room for every value given back: live_table_take_index never grows it
            t->free = xrealloc(t->free, t->pool_cap * sizeof *t->free);
            t->free_cap = t->pool_cap;
        }
        v = (uint32_t)t->pool_n++;
    }
    live_table_set_key(t, v, key);
    place(t, (live_slot_t){.vi = v + 1, .hash = hash});
    t->n++;
    return v;
}

void live_table_set_seed(live_table_t *t, uint64_t seed) { rebuild(t, seed); }

size_t live_table_max_probe(const live_table_t *t) {
    size_t max = 0;
    for (size_t j = 0; j < t->cap; j++) {
        if (!t->slots[j].vi)
            continue;
        size_t d = (j - (t->slots[j].hash >> t->shift)) & t->mask;
        if (d > max)
            max = d;
    }
    return max;
}
