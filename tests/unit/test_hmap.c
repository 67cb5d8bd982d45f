// SPDX-License-Identifier: MIT
// hmap: put/get/take against a reference model, key 0, growth, backward-shift deletion under
// churn, iteration.
#include "core/hmap.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

typedef struct val {
    uint64_t a, b, c;
} val_t;

Test(hmap, put_get_take_roundtrip) {
    hmap_t h;
    hmap_init(&h, sizeof(val_t));
    bool existed = true;
    val_t *v = hmap_put(&h, 0x1000, &existed);
    cr_assert(!existed);
    cr_assert_eq(v->a, 0); // new values are zeroed
    v->a = 1, v->b = 2, v->c = 3;
    v = hmap_put(&h, 0x1000, &existed);
    cr_assert(existed);
    cr_assert_eq(v->c, 3);
    cr_assert_eq(hmap_count(&h), 1);
    cr_assert_null(hmap_get(&h, 0x2000));
    val_t out;
    cr_assert(hmap_take(&h, 0x1000, &out));
    cr_assert_eq(out.b, 2);
    cr_assert_not(hmap_take(&h, 0x1000, &out));
    cr_assert_null(hmap_get(&h, 0x1000));
    cr_assert_eq(hmap_count(&h), 0);
    hmap_fini(&h);
}

Test(hmap, key_zero_is_an_ordinary_key) {
    hmap_t h;
    hmap_init(&h, sizeof(uint64_t));
    cr_assert_null(hmap_get(&h, 0));
    bool existed;
    *(uint64_t *)hmap_put(&h, 0, &existed) = 77;
    cr_assert(!existed);
    *(uint64_t *)hmap_put(&h, 16, NULL) = 5;
    cr_assert_eq(*(uint64_t *)hmap_get(&h, 0), 77);
    cr_assert_eq(hmap_count(&h), 2);
    size_t it = 0, seen = 0;
    uint64_t key;
    while (hmap_next(&h, &it, &key))
        seen++;
    cr_assert_eq(seen, 2);
    uint64_t out;
    cr_assert(hmap_take(&h, 0, &out));
    cr_assert_eq(out, 77);
    cr_assert_null(hmap_get(&h, 0));
    cr_assert_eq(hmap_count(&h), 1);
    hmap_fini(&h);
}

Test(hmap, grows_to_a_million_keys) {
    hmap_t h;
    hmap_init(&h, sizeof(uint64_t));
    const uint64_t n = 1000000;
    for (uint64_t i = 1; i <= n; i++)
        *(uint64_t *)hmap_put(&h, i * 16, NULL) = i;
    cr_assert_eq(hmap_count(&h), n);
    for (uint64_t i = 1; i <= n; i++) {
        uint64_t *v = hmap_get(&h, i * 16);
        cr_assert_not_null(v);
        cr_assert_eq(*v, i);
    }
    cr_assert_null(hmap_get(&h, (n + 1) * 16));
    hmap_fini(&h);
}

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return xorshift64(&rng); }

// Random inserts and deletes over a small key space (so probe runs collide and wrap around)
// compared with a plain array model after every step.
Test(hmap, churn_matches_a_reference_model) {
    enum { KEYS = 4096, STEPS = 400000 };
    hmap_t h;
    hmap_init(&h, sizeof(uint64_t));
    uint64_t *model = calloc(KEYS, sizeof *model); // 0 = absent, else value
    size_t n = 0;
    for (int s = 0; s < STEPS; s++) {
        uint64_t k = rnd() % KEYS;
        uint64_t key = k * 4096 + 0x7f0000000000ull; // page-aligned like big allocations
        if (rnd() % 2) {
            bool existed;
            uint64_t *v = hmap_put(&h, key, &existed);
            cr_assert_eq(existed, model[k] != 0);
            if (!existed)
                n++;
            *v = model[k] = (uint64_t)s + 1;
        } else {
            uint64_t out = 0;
            bool had = hmap_take(&h, key, &out);
            cr_assert_eq(had, model[k] != 0);
            if (had) {
                cr_assert_eq(out, model[k]);
                model[k] = 0;
                n--;
            }
        }
        cr_assert_eq(hmap_count(&h), n);
        if (s % 50000 == 0) {
            for (uint64_t j = 0; j < KEYS; j++) {
                uint64_t *v = hmap_get(&h, j * 4096 + 0x7f0000000000ull);
                cr_assert_eq(v != NULL, model[j] != 0, "key %llu", (unsigned long long)j);
                if (v)
                    cr_assert_eq(*v, model[j]);
            }
        }
    }
    size_t it = 0, seen = 0;
    uint64_t key;
    uint64_t *v;
    while ((v = hmap_next(&h, &it, &key))) {
        uint64_t k = (key - 0x7f0000000000ull) / 4096;
        cr_assert_lt(k, KEYS);
        cr_assert_eq(*v, model[k]);
        seen++;
    }
    cr_assert_eq(seen, n);
    free(model);
    hmap_fini(&h);
}

