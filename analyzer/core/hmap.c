// SPDX-License-Identifier: MIT
// Open addressing with linear probing and backward-shift deletion (Knuth 6.4 algorithm R); a
// pooled table keeps its values in an array beside the slots; for keys that come in order
// (hmap_init_ordered) one direct slot per key with a table of the displaced beside. Keys are
// heap addresses (multiples of 16) and small ids, so the hash must move entropy from the middle
// bits to the top: multiply, keep the high bits (hmap_hash in the header, which also keeps
// forged keys from piling up in one slot). The high bits also make doubling simple: a key's
// home in the doubled table is twice its old one, or that plus one (grow_pooled).
// Slots are whole 8-byte words and copied word by word: a runtime-sized memcpy per probe step
// would be a libc call on the hottest path of the analyzer.
#include "core/hmap.h"

#include "core/bigmem.h"
#include "core/xalloc.h"

#include <stdlib.h>
#include <string.h>

#define HMAP_MIN_CAP 64u

static inline size_t home(const hmap_t *h, uint64_t key) {
    return h->ordered ? (size_t)key & (h->cap - 1) : (size_t)(hmap_hash(key) >> h->shift);
}

// Word copy with the common sizes spelled out: a loop over a runtime count costs a branch per
// word and is never unrolled. The switch is predicted perfectly (one table, one stride). Up to
// 8: a slot of replay's live blocks with growth's words attached (replay_set_companion).
static inline void copy_words(uint64_t *dst, const uint64_t *src, size_t words) {
    switch (words) {
    case 8:
        dst[7] = src[7];
        /* fall through */
    case 7:
        dst[6] = src[6];
        /* fall through */
    case 6:
        dst[5] = src[5];
        /* fall through */
    case 5:
        dst[4] = src[4];
        /* fall through */
    case 4:
        dst[3] = src[3];
        /* fall through */
    case 3:
        dst[2] = src[2];
        /* fall through */
    case 2:
        dst[1] = src[1];
        /* fall through */
    case 1:
        dst[0] = src[0];
        return;
    default:
        for (size_t w = 0; w < words; w++)
            dst[w] = src[w];
    }
}


#define HMAP_SMALL_BYTES (2u << 20)

// Ordered mode pays off while few keys are displaced. When they outnumber half of all keys, the
// keys are not consecutive enough for the capacity: double it while that keeps the table within
// 4 slots a key, else switch to the scrambling hash for good. A rebuild happens at most once
// per doubling of the displaced keys, so a forged trace cannot make the table quadratic. A table
// that fits in the cache doubles sooner, at an eighth: a displaced key costs a hash probe of the
// table beside (c_churn's 4,097 live blocks kept 25% there in 8 K slots, 2% in 16 K).
// The rule as a bound on the key count (fast_lo: too displaced below it), which hmap_put's
// inline path compares with. Recomputed when keys move beside or the capacity changes; keys
// taken from beside only lower the true bound, so a stale one sends inserts to the slow path,
// which recomputes it.
static void update_fast_lo(hmap_t *h) {
    if (!h->over || h->over->n <= 64) {
        h->fast_lo = 0;
        return;
    }
    bool small = h->cap * h->stride * sizeof(uint64_t) < HMAP_SMALL_BYTES;
    // over->n > n / k + 64  <=>  n < k * (over->n - 64)
    h->fast_lo = (small ? 8 : 2) * (h->over->n - 64);
}

static bool too_displaced(hmap_t *h) {
    update_fast_lo(h);
    return h->n - h->has_zero < h->fast_lo;
}

// The figures that follow from the capacity; the slots are the caller's.
static void set_cap(hmap_t *h, size_t cap) {
    h->cap = cap;
    // Scattered keys: at most half full. Linear probing's runs (and the backward shift of every
    // delete) grow fast past that: c_churn's 4,097 live blocks in 16 K slots instead of 8 K make
    // report 20% faster. Pooled: 3/4, since a 16-byte slot is a quarter of a line (a run of 4
    // slots is one line) and the room costs no value a slot; rust_vec_growth's 2.8 M live
    // blocks fit 4 M slots (64 MiB) instead of 8 M. Ordered keys sit in runs of their own
    // making (hmap_init_ordered): 0.7, since their tables were the big ones (rust_vec_growth
    // with trace v3's serials: 0.5 there cost 84% more memory and 30% more time).
    h->grow_at = h->ordered ? cap / 10 * 7 : h->pooled ? cap / 4 * 3 : cap / 2;
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap)
        bits++;
    h->shift = 64 - bits;
    update_fast_lo(h);
}

