// SPDX-License-Identifier: MIT
// Open addressing with linear probing and backward-shift deletion (Knuth 6.4 algorithm R).
// Keys are heap addresses (multiples of 16) and small ids, so the hash must move entropy from
// the middle bits to the top: multiply, keep the high bits (hmap_hash in the header, which also
// keeps forged keys from piling up in one slot).
// Slots are whole 8-byte words and copied word by word: a runtime-sized memcpy per probe step
// would be a libc call on the hottest path of the analyzer.
#include "hmap.h"

#include "xalloc.h"

#include <stdlib.h>
#include <string.h>

#define HMAP_MIN_CAP 64u

static inline size_t home(const hmap_t *h, uint64_t key) {
    return h->ordered ? (size_t)key & (h->cap - 1) : (size_t)(hmap_hash(key) >> h->shift);
}

// Word copy with the common sizes spelled out: a loop over a runtime count costs a branch per
// word and is never unrolled. The switch is predicted perfectly (one table, one stride). Up to
// 10: replay's live blocks with growth's words attached (replay_set_companion).
static inline void copy_words(uint64_t *dst, const uint64_t *src, size_t words) {
    switch (words) {
    case 10:
        dst[9] = src[9];
        /* fall through */
    case 9:
        dst[8] = src[8];
        /* fall through */
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

static inline void zero_words(uint64_t *dst, size_t words) {
    switch (words) {
    case 9:
        dst[8] = 0;
        /* fall through */
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

static void table_alloc(hmap_t *h, size_t cap) {
    h->cap = cap;
    h->slots = xcalloc(cap, h->stride * sizeof(uint64_t));
    // Scattered keys: at most half full. Linear probing's runs (and the backward shift of every
    // delete) grow fast past that: c_churn's 4,097 live blocks in 16 K slots instead of 8 K make
    // report 20% faster. Ordered keys sit in runs of their own making (hmap_init_ordered): 0.7,
    // since their tables are the big ones (rust_vec_growth: 0.5 there cost 84% more memory
    // and 30% more time).
    h->grow_at = h->ordered ? cap / 10 * 7 : cap / 2;
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap)
        bits++;
    h->shift = 64 - bits;
}

void hmap_init(hmap_t *h, size_t value_bytes) {
    memset(h, 0, sizeof *h);
    h->value_bytes = value_bytes;
    h->stride = 1 + (value_bytes + 7) / 8;
    h->zero_value = xcalloc(1, value_bytes);
    table_alloc(h, HMAP_MIN_CAP);
}

void hmap_fini(hmap_t *h) {
    free(h->slots);
    free(h->zero_value);
    memset(h, 0, sizeof *h);
}

void *hmap_get(const hmap_t *h, uint64_t key) {
    if (key == 0)
        return h->has_zero ? h->zero_value : NULL;
    size_t mask = h->cap - 1;
    for (size_t i = home(h, key);; i = (i + 1) & mask) {
        uint64_t *s = h->slots + i * h->stride;
        if (s[0] == key)
            return s + 1;
        if (s[0] == 0)
            return NULL;
    }
}

// Rebuilds the table with new_cap slots (the home rule may have changed).
static void rehash(hmap_t *h, size_t new_cap) {
    uint64_t *old = h->slots;
    size_t old_cap = h->cap;
    table_alloc(h, new_cap);
    size_t mask = h->cap - 1, stride = h->stride;
    for (size_t j = 0; j < old_cap; j++) {
        const uint64_t *s = old + j * stride;
        if (s[0] == 0)
            continue;
        size_t i = home(h, s[0]);
        while (h->slots[i * stride] != 0)
            i = (i + 1) & mask;
        copy_words(h->slots + i * stride, s, stride);
    }
    free(old);
}

static void grow(hmap_t *h) { rehash(h, h->cap * 2); }

// Ordered mode pays off while probe runs stay short on average: old survivors of an earlier
// lap of the key space push the run of recent keys along, and a free order far from the
// allocation order makes that displacement grow. Judged per window of insertions, so a forged
// trace can at most make each insertion of a window cost HMAP_ORDERED_RUN_MAX steps.
static bool ordered_too_slow(hmap_t *h, size_t run) {
    h->ordered_steps += run;
    if (run > HMAP_ORDERED_RUN_MAX * 64)
        return true;
    if (++h->ordered_puts < 65536)
        return false;
    bool slow = h->ordered_steps > (uint64_t)h->ordered_puts * HMAP_ORDERED_RUN_MAX / 4;
    h->ordered_steps = h->ordered_puts = 0;
    return slow;
}

void hmap_init_ordered(hmap_t *h, size_t value_bytes) {
    hmap_init(h, value_bytes);
    h->ordered = true;
    h->grow_at = h->cap / 10 * 7;
}

void *hmap_put(hmap_t *h, uint64_t key, bool *existed) {
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
    size_t i = home(h, key), run = 0;
    for (;; i = (i + 1) & mask, run++) {
        uint64_t *s = h->slots + i * stride;
        if (s[0] == key) {
            if (existed)
                *existed = true;
            return s + 1;
        }
        if (s[0] == 0)
            break;
    }
    if (h->ordered && ordered_too_slow(h, run)) {
        // the keys do not come in order: scramble them from now on
        h->ordered = false;
        rehash(h, h->cap);
        return hmap_put(h, key, existed);
    }
    if (existed)
        *existed = false;
    if (h->n - h->has_zero + 1 > h->grow_at) {
        grow(h);
        mask = h->cap - 1;
        for (i = home(h, key); h->slots[i * stride] != 0; i = (i + 1) & mask)
            ;
    }
    uint64_t *s = h->slots + i * stride;
    s[0] = key;
    zero_words(s + 1, stride - 1);
    h->n++;
    return s + 1;
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
    size_t i = home(h, key);
    uint64_t *s;
    for (;; i = (i + 1) & mask) {
        s = h->slots + i * stride;
        if (s[0] == key)
            break;
        if (s[0] == 0)
            return false;
    }
    if (out) {
        if (h->value_bytes % 8 == 0)
            copy_words(out, s + 1, stride - 1);
        else
            memcpy(out, s + 1, h->value_bytes);
    }
    h->n--;
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
    return true;
}

void *hmap_next(const hmap_t *h, size_t *it, uint64_t *key) {
    // *it = 0 is the zero key, then slot i is *it = i + 1
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
            return s + 1;
        }
    }
    return NULL;
}
