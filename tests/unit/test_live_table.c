// SPDX-License-Identifier: MIT
// live_table: put/get/take against a reference model, key 0, growth in place, backward-shift
// deletion across the table's end, values that keep their index, and keys forged to collide.
#include "model/live_table.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

typedef struct val {
    uint64_t a, b, c;
} val_t;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return xorshift64(&rng); }

// The inverse of an odd multiplier modulo 2^64 (Newton's iteration).
static uint64_t inverse(uint64_t a) {
    uint64_t x = a;
    for (int i = 0; i < 6; i++)
        x *= 2 - a * x;
    return x;
}

// A key whose 64-bit hash under `seed` is full (live_table_hash keeps its top 32 bits): the
// hash run backwards, as a forger who read the source would.
static uint64_t forged(uint64_t seed, uint64_t full) {
    uint64_t x = full * inverse(0xD6E8FEB86659FD93ull);
    x ^= x >> 32; // its own inverse for a shift of half the word
    return (x * inverse(0x9E3779B97F4A7C15ull)) ^ seed;
}

Test(live_table, put_get_take_roundtrip) {
    live_table_t t;
    live_table_init(&t, sizeof(val_t));
    bool existed = true;
    val_t *v = live_table_put(&t, 0x1000, &existed);
    cr_assert(!existed);
    cr_assert_eq(v->a, 0); // new values are zeroed by live_table_put
    v->a = 1, v->b = 2, v->c = 3;
    v = live_table_put(&t, 0x1000, &existed);
    cr_assert(existed);
    cr_assert_eq(v->c, 3);
    cr_assert_eq(live_table_count(&t), 1);
    cr_assert_null(live_table_get(&t, 0x2000));
    v = live_table_take(&t, 0x1000);
    cr_assert_not_null(v);
    cr_assert_eq(v->b, 2); // readable until the next put
    cr_assert_null(live_table_take(&t, 0x1000));
    cr_assert_null(live_table_get(&t, 0x1000));
    cr_assert_eq(live_table_count(&t), 0);
    // the value given back is the next one handed out
    int64_t before = (int64_t)(((uint8_t *)v - t.pool) >> t.vshift);
    uint32_t again = live_table_put_index(&t, 0x3000, &existed);
    cr_assert(!existed);
    cr_assert_eq((int64_t)again, before);
    live_table_fini(&t);
}

Test(live_table, key_zero_and_all_ones_are_ordinary_keys) {
    live_table_t t;
    live_table_init(&t, sizeof(uint64_t));
    cr_assert_null(live_table_get(&t, 0));
    bool existed;
    *(uint64_t *)live_table_put(&t, 0, &existed) = 77;
    cr_assert(!existed);
    *(uint64_t *)live_table_put(&t, UINT64_MAX, &existed) = 78;
    cr_assert(!existed);
    *(uint64_t *)live_table_put(&t, 16, &existed) = 5;
    cr_assert_eq(*(uint64_t *)live_table_get(&t, 0), 77);
    cr_assert_eq(*(uint64_t *)live_table_get(&t, UINT64_MAX), 78);
    cr_assert_eq(live_table_count(&t), 3);
    uint64_t *out = live_table_take(&t, 0);
    cr_assert_not_null(out);
    cr_assert_eq(*out, 77);
    cr_assert_null(live_table_get(&t, 0));
    cr_assert_eq(*(uint64_t *)live_table_get(&t, 16), 5);
    cr_assert_eq(live_table_count(&t), 2);
    live_table_fini(&t);
}

Test(live_table, values_are_padded_to_a_power_of_two) {
    live_table_t t;
    live_table_init(&t, 24);
    cr_assert_eq(1u << t.vshift, 32);
    live_table_fini(&t);
    live_table_init(&t, 56);
    cr_assert_eq(1u << t.vshift, 64);
    live_table_fini(&t);
    live_table_init(&t, 1); // a word for the value, one for its key
    cr_assert_eq(1u << t.vshift, 16);
    live_table_fini(&t);
}