// A big table's slots and pool are probed at random over hundreds of MiB, where with 4 KiB
// pages nearly every probe also missed the TLB: both live in big_alloc's memory, on 2 MiB pages
// that survive their growth (core/bigmem.h; malloc below 8 MiB).
static size_t slots_bytes(const hmap_t *h) { return h->cap * h->stride * sizeof(uint64_t); }

static void table_alloc(hmap_t *h, size_t cap) {
    // written, not calloc'd: a fresh mapping read first (the slot checks of place) maps the
    // shared zero page, and the write after it is a copy-on-write fault that flushes the TLB of
    // every CPU running the process (an IPI to the reading thread per 4 KiB page): 16% of
    // report's time on rust_hashmap_growth's growing tables
    size_t bytes = cap * h->stride * sizeof(uint64_t);
    h->slots = big_alloc(bytes);
    memset(h->slots, 0, bytes);
    set_cap(h, cap);
}

void hmap_init(hmap_t *h, size_t value_bytes) {
    memset(h, 0, sizeof *h);
    h->value_bytes = value_bytes;
    h->vbytes = (value_bytes + 7) / 8 * 8;
    h->stride = 1 + h->vbytes / 8;
    h->zero_value = xcalloc(1, value_bytes);
    h->taken = xcalloc(1, value_bytes);
    table_alloc(h, HMAP_MIN_CAP);
}

void hmap_init_pooled(hmap_t *h, size_t value_bytes) {
    // values in the slots until the table is big (to_pooled)
    hmap_init(h, value_bytes < 8 ? 8 : value_bytes);
    h->value_bytes = value_bytes;
    h->pool_at = HMAP_POOL_AT;
}

void hmap_pool_from(hmap_t *h, size_t bytes) { h->pool_at = bytes ? bytes : 1; }

void hmap_fini(hmap_t *h) {
    if (h->over) {
        hmap_fini(h->over);
        free(h->over);
    }
    big_free(h->slots, slots_bytes(h));
    big_free(h->pool, h->pool_cap * h->vbytes);
    free(h->zero_value);
    free(h->taken);
    memset(h, 0, sizeof *h);
}

// ---- pooled values (hmap_init_pooled) ----

// A slot's value: in the slot, or the pool's entry its second word names.
static inline void *slot_value(const hmap_t *h, uint64_t *s) {
    return h->pooled ? (void *)(h->pool + s[1] * h->vbytes) : (void *)(s + 1);
}

// Chains the value hmap_take_ref gave back last: from now on it may be reused.
static inline void pool_settle(hmap_t *h) {
    if (h->pool_pending) {
        uint64_t i = h->pool_pending - 1;
        *(uint64_t *)(h->pool + i * h->vbytes) = h->pool_free;
        h->pool_free = i + 1;
        h->pool_pending = 0;
    }
}

// A value's index for a new key: the one given back last (its lines are likely still cached),
// else the next never used. The caller zeroes it.
static uint64_t pool_take(hmap_t *h) {
    pool_settle(h);
    if (h->pool_free) {
        uint64_t i = h->pool_free - 1;
        h->pool_free = *(uint64_t *)(h->pool + i * h->vbytes);
        // the next allocation takes the next value on the list, given back maybe long ago:
        // its line is fetched now, while this event and the next are replayed
        if (h->pool_free)
            __builtin_prefetch(h->pool + (h->pool_free - 1) * h->vbytes, 1);
        return i;
    }
    if (h->pool_n == h->pool_cap) {
        // grown, not a fresh block: a big one moves by mremap, without a copy and without
        // holding both, and the pages past pool_n are not touched until used
        h->pool = big_realloc(h->pool, h->pool_cap * h->vbytes, 2 * h->pool_cap * h->vbytes);
        h->pool_cap *= 2;
    }
    return h->pool_n++;
}

// Gives value i back; it stays readable until the next change (hmap_take_ref's promise).
static inline void pool_give(hmap_t *h, uint64_t i) {
    pool_settle(h);
    h->pool_pending = i + 1;
}

// ---- ordered mode: one slot per key, the displaced beside (hmap_init_ordered) ----

static inline uint64_t *direct_slot(const hmap_t *h, uint64_t key) {
    return h->slots + ((size_t)key & (h->cap - 1)) * h->stride;
}

// Puts key and its value words into the overflow table.
static void to_overflow(hmap_t *h, uint64_t key, const uint64_t *value) {
    if (!h->over) {
        h->over = xmalloc(sizeof *h->over);
        hmap_init(h->over, h->value_bytes);
    }
    copy_words(hmap_put(h->over, key, NULL), value, h->stride - 1);
    if (key > h->over_max)
        h->over_max = key;
    update_fast_lo(h);
}

