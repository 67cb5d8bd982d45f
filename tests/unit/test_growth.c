// SPDX-License-Identifier: MIT
// growth on hand-made event sequences (docs/growth.md): realloc chains whether or not the address
// moves, allocate-copy-free chains, the window, the rule against single steps, churn that only
// looks like growth, cross-stack candidates, hashbrown's layout, and short-lived blocks.
#include "model/growth.h"
#include "model/replay.h"

#include <criterion/criterion.h>
#include <string.h>

typedef struct feed {
    growth_t *g;
    uint64_t t;
    replay_t *rp; // non-NULL: g is attached to it (growth_attach) and fed through replay_event
} feed_t;

static void ev(feed_t *f, reader_event_t e) {
    e.time_ns = f->t += 10;
    if (!e.tid)
        e.tid = 1;
    if (f->rp)
        replay_event(f->rp, &e);
    else
        growth_event(f->g, &e);
}

static void mal(feed_t *f, uint64_t stack, uint64_t addr, uint64_t size) {
    ev(f,
       (reader_event_t){
           .kind = READER_ALLOC, .sub = READER_MALLOC, .stack = stack, .addr = addr, .size = size});
}

static void fre(feed_t *f, uint64_t addr) {
    ev(f, (reader_event_t){.kind = READER_FREE, .addr = addr});
}

static void rea(feed_t *f, uint64_t stack, uint64_t old, uint64_t addr, uint64_t size) {
    if (old)
        ev(f, (reader_event_t){.kind = READER_FREE, .flags = READER_FREE_OF_REALLOC, .addr = old});
    ev(f, (reader_event_t){.kind = READER_ALLOC,
                           .sub = READER_REALLOC,
                           .stack = stack,
                           .addr = addr,
                           .old_addr = old,
                           .size = size});
}


Test(growth, realloc_chain_in_place_and_moving) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    mal(&f, 7, 0x1000, 10);
    rea(&f, 8, 0x1000, 0x1000, 20); // in place: a step, nothing copied
    rea(&f, 9, 0x1000, 0x2000, 40); // moved: 20 bytes copied
    rea(&f, 9, 0x2000, 0x2000, 30); // a shrink stays in the chain, no step
    fre(&f, 0x2000);
    growth_finish(f.g);
    cr_assert_eq(growth_n_sites(f.g), 1);
    const growth_site_t *s = growth_site_of(f.g, 7); // the site of the first block
    cr_assert(s);
    cr_expect_eq(s->n_chains, 1);
    cr_expect_eq(s->n_steps, 2);
    cr_expect_eq(s->n_realloc_steps, 2);
    cr_expect_eq(s->n_moves, 1);
    cr_expect_eq(s->bytes_copied, 20);
    cr_expect_eq(s->final_max, 30);
    cr_expect_eq(s->first_min, 10);
    cr_expect_null(growth_site_of(f.g, 9));
    growth_free(f.g);
}

Test(growth, allocate_copy_free_needs_two_steps_and_the_window) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    // a vector: 16 -> 32 -> 64, each old buffer freed right after the new one
    mal(&f, 5, 0x100, 16);
    mal(&f, 5, 0x200, 32);
    fre(&f, 0x100);
    mal(&f, 5, 0x300, 64);
    mal(&f, 6, 0x900, 8); // another site in between is fine
    fre(&f, 0x200);
    // a single step at site 4: not a chain
    mal(&f, 4, 0x400, 16);
    mal(&f, 4, 0x500, 32);
    fre(&f, 0x400);
    // site 3: the old block freed after more than the window of events
    mal(&f, 3, 0x600, 16);
    mal(&f, 3, 0x700, 32);
    for (int i = 0; i < 4; i++) {
        mal(&f, 2, 0xA000 + 16 * (uint64_t)i, 8);
        fre(&f, 0xA000 + 16 * (uint64_t)i);
    }
    fre(&f, 0x600);
    mal(&f, 3, 0x800, 64);
    fre(&f, 0x700);
    growth_finish(f.g);
    cr_assert_eq(growth_n_sites(f.g), 1);
    const growth_site_t *s = growth_site_of(f.g, 5);
    cr_assert(s);
    cr_expect_eq(s->n_chains, 1);
    cr_expect_eq(s->n_steps, 2);
    cr_expect_eq(s->n_realloc_steps, 0);
    cr_expect_eq(s->bytes_copied, 48);
    cr_expect_eq(s->final_max, 64);
    cr_expect(s->doubling);
    growth_free(f.g);
}