Test(hmap, delete_everything_leaves_it_empty_and_usable) {
    hmap_t h;
    hmap_init(&h, 40); // value size not a multiple of 8
    for (uint64_t i = 1; i <= 100000; i++)
        memset(hmap_put(&h, i * 48, NULL), (int)(i & 0xff), 40);
    for (uint64_t i = 100000; i >= 1; i--) {
        uint8_t out[40];
        cr_assert(hmap_take(&h, i * 48, out));
        cr_assert_eq(out[39], (uint8_t)(i & 0xff));
    }
    cr_assert_eq(hmap_count(&h), 0);
    size_t it = 0;
    uint64_t key;
    cr_assert_null(hmap_next(&h, &it, &key));
    *(uint8_t *)hmap_put(&h, 48, NULL) = 9;
    cr_assert_eq(*(uint8_t *)hmap_get(&h, 48), 9);
    hmap_fini(&h);
}

// Ordered tables: serial-like keys keep one slot each (the displaced beside) and every value,
// whether they die in order or at random; keys that collide under the slot rule (addresses,
// a forged trace) switch the table to the scrambling hash without losing anything, without
// quadratic time, and within a few slots a key.
static void ordered_churn(uint64_t (*key_of)(uint64_t), bool fifo, int expect_ordered) {
    enum { LIVE = 3000, OPS = 300000 };
    hmap_t h;
    hmap_init_ordered(&h, sizeof(val_t));
    static uint64_t live[LIVE];
    uint64_t next = 1, seed = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < LIVE; i++) {
        live[i] = key_of(next++);
        ((val_t *)hmap_put(&h, live[i], NULL))->a = live[i];
    }
    for (int op = 0; op < OPS; op++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        // fifo: the oldest block dies (one in 16 among the 8 oldest, keeping it near in order)
        size_t i = fifo ? (op + (seed % 16 == 0 ? seed % 8 : 0)) % LIVE : seed % LIVE;
        val_t out;
        cr_assert(hmap_take(&h, live[i], &out), "op %d: key %lu lost", op, (unsigned long)live[i]);
        cr_assert_eq(out.a, live[i]);
        live[i] = key_of(next++);
        bool existed;
        ((val_t *)hmap_put(&h, live[i], &existed))->a = live[i];
        cr_assert_not(existed);
    }
    cr_assert_eq(hmap_count(&h), LIVE);
    for (size_t i = 0; i < LIVE; i++) {
        val_t *v = hmap_get(&h, live[i]);
        cr_assert(v && v->a == live[i]);
    }
    if (expect_ordered >= 0) // -1: either is right; what counts is that nothing was lost
        cr_assert_eq(h.ordered, expect_ordered);
    cr_assert_leq(h.cap, 8 * LIVE, "%zu slots for %d keys", h.cap, LIVE);
    if (h.ordered)
        cr_assert(!h.over || h.over->n <= LIVE / 2 + 64, "%zu of %d keys displaced", h.over->n, LIVE);
    hmap_fini(&h);
}

static uint64_t serial(uint64_t n) { return n; }
static uint64_t address(uint64_t n) { return 0x7f0000000000ull + n * 16; }
static uint64_t colliding(uint64_t n) { return n << 24; } // every key on one home slot

Test(hmap, ordered_keys_freed_in_order_stay_ordered) { ordered_churn(serial, true, true); }
Test(hmap, ordered_keys_freed_at_random_stay_ordered) { ordered_churn(serial, false, true); }
Test(hmap, address_keys_keep_every_value) {
    ordered_churn(address, false, -1);
    ordered_churn(address, true, -1);
}
Test(hmap, colliding_keys_leave_ordered_mode_in_time, .timeout = 20) {
    ordered_churn(colliding, false, false);
}

