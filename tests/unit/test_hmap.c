// SPDX-License-Identifier: MIT
// hmap: put/get/take against a reference model, key 0, growth, backward-shift deletion under
// churn, iteration.
#include "hmap.h"

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
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

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