// free(slot[i]); slot[i] = malloc(random), as bench/workloads/churn_common.h: each free follows an
// allocation at the same site, often a larger one, but the freed block is an old one, not the
// site's previous allocation. (With few slots, a slot reused two allocations apart twice in a row,
// each time by a larger block, is growth as docs/growth.md defines it: 4096 slots make that rare,
// as in the bench.)
Test(growth, churn_is_no_growth) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    static uint64_t slot[4096];
    uint64_t x = 12345, addr = 0x10000;
    memset(slot, 0, sizeof slot);
    for (int i = 0; i < 200000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        unsigned k = (unsigned)(x >> 52);
        if (slot[k])
            fre(&f, slot[k]);
        slot[k] = addr += 0x100;
        mal(&f, 1, slot[k], 8 + (x >> 40) % 200);
    }
    growth_finish(f.g);
    cr_expect_eq(growth_n_sites(f.g), 0);
    growth_free(f.g);
}

// a larger block from another stack (another site, or the same site reached by another path) is no
// link (docs/growth.md#same-site)
Test(growth, other_stacks_do_not_link) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    mal(&f, 11, 0x100, 16);
    mal(&f, 12, 0x200, 32);
    fre(&f, 0x100);
    mal(&f, 13, 0x300, 64);
    fre(&f, 0x200);
    growth_finish(f.g);
    cr_expect_eq(growth_n_sites(f.g), 0);
    growth_free(f.g);
}

Test(growth, live_chains_count_at_the_end) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    mal(&f, 5, 0x100, 16);
    mal(&f, 5, 0x200, 32);
    fre(&f, 0x100);
    mal(&f, 5, 0x300, 64);
    fre(&f, 0x200); // 0x300 never freed
    growth_finish(f.g);
    cr_assert_eq(growth_n_sites(f.g), 1);
    cr_expect_eq(growth_site(f.g, 0)->final_max, 64);
    growth_free(f.g);
}

Test(growth, hashbrown_layout_gives_the_element_size) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    // 32-byte entries: 4, 8, 16, 32 buckets -> round16(32 b) + b + 16
    uint64_t sizes[] = {128 + 4 + 16, 256 + 8 + 16, 512 + 16 + 16, 1024 + 32 + 16};
    for (size_t i = 0; i < 4; i++) {
        mal(&f, 3, 0x1000 * (i + 1), sizes[i]);
        if (i)
            fre(&f, 0x1000 * i);
    }
    growth_finish(f.g);
    const growth_site_t *s = growth_site_of(f.g, 3);
    cr_assert(s);
    cr_expect_eq(s->hashbrown_elem, 32);
    cr_expect_eq(s->n_steps, 3);
    growth_free(f.g);
}

Test(growth, short_lived_is_quick_or_temporary) {
    feed_t f = {growth_new(100), 0, NULL}; // 100 ns
    mal(&f, 1, 0x100, 8);
    fre(&f, 0x100); // temporary (and quick)
    mal(&f, 2, 0x200, 8);
    mal(&f, 2, 0x300, 8);
    fre(&f, 0x200); // 20 ns: quick, not temporary
    f.t += 1000;
    fre(&f, 0x300); // slow, but the thread's latest allocation: temporary
    mal(&f, 3, 0x400, 8);
    mal(&f, 4, 0x500, 8);
    f.t += 1000;
    fre(&f, 0x400); // slow, and the thread allocated since: not short-lived
    growth_short_t a = growth_short_of(f.g, 1), b = growth_short_of(f.g, 2),
                   c = growth_short_of(f.g, 3), d = growth_short_of(f.g, 99);
    cr_expect_eq(a.blocks, 1);
    cr_expect_eq(b.blocks, 2);
    cr_expect_eq(b.bytes, 16);
    cr_expect_eq(c.blocks, 0);
    cr_expect_eq(d.blocks, 0);
    growth_free(f.g);
}