// Ordered mode's displaced keys (a later key took their slot) are found, counted, iterated once,
// re-put as existing, and taken like any other.
Test(hmap, ordered_displaced_keys_are_first_class) {
    hmap_t h;
    hmap_init_ordered(&h, sizeof(val_t));
    enum { N = 20, D = 1024 };
    // key k and k + D share a slot: k, made first, is displaced
    for (uint64_t k = 1; k <= N; k++) {
        ((val_t *)hmap_put(&h, k, NULL))->a = k;
        ((val_t *)hmap_put(&h, k + D, NULL))->a = k + D;
    }
    cr_assert_eq(hmap_count(&h), 2 * N);
    cr_assert(h.ordered && h.over && h.over->n == N, "the first keys are beside the table");
    for (uint64_t k = 1; k <= N; k++) {
        bool existed;
        val_t *v = hmap_put(&h, k, &existed);
        cr_assert(existed && v->a == k, "key %lu", (unsigned long)k);
        cr_assert_eq(((val_t *)hmap_get(&h, k + D))->a, k + D);
    }
    uint8_t seen[N + D + 1] = {0};
    size_t it = 0, n = 0;
    uint64_t key;
    val_t *v;
    while ((v = hmap_next(&h, &it, &key))) {
        cr_assert(key >= 1 && key <= N + D && v->a == key && !seen[key]++);
        n++;
    }
    cr_assert_eq(n, 2 * N);
    for (uint64_t k = 1; k <= N; k++) {
        val_t out;
        cr_assert(hmap_take(&h, k, &out) && out.a == k);
        cr_assert_not(hmap_take(&h, k, &out));
        cr_assert_null(hmap_get(&h, k));
    }
    cr_assert_eq(hmap_count(&h), N);
    hmap_fini(&h);
}

// An ordered table doubles where it lies: the keys whose slot moves up by the old capacity move,
// the displaced go back to their own slot when the doubled table has one for them, and no value
// is lost or changed on the way through several doublings.
Test(hmap, ordered_growth_in_place_keeps_every_key) {
    hmap_t h;
    hmap_init_ordered(&h, sizeof(val_t));
    enum { D = 64, N = 40, MORE = 6000 };
    for (uint64_t k = 1; k <= N; k++) { // k + D shares k's slot while the table has 64
        ((val_t *)hmap_put(&h, k, NULL))->a = k;
        ((val_t *)hmap_put(&h, k + D, NULL))->a = k + D;
    }
    for (uint64_t k = 1000; k < 1000 + MORE; k++)
        ((val_t *)hmap_put(&h, k, NULL))->a = k;
    cr_assert(h.ordered);
    cr_assert_geq(h.cap, 8192u);
    cr_assert(!h.over || hmap_count(h.over) == 0, "every key has its own slot at %zu slots", h.cap);
    cr_assert_eq(hmap_count(&h), 2 * N + MORE);
    size_t it = 0, n = 0;
    uint64_t key;
    val_t *v;
    while ((v = hmap_next(&h, &it, &key))) {
        cr_assert_eq(v->a, key);
        n++;
    }
    cr_assert_eq(n, 2 * N + MORE);
    for (uint64_t k = 1; k <= N; k++)
        cr_assert(((val_t *)hmap_get(&h, k))->a == k && ((val_t *)hmap_get(&h, k + D))->a == k + D);
    hmap_fini(&h);
}

// Pooled tables (values out of line, hmap_init_pooled): random puts, takes and take_refs
// against a model while the table doubles in place many times; keys drawn so that many home
// in the last slots (runs that wrap past the end, keys that wait in the doubling's list) or
// spread like addresses.
typedef struct big {
    uint64_t w[7]; // replay's live block with growth's words: 56 bytes
} big_t;

static uint64_t top_key(void) {
    for (;;) {
        uint64_t k = rnd() | 1;
        if (hmap_hash(k) >> 54 == 0x3ff) // the top 10 bits: the last slots of any table
            return k;
    }
}

