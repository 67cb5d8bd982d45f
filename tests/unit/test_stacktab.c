// SPDX-License-Identifier: MIT
// Stack interning and the per-thread ring, driven directly (no preloading): ids are stable and
// distinct, each stack is emitted exactly once as a STACK record that decodes to its frames,
// also across a table resize and with threads interning the same stacks at once.
#include "format/hpt_codec.h"
#include "stacktab.h"
#include "tbuf.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

// Drains r (as the writer would) and counts its STACK records, checking each decodes to frames
// that the table maps back to the record's id.
typedef struct seen {
    uint32_t n_stacks;
    uint32_t *ids; // ids seen, in order
} seen_t;

static void drain_stacks(hp_ring_t *r, seen_t *s, uint32_t cap) {
    uint64_t h = atomic_load(&r->head), t = atomic_load(&r->tail);
    size_t n = (size_t)(h - t);
    uint8_t *buf = malloc(n + 1);
    for (size_t i = 0; i < n; i++)
        buf[i] = r->data[(t + i) & (r->cap - 1)];
    atomic_store(&r->tail, h);
    hpt_dstate_t st = {0};
    const uint8_t *p = buf, *end = buf + n;
    hpt_rec_t rec = {0};
    while (p < end) {
        p = hpt_rec_decode(p, end, &st, &rec);
        cr_assert(p, "ring holds an undecodable record");
        cr_assert_eq(rec.tag, HPT_REC_STACK);
        uint64_t frames[HPT_MAX_FRAMES];
        cr_assert_eq(hpt_stack_frames(&rec, frames), 0);
        // the record must decode to frames the table maps to the same id (make_frames shape)
        for (uint32_t i = 1; i < rec.n_frames; i++)
            cr_assert_eq(frames[i], frames[0] + i * 8, "stack %lu frame %u", (unsigned long)rec.stack, i);
        cr_assert_eq(hp_stacktab_find(frames, rec.n_frames), rec.stack);
        if (s->n_stacks < cap)
            s->ids[s->n_stacks] = (uint32_t)rec.stack;
        s->n_stacks++;
    }
    free(buf);
}

static uint32_t make_frames(uint64_t *f, uint32_t key, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        f[i] = 0x400000 + (uint64_t)key * 64 + i * 8;
    return n;
}

Test(stacktab, same_frames_same_id_and_one_record) {
    hp_ring_t *r = hp_tbuf_new(1);
    cr_assert(r);
    uint64_t f[16];
    uint32_t n = make_frames(f, 1, 12);
    cr_assert_eq(hp_stacktab_find(f, n), HPT_STACK_UNKNOWN);
    uint32_t id = hp_stacktab_intern(r, f, n);
    cr_assert_neq(id, HPT_STACK_UNKNOWN);
    cr_assert_eq(hp_stacktab_find(f, n), id);
    cr_assert_eq(hp_stacktab_intern(r, f, n), id, "interning twice must not make a new id");
    uint32_t ids[4];
    seen_t s = {0, ids};
    drain_stacks(r, &s, 4);
    cr_assert_eq(s.n_stacks, 1, "the stack was written %u times", s.n_stacks);
    cr_assert_eq(ids[0], id);

    // a prefix or a one-frame change is a different stack
    uint64_t g[16];
    memcpy(g, f, sizeof f);
    cr_assert_eq(hp_stacktab_find(g, n - 1), HPT_STACK_UNKNOWN);
    g[5] ^= 0x10;
    cr_assert_eq(hp_stacktab_find(g, n), HPT_STACK_UNKNOWN);
}

Test(stacktab, ids_survive_table_growth) {
    hp_ring_t *r = hp_tbuf_new(2);
    enum { N = 20000 }; // several doublings past the initial 4096 slots
    static uint32_t id[N];
    uint32_t *seen_ids = malloc(N * sizeof *seen_ids);
    seen_t s = {0, seen_ids};
    uint64_t f[8];
    for (uint32_t k = 0; k < N; k++) {
        id[k] = hp_stacktab_intern(r, f, make_frames(f, 10 + k, 1 + k % 8));
        cr_assert_neq(id[k], HPT_STACK_UNKNOWN);
        if (k % 1000 == 999)
            drain_stacks(r, &s, N); // keep the ring from filling (no writer here)
    }
    drain_stacks(r, &s, N);
    cr_assert_eq(s.n_stacks, N);
    for (uint32_t k = 0; k < N; k++)
        cr_assert_eq(hp_stacktab_find(f, make_frames(f, 10 + k, 1 + k % 8)), id[k],
                     "stack %u lost its id after growth", k);
    free(seen_ids);
}

#define THREADS 4
#define PER_THREAD 3000
static hp_ring_t *rings[THREADS];
static uint32_t got[THREADS][PER_THREAD];

static void *intern_overlapping(void *arg) {
    unsigned t = (unsigned)(uintptr_t)arg;
    uint64_t f[6];
    // every thread interns the same 3000 stacks, in a different order
    for (uint32_t i = 0; i < PER_THREAD; i++) {
        uint32_t k = (i * 7 + t * 1009) % PER_THREAD;
        got[t][k] = hp_stacktab_intern(rings[t], f, make_frames(f, 50000 + k, 6));
    }
    return NULL;
}

Test(stacktab, concurrent_interning_gives_one_id_and_one_record_per_stack) {
    pthread_t th[THREADS];
    for (unsigned t = 0; t < THREADS; t++)
        rings[t] = hp_tbuf_new(100 + t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, intern_overlapping, (void *)(uintptr_t)t);
    for (unsigned t = 0; t < THREADS; t++)
        pthread_join(th[t], NULL);
    for (uint32_t k = 0; k < PER_THREAD; k++)
        for (unsigned t = 1; t < THREADS; t++)
            cr_assert_eq(got[t][k], got[0][k], "threads disagree on the id of stack %u", k);
    uint32_t total = 0;
    for (unsigned t = 0; t < THREADS; t++) {
        seen_t s = {0, NULL};
        drain_stacks(rings[t], &s, 0);
        total += s.n_stacks;
    }
    cr_assert_eq(total, PER_THREAD, "%u STACK records for %u distinct stacks", total, PER_THREAD);
}

Test(tbuf, records_wrap_around_the_ring_intact) {
    hp_ring_t *r = hp_tbuf_new(7);
    uint8_t rec[37];
    uint64_t written = 0;
    // write odd-sized records across many wraps, draining as a writer would
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < 1000; i++) {
            memset(rec, (int)(written % 251), sizeof rec);
            cr_assert(hp_tbuf_append(r, rec, sizeof rec));
            written++;
        }
        uint64_t h = atomic_load(&r->head), t = atomic_load(&r->tail);
        uint64_t first = written - (h - t) / sizeof rec;
        for (uint64_t off = t, k = first; off < h; off += sizeof rec, k++)
            for (size_t b = 0; b < sizeof rec; b++)
                cr_assert_eq(r->data[(off + b) & (r->cap - 1)], (uint8_t)(k % 251));
        atomic_store(&r->tail, h);
    }
}