static inline void *over_get(const hmap_t *h, uint64_t key) {
    return h->over && key <= h->over_max ? hmap_get(h->over, key) : NULL;
}

void *hmap_get(const hmap_t *h, uint64_t key) {
    if (key == 0)
        return h->has_zero ? h->zero_value : NULL;
    if (h->ordered) {
        uint64_t *s = direct_slot(h, key);
        return s[0] == key ? s + 1 : over_get(h, key);
    }
    size_t mask = h->cap - 1;
    for (size_t i = home(h, key);; i = (i + 1) & mask) {
        uint64_t *s = h->slots + i * h->stride;
        if (s[0] == key)
            return slot_value(h, s);
        if (s[0] == 0)
            return NULL;
    }
}

// Puts key and its value words into a table being rebuilt: its slot in ordered mode (a taken
// slot sends the newcomer beside), the end of its probe run otherwise.
static void place(hmap_t *h, uint64_t key, const uint64_t *value) {
    uint64_t *s;
    if (h->ordered) {
        s = direct_slot(h, key);
        if (s[0] != 0) {
            to_overflow(h, key, value);
            return;
        }
    } else {
        size_t mask = h->cap - 1, i = home(h, key);
        while (h->slots[i * h->stride] != 0)
            i = (i + 1) & mask;
        s = h->slots + i * h->stride;
    }
    s[0] = key;
    copy_words(s + 1, value, h->stride - 1);
}

// Puts every key of a table taken out of h (its old overflow) back into h, and frees that table.
static void place_all_of(hmap_t *h, hmap_t *from) {
    if (!from)
        return;
    size_t it = 0;
    uint64_t key;
    const uint64_t *v;
    while ((v = hmap_next(from, &it, &key)))
        place(h, key, v);
    hmap_fini(from);
    free(from);
}

// Rebuilds the table with new_cap slots (the home rule may have changed), overflow included.
static void rehash(hmap_t *h, size_t new_cap) {
    uint64_t *old = h->slots;
    size_t old_cap = h->cap, stride = h->stride;
    hmap_t *old_over = h->over;
    h->over = NULL;
    h->over_max = 0;
    table_alloc(h, new_cap);
    for (size_t j = 0; j < old_cap; j++)
        if (old[j * stride] != 0)
            place(h, old[j * stride], old + j * stride + 1);
    big_free(old, old_cap * stride * sizeof(uint64_t));
    place_all_of(h, old_over);
}

// Doubles an ordered table where it lies. A key's slot in the doubled table is its old one or
// that plus the old capacity, so the table is extended (realloc: mremap, no copy, for the big
// ones) and the keys with that bit set move up. Rebuilding into a fresh table held both at once:
// rust_vec_growth's 2.76 M live blocks peaked at 1.5 times their table (report 566 -> 421 MB).
static void grow_ordered(hmap_t *h) {
    size_t old_cap = h->cap, stride = h->stride;
    size_t half = old_cap * stride * sizeof(uint64_t);
    h->slots = big_realloc(h->slots, half, 2 * half);
    memset((uint8_t *)h->slots + half, 0, half);
    hmap_t *old_over = h->over;
    h->over = NULL;
    h->over_max = 0;
    set_cap(h, 2 * old_cap);
    for (size_t i = 0; i < old_cap; i++) {
        uint64_t *s = h->slots + i * stride;
        if (s[0] & old_cap) {
            copy_words(s + old_cap * stride, s, stride);
            s[0] = 0;
        }
    }
    place_all_of(h, old_over); // the displaced may find their own slot now
}