// Realloc chains with final sizes 40, 20, 20, 80 at stack 7; a vector at stack 5; an allocation
// at a live address at stack 3.
static void mixed(feed_t *f) {
    static const uint64_t finals[] = {40, 20, 20, 80};
    for (uint64_t k = 0; k < 4; k++) {
        uint64_t a = 0x1000 * (k + 1);
        mal(f, 7, a, 10);
        rea(f, 8, a, a + 0x100, finals[k]);
        fre(f, a + 0x100);
    }
    mal(f, 5, 0x100, 16);
    mal(f, 5, 0x200, 32);
    fre(f, 0x100);
    mal(f, 5, 0x300, 64);
    fre(f, 0x200);
    mal(f, 3, 0x500, 8);
    mal(f, 3, 0x500, 8);
    fre(f, 0x500);
    fre(f, 0x300);
    growth_finish(f->g);
}

Test(growth, final_sizes_give_the_max_and_the_lower_median) {
    feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    mixed(&f);
    const growth_site_t *s = growth_site_of(f.g, 7);
    cr_assert(s);
    cr_expect_eq(s->n_chains, 4);
    cr_expect_eq(s->final_max, 80);
    cr_expect_eq(s->final_median, 20);
    growth_free(f.g);
}

// analyze.c keeps growth's blocks in replay's live table: the figures must not change.
Test(growth, attached_to_replay_gives_the_same_figures) {
    feed_t own = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
    feed_t att = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, replay_new(NULL, NULL)};
    replay_set_mode(att.rp, REPLAY_SITES);
    growth_attach(att.g, att.rp);
    mixed(&own);
    mixed(&att);
    cr_assert_eq(growth_n_sites(att.g), growth_n_sites(own.g));
    cr_assert_eq(growth_n_sites(own.g), 2);
    for (size_t i = 0; i < growth_n_sites(own.g); i++) {
        const growth_site_t *a = growth_site(att.g, i), *o = growth_site(own.g, i);
        cr_expect_eq(a->stack, o->stack);
        cr_expect_eq(a->n_chains, o->n_chains);
        cr_expect_eq(a->n_steps, o->n_steps);
        cr_expect_eq(a->n_realloc_steps, o->n_realloc_steps);
        cr_expect_eq(a->n_moves, o->n_moves);
        cr_expect_eq(a->bytes_copied, o->bytes_copied);
        cr_expect_eq(a->final_max, o->final_max);
        cr_expect_eq(a->final_median, o->final_median);
        cr_expect_eq(a->first_min, o->first_min);
    }
    for (uint64_t stack = 3; stack <= 8; stack++) {
        cr_expect_eq(growth_short_of(att.g, stack).blocks, growth_short_of(own.g, stack).blocks);
        cr_expect_eq(growth_short_of(att.g, stack).bytes, growth_short_of(own.g, stack).bytes);
    }
    cr_expect_eq(replay_totals(att.rp)->n_double_allocs, 1);
    growth_free(att.g);
    replay_free(att.rp);
    growth_free(own.g);
}

// Rule 5 of docs/growth.md: the free of the old block may come long after the new one's
// allocation (a thread descheduled between the copy and the free: 150 ms seen under load), but
// not more than 1 s + 100 ns a byte after it (a double buffer swapped after a long computation).
Test(growth, a_late_free_links_unless_it_is_seconds_late) {
    for (int slow = 0; slow < 2; slow++) {
        feed_t f = {growth_new(GROWTH_DEFAULT_SHORT_NS), 0, NULL};
        mal(&f, 5, 0x100, 1000);
        mal(&f, 5, 0x200, 2000);
        f.t += slow ? 1100000000ull : 150000000ull; // 100 ns a byte of 1000 bytes is 0.1 ms
        fre(&f, 0x100);
        mal(&f, 5, 0x300, 4000);
        f.t += slow ? 1100000000ull : 150000000ull;
        fre(&f, 0x200);
        fre(&f, 0x300);
        growth_finish(f.g);
        const growth_site_t *s = growth_site_of(f.g, 5);
        if (slow) {
            cr_expect_null(s, "a double buffer swapped after 1.1 s is no growth");
        } else {
            cr_assert(s, "a free 150 ms after the copy still links");
            cr_expect_eq(s->n_chains, 1);
            cr_expect_eq(s->n_steps, 2);
        }
        growth_free(f.g);
    }
}