// pool_from: hmap_pool_from's bytes (1: pooled from the first doubling; 0: the default, values
// in the slots until the slots pass HMAP_POOL_AT, which these 3,000 keys never reach).
static void pooled_churn(bool wrapping, size_t pool_from) {
    enum { KEYS = 3000, OPS = 400000 };
    uint64_t *keys = malloc(KEYS * sizeof *keys);
    uint64_t *model = calloc(KEYS, sizeof *model);
    for (size_t k = 0; k < KEYS; k++)
        keys[k] = wrapping ? top_key() : 0x7f0000000000ull + (rnd() % (1u << 24)) * 16 + k;
    hmap_t h;
    hmap_init_pooled(&h, sizeof(big_t));
    if (pool_from)
        hmap_pool_from(&h, pool_from);
    size_t n = 0;
    for (uint64_t s = 1; s <= OPS; s++) {
        // grow towards all keys live, then shrink and grow again
        size_t k = rnd() % (s < OPS / 2 ? KEYS : KEYS / 3 + 1);
        uint64_t r = rnd() % 8;
        if (r < 4 + (s < OPS / 4)) {
            bool existed;
            big_t *v = hmap_put(&h, keys[k], &existed);
            cr_assert_eq(existed, model[k] != 0);
            if (!existed) {
                for (int w = 0; w < 7; w++)
                    cr_assert_eq(v->w[w], 0, "a new value is zeroed");
                n++;
            } else {
                cr_assert_eq(v->w[0], model[k]);
                cr_assert_eq(v->w[6], ~model[k]);
            }
            model[k] = s;
            v->w[0] = s, v->w[6] = ~s;
        } else if (r < 7) {
            big_t *v = hmap_take_ref(&h, keys[k]);
            cr_assert_eq(v != NULL, model[k] != 0);
            if (v) {
                cr_assert_eq(v->w[0], model[k]);
                cr_assert_eq(v->w[6], ~model[k]);
                model[k] = 0;
                n--;
            }
        } else {
            big_t out;
            bool had = hmap_take(&h, keys[k], &out);
            cr_assert_eq(had, model[k] != 0);
            if (had) {
                cr_assert_eq(out.w[0], model[k]);
                model[k] = 0;
                n--;
            }
        }
        cr_assert_eq(hmap_count(&h), n);
        if (s % 20000 == 0)
            for (size_t j = 0; j < KEYS; j++) {
                big_t *v = hmap_get(&h, keys[j]);
                cr_assert_eq(v != NULL, model[j] != 0, "key %zu", j);
                if (v)
                    cr_assert_eq(v->w[6], ~model[j]);
            }
    }
    size_t it = 0, seen = 0;
    uint64_t key;
    while (hmap_next(&h, &it, &key))
        seen++;
    cr_assert_eq(seen, n);
    cr_assert_eq(h.pooled, pool_from != 0, "values moved to the pool when, and only when, due");
    cr_assert_leq(h.pool_n, KEYS, "freed values are reused");
    hmap_fini(&h);
    free(keys);
    free(model);
}

Test(hmap, pooled_churn_matches_a_reference_model) { pooled_churn(false, 1); }
Test(hmap, pooled_keys_homed_at_the_end_survive_doubling, .timeout = 30) {
    pooled_churn(true, 1);
}
// values in the slots while small, moved to the pool at a doubling in the middle of the churn
// (64-byte slots: the doubling to 2,048 slots, ~1,000 keys live)
Test(hmap, pooled_late_churn_matches_a_reference_model) { pooled_churn(false, 128 << 10); }
Test(hmap, pooled_late_keys_homed_at_the_end_survive_the_move, .timeout = 30) {
    pooled_churn(true, 128 << 10);
}
Test(hmap, pooled_small_table_keeps_values_in_its_slots) { pooled_churn(false, 0); }

// hmap_take_ref's value stays readable until the next change, then is the first one reused.
Test(hmap, pooled_take_ref_value_is_reused_last_in_first_out) {
    hmap_t h;
    hmap_init_pooled(&h, sizeof(big_t));
    hmap_pool_from(&h, 1);
    for (uint64_t i = 1; i <= 1000; i++)
        ((big_t *)hmap_put(&h, i * 16, NULL))->w[0] = i;
    big_t *v = hmap_take_ref(&h, 500 * 16);
    cr_assert_eq(v->w[0], 500);
    cr_assert_null(hmap_take_ref(&h, 500 * 16));
    cr_assert_eq(v->w[0], 500, "a failed take changes nothing");
    big_t *w = hmap_put(&h, 5000 * 16, NULL);
    cr_assert_eq(w, v, "the value given back last is the next one used");
    cr_assert_eq(w->w[0], 0);
    cr_assert_eq(hmap_count(&h), 1000);
    hmap_fini(&h);
}
