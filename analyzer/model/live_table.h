// SPDX-License-Identifier: MIT
// live_table_t: replay's live blocks, address -> a fixed-size value (replay_block_t and a
// companion's words). Made for that one job (replay.c is its only user): open addressing with
// linear probing over 8-byte slots (the value's index in a pool and the key's hash), the values
// in a pool beside, each with its key in its last word, deletion by backward shift. So a put, a
// take and a get are a few loads inline, a delete moves 8-byte slots and recomputes no hash, a
// take copies nothing (the value stays in the pool until the next put), a value keeps its index
// while its key stays (replay's shards remember blocks by index, replay_shard_fix), and a
// doubling moves slots, not values. The key sits with the value because the value is read
// anyway when its key is found (the block's size, time and site): a slot that matches the hash
// costs no line the lookup would not have loaded, and the slots, a quarter to a half of the
// table's bytes with the key in them, are half as many lines (~11-21 bytes less a live block). Any key
// is a key, 0 included (an empty slot is one whose index word is 0).
// Keys come from untrusted traces: the hash is seeded, and a put that probes more than
// LIVE_TABLE_PROBE_MAX slots rebuilds the table with a fresh random seed (at most once per
// doubling), so keys forged to share one home slot cost linear time, not quadratic.
// Not thread-safe; one owner.
#ifndef HEAPPROF_ANALYZER_LIVE_TABLE_H
#define HEAPPROF_ANALYZER_LIVE_TABLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct live_slot {
    uint32_t vi;   // the value's pool index + 1; 0: an empty slot
    uint32_t hash; // live_table_hash(key): its top bits are the home slot
} live_slot_t;

typedef struct live_table {
    live_slot_t *slots;
    size_t cap;       // power of two, at most 2^31
    size_t mask;      // cap - 1
    unsigned shift;   // 32 - log2(cap): home = hash >> shift
    size_t n;         // keys stored
    size_t grow_at;   // n that makes it double
    uint64_t seed;    // the hash's (0 until a long probe asks for a random one)
    size_t reseed_cap; // cap at the last rebuild under a new seed (one per doubling at most)
    uint8_t *pool;    // pool_cap values of 1 << vshift bytes, the key in each one's last word
    unsigned vshift;
    size_t key_off;   // where a value's key is: the value's bytes rounded up to a word
    size_t pool_n, pool_cap; // values ever handed out; room
    uint32_t *free; // indexes of values given back, the latest last (reused first: warm lines)
    size_t n_free, free_cap;
} live_table_t;

#define LIVE_TABLE_PROBE_MAX 512u

// value_bytes >= 1; a value and its key get a power of two of bytes (24 -> 32, 56 -> 64), so
// none straddles two cache lines. Exits on OOM, like every call below that grows.
void live_table_init(live_table_t *t, size_t value_bytes);
void live_table_fini(live_table_t *t);

// The slot hash (32 bits, the home slot is its top bits). Two multiplies with an xor-shift
// between (as hmap_hash: arithmetic progressions, one repeated record, do not share a slot),
// after the seed.
static inline uint32_t live_table_hash(const live_table_t *t, uint64_t key) {
    uint64_t h = (key ^ t->seed) * 0x9E3779B97F4A7C15ull;
    h ^= h >> 32;
    h *= 0xD6E8FEB86659FD93ull;
    return (uint32_t)(h >> 32);
}

static inline void *live_table_value(const live_table_t *t, uint32_t index) {
    return t->pool + ((size_t)index << t->vshift);
}

// The key of the value a slot names (vi: its index + 1).
static inline uint64_t live_table_key_of(const live_table_t *t, uint32_t vi) {
    uint64_t k;
    memcpy(&k, t->pool + ((size_t)(vi - 1) << t->vshift) + t->key_off, sizeof k);
    return k;
}
static inline void live_table_set_key(live_table_t *t, uint32_t index, uint64_t key) {
    memcpy(t->pool + ((size_t)index << t->vshift) + t->key_off, &key, sizeof key);
}

// Whether slot s holds key, whose hash is h: the hash first, so a slot of another key costs
// no load of its value (a 32-bit hash shared by two keys: one in 2^32).
static inline bool live_table_slot_is(const live_table_t *t, const live_slot_t *s, uint64_t key,
                                      uint32_t h) {
    return s->hash == h && live_table_key_of(t, s->vi) == key;
}

// The calls named _h take the key's hash from the caller, which must be live_table_hash(t, key)
// under the current seed (only a put may change it: compare t->seed after a put); the plain
// ones compute it. (replay_shard_find kept each hash from its prefetch to its lookup in a ring:
// no instruction saved, so it computes the hash twice.)

// Hints that a key of hash h will be looked up soon (its slot). No effect on the contents.
// always_inline: gcc may take a function whose only effect is a prefetch for a const one.
static inline __attribute__((always_inline)) void live_table_prefetch_h(const live_table_t *t,
                                                                       uint32_t h) {
    __builtin_prefetch(&t->slots[h >> t->shift], 1);
}

static inline __attribute__((always_inline)) void live_table_prefetch(const live_table_t *t,
                                                                     uint64_t key) {
    live_table_prefetch_h(t, live_table_hash(t, key));
}

// Finds the slot of the key whose hash is h (which an earlier prefetch should have brought in)
// by the hash alone, and prefetches its value. No effect on the contents.
static inline __attribute__((always_inline)) void
live_table_prefetch_value_h(const live_table_t *t, uint32_t h) {
    for (size_t i = h >> t->shift;; i = (i + 1) & t->mask) {
        const live_slot_t *s = &t->slots[i];
        if (!s->vi)
            return;
        if (s->hash == h) {
            __builtin_prefetch(live_table_value(t, s->vi - 1), 1);
            return;
        }
    }
}