// Grows in place from 64 slots past the sparse limit (512 K slots) to 2 M slots: every key
// keeps its value, and its value's index.
Test(live_table, grows_to_a_million_keys_keeping_value_indexes) {
    live_table_t t;
    live_table_init(&t, sizeof(uint64_t));
    const uint64_t n = 1000000;
    uint32_t *index = malloc(n * sizeof *index);
    for (uint64_t i = 0; i < n; i++) {
        bool existed;
        index[i] = live_table_put_index(&t, i * 16 + 0x7f0000000000ull, &existed);
        cr_assert(!existed);
        *(uint64_t *)live_table_value(&t, index[i]) = i;
    }
    cr_assert_eq(live_table_count(&t), n);
    cr_assert_geq(t.cap, n * 4 / 3);
    for (uint64_t i = 0; i < n; i++) {
        int64_t v = live_table_find(&t, i * 16 + 0x7f0000000000ull);
        cr_assert_eq(v, (int64_t)index[i]);
        cr_assert_eq(*(uint64_t *)live_table_value(&t, (uint32_t)v), i);
    }
    cr_assert_null(live_table_get(&t, n * 16 + 0x7f0000000000ull));
    cr_assert_lt(live_table_max_probe(&t), 200);
    free(index);
    live_table_fini(&t);
}

// Random puts and takes over a key space that makes the table grow, then shrink and churn,
// compared with a plain array model (values and their indexes) after every step. Small
// tables wrap their probe runs around the end, so deletion's backward shift crosses it.
static void churn(unsigned keys, unsigned steps, unsigned put_per_mille) {
    live_table_t t;
    live_table_init(&t, sizeof(val_t));
    uint64_t *model = calloc(keys, sizeof *model); // 0 = absent, else value
    int64_t *at = calloc(keys, sizeof *at);        // its value's index
    size_t n = 0;
    for (unsigned s = 0; s < steps; s++) {
        uint64_t k = rnd() % keys;
        uint64_t key = k * 4096 + 0x7f0000000000ull; // page-aligned like big allocations
        if (k == 1)
            key = 0; // key 0 takes part too
        if (rnd() % 1000 < (s < steps / 2 ? put_per_mille : 1000 - put_per_mille)) {
            bool existed;
            uint32_t v = live_table_put_index(&t, key, &existed);
            cr_assert_eq(existed, model[k] != 0);
            if (existed)
                cr_assert_eq((int64_t)v, at[k]);
            else
                n++;
            at[k] = v;
            ((val_t *)live_table_value(&t, v))->a = model[k] = (uint64_t)s + 1;
        } else {
            int64_t v = live_table_take_index(&t, key);
            cr_assert_eq(v >= 0, model[k] != 0);
            if (v >= 0) {
                cr_assert_eq(v, at[k]);
                cr_assert_eq(((val_t *)live_table_value(&t, (uint32_t)v))->a, model[k]);
                model[k] = 0;
                n--;
            }
        }
        cr_assert_eq(live_table_count(&t), n);
        if (s % (steps / 8) == 0) {
            for (uint64_t j = 0; j < keys; j++) {
                uint64_t key_j = j == 1 ? 0 : j * 4096 + 0x7f0000000000ull;
                int64_t v = live_table_find(&t, key_j);
                cr_assert_eq(v >= 0, model[j] != 0, "key %llu", (unsigned long long)j);
                if (v >= 0)
                    cr_assert_eq(((val_t *)live_table_value(&t, (uint32_t)v))->a, model[j]);
            }
        }
    }
    free(model);
    free(at);
    live_table_fini(&t);
}

Test(live_table, small_churn_matches_a_reference_model) { churn(100, 200000, 500); }
Test(live_table, churn_matches_a_reference_model) { churn(4096, 400000, 500); }
Test(live_table, growing_then_shrinking_matches_a_reference_model) {
    churn(200000, 1000000, 800);
}

// Keys that home in the last slots of any table (their hash's top 10 bits set), few enough
// that no run passes LIVE_TABLE_PROBE_MAX (the seed stays): runs wrap past the end, and each
// doubling in place puts some keys on its waiting list. Random puts and takes against a model
// while the table doubles from 64 slots to 1,024 and shrinks back in use.
Test(live_table, keys_homed_at_the_end_survive_doubling) {
    enum { KEYS = 400, OPS = 200000 };
    uint64_t keys[KEYS], model[KEYS] = {0};
    for (size_t k = 0; k < KEYS; k++)
        keys[k] = forged(0, (0xFFC00000ull | (rnd() & 0x3FFFFF)) << 32 | k);
    live_table_t t;
    live_table_init(&t, 56);
    size_t n = 0;
    for (unsigned s = 0; s < OPS; s++) {
        size_t k = rnd() % KEYS;
        // phases: fill up, empty out, fill up again
        unsigned phase = s / (OPS / 4), put = phase % 2 == 0 ? 900 : 100;
        if (rnd() % 1000 < put) {
            bool existed;
            uint64_t *v = live_table_put(&t, keys[k], &existed);
            cr_assert_eq(existed, model[k] != 0);
            n += !existed;
            v[0] = model[k] = s + 1;
            v[6] = ~(uint64_t)s;
        } else {
            uint64_t *v = live_table_take(&t, keys[k]);
            cr_assert_eq(v != NULL, model[k] != 0);
            if (v) {
                cr_assert_eq(v[0], model[k]);
                cr_assert_eq(v[6], ~(model[k] - 1));
                model[k] = 0;
                n--;
            }
        }
        cr_assert_eq(live_table_count(&t), n);
        if (s % 10007 == 0)
            for (size_t j = 0; j < KEYS; j++) {
                uint64_t *v = live_table_get(&t, keys[j]);
                cr_assert_eq(v != NULL, model[j] != 0);
                if (v)
                    cr_assert_eq(v[0], model[j]);
            }
    }
    cr_assert_eq(t.seed, 0); // the wrapping runs were tested, not broken up
    cr_assert_geq(t.cap, 512);
    live_table_fini(&t);
}