// Doubles a pooled table where it lies: extended by realloc (mremap for the big ones: no copy,
// never the old table and the new at once, which rebuilding did: 1.5 times the new table at
// the peak). A key's home in the doubled table is twice its old home, or that plus one, so
// the old slots are taken out from the top down and each put at the end of its new run, which
// then lies at or above the slot it came from: a run only crosses slots already done. A key
// whose run would reach into the slots not done yet (a run that wraps past the end, or a key
// that sat further from its home than the home's own index) waits in a list and goes in at
// the end. Only pooled tables: nothing iterates them, and the order of the keys in the table
// differs from a rebuild's.
static void grow_pooled(hmap_t *h) {
    size_t old_cap = h->cap, bytes = old_cap * 2 * sizeof(uint64_t);
    h->slots = big_realloc(h->slots, bytes, 2 * bytes);
    memset((uint8_t *)h->slots + bytes, 0, bytes);
    set_cap(h, 2 * old_cap);
    size_t mask = h->cap - 1;
    uint64_t *later = NULL;
    size_t n_later = 0, later_cap = 0;
    for (size_t p = old_cap; p-- > 0;) {
        uint64_t *s = h->slots + 2 * p;
        uint64_t key = s[0], v = s[1];
        if (key == 0)
            continue;
        s[0] = 0;
        size_t i = home(h, key);
        while (i >= p && h->slots[2 * i] != 0)
            i = (i + 1) & mask;
        if (i >= p) {
            h->slots[2 * i] = key;
            h->slots[2 * i + 1] = v;
            continue;
        }
        if (n_later == later_cap) {
            later_cap = later_cap ? 2 * later_cap : 64;
            later = xrealloc(later, later_cap * 2 * sizeof(uint64_t));
        }
        later[2 * n_later] = key;
        later[2 * n_later + 1] = v;
        n_later++;
    }
    for (size_t k = 0; k < n_later; k++)
        place(h, later[2 * k], later + 2 * k + 1);
    free(later);
}

// A pooled table that kept its values in its slots while small moves them to the pool: the
// slots become 16 bytes (key, value index), as many as before, so at most half full still and
// below a pooled table's 3/4; the old table and the new one are held at once, a small table
// (below pool_at) and its values.
static void to_pooled(hmap_t *h) {
    uint64_t *old = h->slots;
    size_t old_cap = h->cap, old_stride = h->stride;
    h->pool_at = 0;
    h->pooled = true;
    h->stride = 2;
    h->pool_cap = old_cap; // >= the keys: the table was at most half full
    h->pool = big_alloc(h->pool_cap * h->vbytes);
    h->pool_n = h->pool_free = h->pool_pending = 0;
    table_alloc(h, old_cap);
    size_t mask = h->cap - 1;
    for (size_t j = 0; j < old_cap; j++) {
        uint64_t key = old[j * old_stride];
        if (key == 0)
            continue;
        size_t i = home(h, key);
        while (h->slots[2 * i] != 0)
            i = (i + 1) & mask;
        h->slots[2 * i] = key;
        h->slots[2 * i + 1] = h->pool_n;
        copy_words((uint64_t *)(h->pool + h->pool_n * h->vbytes), old + j * old_stride + 1,
                   h->vbytes / 8);
        h->pool_n++;
    }
    big_free(old, old_cap * old_stride * sizeof(uint64_t));
}

static void grow(hmap_t *h) {
    if (h->ordered)
        grow_ordered(h);
    else if (h->pooled)
        grow_pooled(h);
    else if (h->pool_at && 2 * h->cap * h->stride * sizeof(uint64_t) >= h->pool_at)
        to_pooled(h);
    else
        rehash(h, h->cap * 2);
}

static void redistribute(hmap_t *h) {
    if (h->cap < 4 * (h->n - h->has_zero)) {
        grow_ordered(h);
    } else {
        h->ordered = false;
        rehash(h, h->cap);
    }
}

void hmap_init_ordered(hmap_t *h, size_t value_bytes) {
    hmap_init(h, value_bytes);
    h->ordered = true;
    h->grow_at = h->cap / 10 * 7;
}

void *hmap_put_slow(hmap_t *h, uint64_t key, bool *existed) {
    if (key == 0) {
        if (existed)
            *existed = h->has_zero;
        if (!h->has_zero) {
            h->has_zero = true;
            h->n++;
            memset(h->zero_value, 0, h->value_bytes);
        }
        return h->zero_value;
    }
    size_t mask = h->cap - 1, stride = h->stride;
    if (h->ordered) {
        uint64_t *s = direct_slot(h, key);
        void *v = s[0] == key ? s + 1 : over_get(h, key);
        if (v) {
            if (existed)
                *existed = true;
            return v;
        }
        if (h->n - h->has_zero + 1 > h->grow_at) {
            grow(h);
            return hmap_put(h, key, existed);
        }
        if (too_displaced(h)) {
            redistribute(h);
            return hmap_put(h, key, existed);
        }
        if (existed)
            *existed = false;
        if (s[0] != 0) {
            // the slot's key was made earlier and lives on: it moves beside
            to_overflow(h, s[0], s + 1);
        }
        s[0] = key;
        hmap_zero_words(s + 1, stride - 1);
        h->n++;
        return s + 1;
    }
    size_t i = home(h, key);
    for (;; i = (i + 1) & mask) {
        uint64_t *s = h->slots + i * stride;
        if (s[0] == key) {
            if (existed)
                *existed = true;
            return slot_value(h, s);
        }
        if (s[0] == 0)
            break;
    }
    if (existed)
        *existed = false;
    if (h->n - h->has_zero + 1 > h->grow_at) {
        grow(h);
        mask = h->cap - 1;
        stride = h->stride; // to_pooled changes it
        for (i = home(h, key); h->slots[i * stride] != 0; i = (i + 1) & mask)
            ;
    }
    uint64_t *s = h->slots + i * stride;
    s[0] = key;
    h->n++;
    if (h->pooled) {
        s[1] = pool_take(h);
        uint64_t *v = slot_value(h, s);
        hmap_zero_words(v, h->vbytes / 8);
        return v;
    }
    hmap_zero_words(s + 1, stride - 1);
    return s + 1;
}