static inline __attribute__((always_inline)) void live_table_prefetch_value(const live_table_t *t,
                                                                           uint64_t key) {
    live_table_prefetch_value_h(t, live_table_hash(t, key));
}

// The index of key's value, or -1 if absent.
static inline int64_t live_table_find_h(const live_table_t *t, uint64_t key, uint32_t h) {
    for (size_t i = h >> t->shift;; i = (i + 1) & t->mask) {
        const live_slot_t *s = &t->slots[i];
        if (!s->vi)
            return -1;
        if (live_table_slot_is(t, s, key, h))
            return (int64_t)s->vi - 1;
    }
}

static inline int64_t live_table_find(const live_table_t *t, uint64_t key) {
    return live_table_find_h(t, key, live_table_hash(t, key));
}

// key's value, or NULL. Valid until the next put (the pool may move then).
static inline void *live_table_get(const live_table_t *t, uint64_t key) {
    int64_t v = live_table_find(t, key);
    return v < 0 ? NULL : live_table_value(t, (uint32_t)v);
}

uint32_t live_table_put_slow(live_table_t *t, uint64_t key, uint32_t hash, bool *existed);

// The index of key's value, inserted if absent (*existed says which). A new value's bytes are
// whatever they were (the caller writes them; live_table_put zeroes them), but for its key.
static inline uint32_t live_table_put_index_h(live_table_t *t, uint64_t key, uint32_t h,
                                              bool *existed) {
    size_t i = h >> t->shift, probes = 0;
    for (;; i = (i + 1) & t->mask, probes++) {
        live_slot_t *s = &t->slots[i];
        if (!s->vi)
            break;
        if (live_table_slot_is(t, s, key, h)) {
            *existed = true;
            return s->vi - 1;
        }
    }
    // the common case: room in the table, a value given back earlier or never used
    if (__builtin_expect(t->n < t->grow_at && probes <= LIVE_TABLE_PROBE_MAX, 1)) {
        uint32_t v;
        if (t->n_free)
            v = t->free[--t->n_free];
        else if (t->pool_n < t->pool_cap)
            v = (uint32_t)t->pool_n++;
        else
            return live_table_put_slow(t, key, h, existed);
        *existed = false;
        live_table_set_key(t, v, key);
        t->slots[i] = (live_slot_t){.vi = v + 1, .hash = h};
        t->n++;
        return v;
    }
    return live_table_put_slow(t, key, h, existed);
}

static inline uint32_t live_table_put_index(live_table_t *t, uint64_t key, bool *existed) {
    return live_table_put_index_h(t, key, live_table_hash(t, key), existed);
}

// key's value, inserted zero-filled if absent. Valid until the next put.
static inline void *live_table_put(live_table_t *t, uint64_t key, bool *existed) {
    uint32_t v = live_table_put_index(t, key, existed);
    void *p = live_table_value(t, v);
    if (!*existed) {
        // the value up to its key, in stores of a size known here: a loop over value_bytes'
        // words cost ~55 instructions a put (callgrind, report's replay on c_churn, a 56-byte
        // value)
        if (t->key_off == 24)
            memset(p, 0, 24);
        else if (t->key_off == 56)
            memset(p, 0, 56);
        else
            memset(p, 0, t->key_off);
    }
    return p;
}

// Empties slot i, whose key was just taken out: later members of its probe run move back into
// the hole when their home does not lie cyclically in (hole, j] (Knuth 6.4 algorithm R). The
// values stay where they are.
static inline void live_table_unlink(live_table_t *t, size_t i) {
    const size_t mask = t->mask;
    const unsigned shift = t->shift;
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        const live_slot_t *s = &t->slots[j];
        if (!s->vi)
            break;
        size_t home = s->hash >> shift;
        if (((j - home) & mask) >= ((j - i) & mask)) {
            t->slots[i] = *s;
            i = j;
        }
    }
    t->slots[i].vi = 0;
}

// Removes key and returns its value's index, or -1 if absent. The value stays as it was until
// the next put (which may reuse it).
static inline int64_t live_table_take_index_h(live_table_t *t, uint64_t key, uint32_t h) {
    for (size_t i = h >> t->shift;; i = (i + 1) & t->mask) {
        live_slot_t *s = &t->slots[i];
        if (!s->vi)
            return -1;
        if (live_table_slot_is(t, s, key, h)) {
            uint32_t v = s->vi - 1;
            live_table_unlink(t, i);
            t->n--;
            // free_cap >= pool_n > the values in use (live_table_put_slow): no growth here
            t->free[t->n_free++] = v;
            return v;
        }
    }
}

static inline int64_t live_table_take_index(live_table_t *t, uint64_t key) {
    return live_table_take_index_h(t, key, live_table_hash(t, key));
}

// Removes key and returns its value (valid until the next put), or NULL if absent.
static inline void *live_table_take(live_table_t *t, uint64_t key) {
    int64_t v = live_table_take_index(t, key);
    return v < 0 ? NULL : live_table_value(t, (uint32_t)v);
}

static inline size_t live_table_count(const live_table_t *t) { return t->n; }

// For tests: sets the seed and rebuilds (a test forges keys that collide under it).
void live_table_set_seed(live_table_t *t, uint64_t seed);
// For tests: the longest probe run from a key's home to its slot.
size_t live_table_max_probe(const live_table_t *t);

#endif