// Keys whose home slots are the table's last two and its first: runs wrap around the end, and
// deleting from them shifts keys back across it, home slots before the hole left alone.
Test(live_table, backward_shift_across_the_end) {
    live_table_t t;
    live_table_init(&t, sizeof(uint64_t));
    live_table_set_seed(&t, 0);
    size_t cap = t.cap;
    uint64_t last = (uint64_t)(cap - 1) << (32 - 6); // home cap - 1 of a 64-slot table
    uint64_t keys[9];
    for (int i = 0; i < 9; i++) {
        uint64_t home = i < 3 ? last : i < 6 ? last - (1ull << 26) : 0; // cap-1, cap-2, 0
        keys[i] = forged(0, (home + (uint64_t)i) << 32 | (uint64_t)i);
        bool existed;
        *(uint64_t *)live_table_put(&t, keys[i], &existed) = 100 + (uint64_t)i;
        cr_assert(!existed);
    }
    cr_assert_eq(t.cap, cap); // 9 keys stay in 64 slots
    for (int d = 0; d < 9; d += 2) {
        uint64_t *v = live_table_take(&t, keys[d]);
        cr_assert_not_null(v);
        cr_assert_eq(*v, 100 + (uint64_t)d);
        for (int i = 0; i < 9; i++) {
            uint64_t *g = live_table_get(&t, keys[i]);
            if (i <= d && i % 2 == 0) {
                cr_assert_null(g);
            } else {
                cr_assert_not_null(g, "key %d after taking %d", i, d);
                cr_assert_eq(*g, 100 + (uint64_t)i);
            }
        }
    }
    live_table_fini(&t);
}

// A forged trace: 200,000 keys that all share one home slot (and one 32-bit hash) under the
// seed the table starts with. The long run makes the table take a random seed, after which
// they spread: the inserts stay linear (the timeout) and the runs short.
Test(live_table, keys_forged_to_collide_stay_linear, .timeout = 20) {
    live_table_t t;
    live_table_init(&t, sizeof(val_t));
    cr_assert_eq(t.seed, 0);
    const uint64_t n = 200000;
    for (uint64_t i = 0; i < n; i++) {
        bool existed;
        val_t *v = live_table_put(&t, forged(0, 0xABCD1234ull << 32 | i), &existed);
        cr_assert(!existed);
        v->a = i;
    }
    cr_assert_neq(t.seed, 0);
    cr_assert_lt(live_table_max_probe(&t), 200);
    for (uint64_t i = 0; i < n; i += 7) {
        val_t *v = live_table_take(&t, forged(0, 0xABCD1234ull << 32 | i));
        cr_assert_not_null(v);
        cr_assert_eq(v->a, i);
    }
    for (uint64_t i = 0; i < n; i++)
        cr_assert_eq(live_table_get(&t, forged(0, 0xABCD1234ull << 32 | i)) != NULL, i % 7 != 0);
    live_table_fini(&t);
}

// The same forgery against a set seed (the tests' hook): found and broken up again.
Test(live_table, a_set_seed_is_broken_up_too, .timeout = 20) {
    live_table_t t;
    live_table_init(&t, sizeof(uint64_t));
    live_table_set_seed(&t, 0x1234);
    for (uint64_t i = 0; i < 100000; i++)
        *(uint64_t *)live_table_put(&t, forged(0x1234, 7ull << 32 | i), &(bool){0}) = i;
    cr_assert_neq(t.seed, 0x1234);
    cr_assert_lt(live_table_max_probe(&t), 200);
    for (uint64_t i = 0; i < 100000; i++)
        cr_assert_eq(*(uint64_t *)live_table_get(&t, forged(0x1234, 7ull << 32 | i)), i);
    live_table_fini(&t);
}