static void unlink_slot(hmap_t *h, size_t i);

// Copies a value taken out to out (if non-NULL).
static inline void value_out(const hmap_t *h, void *out, const uint64_t *value) {
    if (!out)
        return;
    if (h->value_bytes % 8 == 0)
        copy_words(out, value, h->vbytes / 8);
    else
        memcpy(out, value, h->value_bytes);
}

bool hmap_take(hmap_t *h, uint64_t key, void *out) {
    if (key == 0) {
        if (!h->has_zero)
            return false;
        if (out)
            memcpy(out, h->zero_value, h->value_bytes);
        h->has_zero = false;
        h->n--;
        return true;
    }
    size_t mask = h->cap - 1, stride = h->stride;
    if (h->ordered) {
        uint64_t *d = direct_slot(h, key);
        if (d[0] != key) {
            if (!h->over || key > h->over_max || !hmap_take(h->over, key, out))
                return false;
            h->n--;
            return true;
        }
        value_out(h, out, d + 1);
        d[0] = 0;
        h->n--;
        return true;
    }
    size_t i = home(h, key);
    uint64_t *s;
    for (;; i = (i + 1) & mask) {
        s = h->slots + i * stride;
        if (s[0] == key)
            break;
        if (s[0] == 0)
            return false;
    }
    value_out(h, out, slot_value(h, s));
    if (h->pooled) {
        pool_settle(h);
        uint64_t v = s[1];
        *(uint64_t *)(h->pool + v * h->vbytes) = h->pool_free;
        h->pool_free = v + 1;
    }
    h->n--;
    unlink_slot(h, i);
    return true;
}

// Empties slot i of a scattered table, whose key was just taken out.
static void unlink_slot(hmap_t *h, size_t i) {
    size_t mask = h->cap - 1, stride = h->stride;
    // Backward shift: pull later members of the probe run into the hole when their home slot
    // does not lie cyclically in (hole, j]; stop at the first empty slot.
    for (size_t j = (i + 1) & mask;; j = (j + 1) & mask) {
        uint64_t *t = h->slots + j * stride;
        if (t[0] == 0)
            break;
        size_t want = home(h, t[0]);
        if (((j - want) & mask) >= ((j - i) & mask)) {
            copy_words(h->slots + i * stride, t, stride);
            i = j;
        }
    }
    h->slots[i * stride] = 0;
}

void *hmap_next(const hmap_t *h, size_t *it, uint64_t *key) {
    // *it = 0 is the zero key, then slot i is *it = i + 1, then the overflow's own iteration
    if (*it == 0) {
        *it = 1;
        if (h->has_zero) {
            *key = 0;
            return h->zero_value;
        }
    }
    while (*it - 1 < h->cap) {
        uint64_t *s = h->slots + (*it - 1) * h->stride;
        (*it)++;
        if (s[0] != 0) {
            *key = s[0];
            return slot_value(h, s);
        }
    }
    if (!h->over)
        return NULL;
    size_t over_it = *it - 1 - h->cap;
    void *v = hmap_next(h->over, &over_it, key);
    *it = over_it + 1 + h->cap;
    return v;
}

void *hmap_take_ref_slow(hmap_t *h, uint64_t key) {
    if (h->pooled && key != 0) {
        // the value stays where it is; only the slot goes
        size_t mask = h->cap - 1;
        for (size_t i = home(h, key);; i = (i + 1) & mask) {
            uint64_t *s = h->slots + i * 2;
            if (s[0] == key) {
                uint64_t v = s[1];
                h->n--;
                unlink_slot(h, i);
                pool_give(h, v);
                return h->pool + v * h->vbytes;
            }
            if (s[0] == 0)
                return NULL;
        }
    }
    return hmap_take(h, key, h->taken) ? h->taken : NULL;
}
