// SPDX-License-Identifier: MIT
// hmap_t: open-addressing hash map from a uint64 key to a fixed-size value, stored inline.
// Linear probing over a power-of-two table, deletion by backward shift (no tombstones), so a
// table with millions of live blocks stays fast under endless alloc/free churn. Two variants:
// values kept out of line in a pool (hmap_init_pooled: made for replay's live blocks, which
// since session 13 have a table of their own, model/live_table.c; no user left but the tests),
// and, for keys that come in order, one direct slot per key
// (hmap_init_ordered: growth's own table when fed directly). Hot path of the analyzer.
// Not thread-safe; one owner.
#ifndef HEAPPROF_ANALYZER_HMAP_H
#define HEAPPROF_ANALYZER_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hmap {
    uint64_t *slots; // cap slots of `stride` words: key (0 = empty), then the value
    size_t stride;   // in 8-byte words
    size_t value_bytes;
    size_t cap;     // power of two
    size_t n;       // keys stored, including key 0
    size_t grow_at; // n of non-zero keys that triggers doubling
    unsigned shift; // 64 - log2(cap)
    bool has_zero;  // key 0 cannot mark a slot, so it lives beside the table
    bool ordered;   // keys are mostly consecutive: slot = the key's low bits, no probing
    struct hmap *over; // ordered: keys whose slot a later key took (scattered; NULL: none yet)
    uint64_t over_max; // ordered: the largest key ever moved to over
    size_t fast_lo;    // ordered: below this many keys the table is too displaced (hmap.c's
                       // rule, kept as a bound so the inline insert checks one compare)
    uint8_t *zero_value;
    uint8_t *taken; // hmap_take_ref's copy of a value whose slot was reused
    // pooled (hmap_init_pooled): a slot is the key and the index of its value in the pool
    bool pooled;
    uint8_t *pool;          // pool_cap values of vbytes each
    size_t vbytes;          // value_bytes rounded up to whole words
    size_t pool_n;          // values ever handed out: the ones below are in use or freed
    size_t pool_cap;        // room for this many (realloc'd: pages past pool_n stay unmapped)
    uint64_t pool_free;     // the last value given back (index + 1; 0: none), a chain through
                            // their first words
    uint64_t pool_pending;  // the value hmap_take_ref just gave back (index + 1): it joins the
                            // chain at the next change, so the caller may read it until then
    size_t pool_at;         // hmap_init_pooled: values stay in the slots until a doubling
                            // would make the slots this many bytes or more (0: not such a table)
} hmap_t;

// value_bytes > 0. Allocates a small table (exits on OOM, like every call below that grows).
void hmap_init(hmap_t *h, size_t value_bytes);
void hmap_fini(hmap_t *h);

// Pointer to the value of key, or NULL. Valid until the next hmap_put/hmap_take/hmap_del.
void *hmap_get(const hmap_t *h, uint64_t key);

// Value slot of key, inserted zero-filled if absent (*existed says which; may be NULL).
// May allocate (grows the table). The pointer is valid until the next modifying call.
static inline void *hmap_put(hmap_t *h, uint64_t key, bool *existed);

// The same for keys that mostly come in order, as trace v3's block serials did: key k
// lives in slot k mod capacity, or, when a later key took that slot while k was still live, in
// a small scattered table beside it. Blocks made together sit together, and a lookup, insert or
// delete touches one slot: no probe runs and no backward shift (which scanned 5.5 slots a
// delete on rust_vec_growth's 2.8 M live blocks and moved one 80-byte slot a delete on c_churn).
// When the displaced keys outnumber half of all keys (an eighth, while the table is under 2 MiB
// and doubling it costs little), the table doubles while that keeps it within 4 slots a key,
// then switches to the scrambling hash for good (keys that are addresses, keys forged to
// collide).
void hmap_init_ordered(hmap_t *h, size_t value_bytes);

// A scattered table whose values lie out of line, in a pool of their own: a slot is 16 bytes,
// the key and the index of its value. For big values in big tables (replay's live blocks:
// 24 bytes, 56 with growth's words, millions of them): the table keeps its room to probe (at
// most 3/4 full) without that room costing a whole value a slot, a doubling moves 16 bytes a
// key, not the values, and the pool only ever holds the values in use at the peak (a freed
// value is reused next, most recently freed first, so new blocks land on warm lines).
// Values do not move while their key stays, except when the pool itself grows (realloc).
// A small table keeps its values in its slots all the same (one cache miss a lookup, not two:
// the slot, then the value) and moves them to the pool at the doubling that would make its
// slots HMAP_POOL_AT bytes or more; values move then too, as any change may move them.
// value_bytes >= 8 (a freed value's first word chains it to the next).
void hmap_init_pooled(hmap_t *h, size_t value_bytes);
#define HMAP_POOL_AT ((size_t)32 << 20)
// For tests: pool from a doubling that makes the slots `bytes` or more (1: from the first).
// Call right after hmap_init_pooled.
void hmap_pool_from(hmap_t *h, size_t bytes);

// Removes key; copies its value to out (if non-NULL). Returns false if key was absent.
bool hmap_take(hmap_t *h, uint64_t key, void *out);

// Removes key and returns its value, or NULL if key was absent: hmap_take without the copy when
// the value can stay where it was. Valid until the next modifying call.
static inline void *hmap_take_ref(hmap_t *h, uint64_t key);

// The slot hash, whose high bits pick the home slot. Keys come from untrusted traces: with a
// single multiply, addresses that step by the multiplier's inverse (one repeated record, which
// zstd shrinks to nothing) all share one slot and a table fill takes hours; the xor-shift
// between two multiplies breaks up arithmetic progressions.
static inline uint64_t hmap_hash(uint64_t key) {
    key *= 0x9E3779B97F4A7C15ull;
    key ^= key >> 32;
    return key * 0xD6E8FEB86659FD93ull;
}

// Hints that key will be looked up soon: callers with a batch of keys issue this a few keys
// ahead so the cache misses of a big table overlap. No effect on the contents.
// always_inline: gcc 12 takes a function whose only effect is __builtin_prefetch for a const
// one and deletes the calls before inlining them; the analyzer had no prefetch instruction left.
static inline __attribute__((always_inline)) void hmap_prefetch(const hmap_t *h, uint64_t key) {
    size_t i = h->ordered ? (size_t)key & (h->cap - 1) : (size_t)(hmap_hash(key) >> h->shift);
    __builtin_prefetch(h->slots + i * h->stride, 1);
    // the slot's last word: replay's blocks with growth's words (64 bytes) mostly span two lines
    __builtin_prefetch(h->slots + i * h->stride + h->stride - 1, 1);
}

// hmap_prefetch for a table known to be ordered (hmap_init_ordered, not yet switched).
static inline __attribute__((always_inline)) void hmap_prefetch_ordered(const hmap_t *h,
                                                                       uint64_t key) {
    const uint64_t *s = h->slots + ((size_t)key & (h->cap - 1)) * h->stride;
    __builtin_prefetch(s, 1);
    __builtin_prefetch(s + h->stride - 1, 1);
}

// For a pooled table, the second half of a prefetch: finds key (whose slot an earlier
// hmap_prefetch should have brought in) and prefetches its value. No effect on the contents.
static inline __attribute__((always_inline)) void hmap_prefetch_value(const hmap_t *h,
                                                                     uint64_t key) {
    if (!h->pooled)
        return; // the value is in the slot hmap_prefetch fetched
    size_t mask = h->cap - 1;
    for (size_t i = (size_t)(hmap_hash(key) >> h->shift);; i = (i + 1) & mask) {
        const uint64_t *s = h->slots + 2 * i;
        if (s[0] == key) {
            const uint8_t *v = h->pool + s[1] * h->vbytes;
            __builtin_prefetch(v, 1);
            __builtin_prefetch(v + h->vbytes - 1, 1);
            return;
        }
        if (s[0] == 0)
            return;
    }
}

static inline size_t hmap_count(const hmap_t *h) { return h->n; }

// Iteration in table order: start with *it = 0; returns the next value and sets *key, or NULL
// at the end. The map must not be modified during iteration.
void *hmap_next(const hmap_t *h, size_t *it, uint64_t *key);

// ---- inline: an ordered table's own slot, the case of nearly every call on the analyzer's hot
// path. Everything else, and the same calls when the slot does not settle them, is in hmap.c;
// these must stay in step with it. callgrind counted 91 and 58 instructions a call in
// hmap_put and hmap_take (prologue, key 0, mode and overflow checks, the copy out) for what is
// a few loads and stores.

void *hmap_put_slow(hmap_t *h, uint64_t key, bool *existed);
void *hmap_take_ref_slow(hmap_t *h, uint64_t key);

static inline void hmap_zero_words(uint64_t *dst, size_t words) {
    switch (words) {
    case 8:
        dst[7] = 0;
        /* fall through */
    case 7:
        dst[6] = 0;
        /* fall through */
    case 6:
        dst[5] = 0;
        /* fall through */
    case 5:
        dst[4] = 0;
        /* fall through */
    case 4:
        dst[3] = 0;
        /* fall through */
    case 3:
        dst[2] = 0;
        /* fall through */
    case 2:
        dst[1] = 0;
        /* fall through */
    case 1:
        dst[0] = 0;
        /* fall through */
    case 0:
        return;
    default:
        for (size_t w = 0; w < words; w++)
            dst[w] = 0;
    }
}

static inline void *hmap_put(hmap_t *h, uint64_t key, bool *existed) {
    if (h->ordered && key != 0) {
        uint64_t *s = h->slots + ((size_t)key & (h->cap - 1)) * h->stride;
        if (s[0] == key) {
            if (existed)
                *existed = true;
            return s + 1;
        }
        // a free slot, a key above every displaced one (so not beside either), no rebuild due
        size_t n = h->n - h->has_zero;
        if (s[0] == 0 && key > h->over_max && n + 1 <= h->grow_at && n >= h->fast_lo) {
            if (existed)
                *existed = false;
            s[0] = key;
            hmap_zero_words(s + 1, h->stride - 1);
            h->n++;
            return s + 1;
        }
    }
    return hmap_put_slow(h, key, existed);
}

static inline void *hmap_take_ref(hmap_t *h, uint64_t key) {
    if (h->ordered && key != 0) {
        uint64_t *s = h->slots + ((size_t)key & (h->cap - 1)) * h->stride;
        if (s[0] == key) {
            // the slot is free now, its value words untouched until the next put
            s[0] = 0;
            h->n--;
            return s + 1;
        }
    }
    return hmap_take_ref_slow(h, key);
}

#endif
