// SPDX-License-Identifier: MIT
// The heap stream (docs/trace-format.md#heap): the reader's decoding of HEAP chunks (serials,
// thread switches, H_REUSE, realloc in place and moved, unknown frees, the time unit, a lost
// chunk), and the shim's encoder (preload/resolve.c) end to end: random address-level histories
// with address reuse go through hp_resolve_rec and the reader, and every free must name the
// block the history freed.
#include "read_trace.h"
#include "reader.h"
#include "resolve.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

typedef rt_events_t evs_t;

static evs_t read_file(tb_t *tb, reader_t **out) {
    *out = rt_open_built(tb, path);
    return rt_read_all(*out);
}

static tb_t *new_builder(unsigned time_shift) {
    hpt_file_hdr_t h;
    tb_default_hdr(&h);
    h.time_shift = time_shift;
    return tb_new_hdr(&h);
}

Test(heap_stream, serials_threads_reuse_and_realloc, .fini = cleanup) {
    tb_t *tb = new_builder(10);
    const uint64_t u = 1024;
    tb_begin(tb, HPT_CHUNK_HEAP, 7, 0, 100); // serials start at 100 in this chunk
    uint64_t a = tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 1 * u, 1, 10, 0);
    uint64_t b = tb_rec_h_alloc(tb, HPT_REC_H_CALLOC, 1 * u, 2, 20, 0);
    tb_rec_h_tid(tb, 8);
    uint64_t c = tb_rec_h_alloc(tb, HPT_REC_H_ALIGNED, 2 * u, 3, 30, 64);
    tb_rec_h_free(tb, 3 * u, a, HPT_TOUCH_FILL, 4); // thread 8 frees thread 7's block
    tb_rec_h_realloc_free(tb, 4 * u, c);
    uint64_t c2 = tb_rec_h_realloc(tb, 5 * u, 4, 60, c, true); // grown in place
    tb_rec_h_reuse(tb, b); // b's free was missed: its address comes back
    uint64_t d = tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 6 * u, 5, 40, 0);
    tb_rec_h_tid(tb, 7);
    tb_rec_h_realloc_free(tb, 7 * u, c2);
    uint64_t c3 = tb_rec_h_realloc(tb, 8 * u, 4, 90, c2, false); // moved
    tb_rec_h_free(tb, 9 * u, 0, -1, 0);       // never seen allocated
    tb_end(tb, true);
    cr_assert_eq(a, 100);
    cr_assert_eq(b, 101);
    cr_assert_eq(c, 102);
    cr_assert_eq(c2, 102);
    cr_assert_eq(d, 101);
    cr_assert_eq(c3, 103);

    reader_t *r;
    evs_t e = read_file(tb, &r);
    cr_assert_eq(e.n, 10);
    const reader_event_t *v = e.v;
    cr_expect(v[0].kind == READER_ALLOC && v[0].sub == READER_MALLOC && v[0].addr == 100 &&
              v[0].tid == 7 && v[0].time_ns == u && v[0].size == 10 && v[0].stack == 1);
    cr_expect(v[1].sub == READER_CALLOC && v[1].addr == 101 && v[1].tid == 7);
    cr_expect(v[2].sub == READER_ALIGNED && v[2].addr == 102 && v[2].tid == 8 &&
              v[2].time_ns == 2 * u);
    cr_expect(v[3].kind == READER_FREE && v[3].addr == 100 && v[3].tid == 8 && v[3].touch &&
              v[3].touched == 4 && v[3].flags == 0);
    cr_expect(v[4].kind == READER_FREE && v[4].addr == 102 &&
              v[4].flags == READER_FREE_OF_REALLOC);
    cr_expect(v[5].sub == READER_REALLOC && v[5].addr == 102 && v[5].old_addr == 102 &&
              v[5].size == 60);
    cr_expect(v[6].sub == READER_MALLOC && v[6].addr == 101, "H_REUSE gives the live serial");
    cr_expect(v[7].kind == READER_FREE && v[7].addr == 102 && v[7].tid == 7);
    cr_expect(v[8].sub == READER_REALLOC && v[8].addr == 103 && v[8].old_addr == 102 &&
              v[8].time_ns == 8 * u && v[8].size == 90, "size coded as a change from 60");
    cr_expect(v[9].kind == READER_FREE && v[9].addr == 0, "unknown free: serial 0");
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

// Two HEAP chunks and no SYNC, optionally after a thread's EVENTS chunk with an event: where the
// reader stands when it hands out its first events.
static uint64_t offset_at_first_batch(bool events_chunk_first, uint64_t *file_size) {
    tb_t *tb = new_builder(0);
    if (events_chunk_first) {
        // later than every heap event: only the watermark rule holds those back
        tb_begin(tb, HPT_CHUNK_EVENTS, 2, 0, 0);
        tb_rec_malloc(tb, 500, 1, 0x1000, 8);
        tb_end(tb, false);
    }
    for (uint64_t c = 0; c < 2; c++) {
        tb_begin(tb, HPT_CHUNK_HEAP, 1, 10 + 100 * c, 1 + 10 * c);
        for (uint64_t i = 0; i < 10; i++)
            tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 10 + 100 * c + i, 1, 16, 0);
        tb_end(tb, false);
    }
    size_t n;
    tb_data(tb, &n);
    *file_size = n;
    reader_t *r = rt_open_built(tb, path);
    errmsg_t err;
    errmsg_init(&err);
    const reader_event_t *evs;
    size_t got;
    cr_assert_eq(reader_next_batch(r, &evs, &got, &err), 1);
    uint64_t at = reader_offset(r);
    reader_close(r);
    tb_free(tb);
    return at;
}

// The writer merged the heap stream, and nothing else brings events: a chunk's events leave as
// soon as it is decoded, not at the next SYNC (on c_threads 8 five HEAP chunks come between two
// SYNCs). Once a thread's EVENTS chunk has brought events, the heap stream waits for the
// watermark too, so the two merge in time order.
Test(heap_stream, heap_events_alone_need_no_sync, .fini = cleanup) {
    uint64_t size;
    uint64_t at = offset_at_first_batch(false, &size);
    cr_expect_lt(at, size, "the first chunk's events waited for the end of the file");
    at = offset_at_first_batch(true, &size);
    cr_expect_eq(at, size, "with a thread's events about, the heap stream must wait");
}

// A heap chunk larger than a slice (reader.c decodes the heap stream 16,384 records at a time)
// comes out whole and in order; one whose last slice does not decode (it claims a record more
// than its columns hold) keeps the slices before it and counts as damaged.
static void big_heap_chunk(bool damaged) {
    const uint32_t n = 40000;
    tb_t *tb = new_builder(0);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 0, 1);
    for (uint32_t i = 0; i < n; i++)
        tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, i, 1, 16 + i % 7, 0);
    if (damaged)
        tb_set_n_records(tb, n + 1);
    tb_end(tb, false);
    reader_t *r;
    evs_t e = read_file(tb, &r);
    const reader_damage_t *dmg = reader_damage(r);
    if (damaged) {
        cr_expect_eq(e.n, 2 * 16384, "the slices before the damage are kept");
        cr_expect_eq(dmg->chunks_ok, 0);
        cr_expect_eq(dmg->chunks_damaged, 1);
    } else {
        cr_expect_eq(e.n, n);
        cr_expect_eq(dmg->chunks_ok, 1);
        cr_expect_eq(dmg->chunks_damaged, 0);
    }
    for (size_t i = 0; i < e.n; i++)
        cr_assert(e.v[i].kind == READER_ALLOC && e.v[i].addr == i + 1 && e.v[i].time_ns == i &&
                      e.v[i].size == 16 + i % 7,
                  "event %zu", i);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(heap_stream, a_chunk_larger_than_a_slice, .fini = cleanup) {
    big_heap_chunk(false);
    big_heap_chunk(true);
}

Test(heap_stream, a_lost_chunk_costs_only_its_own_blocks, .fini = cleanup) {
    tb_t *tb = new_builder(0);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 0, 1);
    uint64_t a = tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 10, 1, 8, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 10, 2);
    uint64_t b = tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 20, 1, 16, 0);
    size_t bad = tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 20, 3);
    tb_rec_h_free(tb, 30, a, -1, 0);
    tb_rec_h_free(tb, 31, b, -1, 0);
    tb_end(tb, false);
    size_t n;
    uint8_t *d = tb_data(tb, &n);
    d[bad + sizeof(hpt_chunk_hdr_t)] ^= 0xff; // the second chunk's payload: crc fails
    reader_t *r;
    evs_t e = read_file(tb, &r);
    cr_assert_eq(e.n, 3);
    cr_expect_eq(e.v[0].addr, 1);
    cr_expect(e.v[1].kind == READER_FREE && e.v[1].addr == 1);
    cr_expect(e.v[2].kind == READER_FREE && e.v[2].addr == 2, "the base in each header resyncs");
    cr_expect_eq(reader_damage(r)->chunks_damaged, 1);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(heap_stream, records_of_the_other_stream_are_damage, .fini = cleanup) {
    tb_t *tb = new_builder(0);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 0, 1);
    tb_rec_malloc(tb, 5, 1, 0x1000, 8); // an address record has no place in the heap stream
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, 6, 1, 8, 0); // nor a serial record in a thread's
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 0, 1);
    tb_rec_h_free(tb, 7, 5, -1, 0); // serial 5 with the base at 1: below serial 0
    tb_end(tb, false);
    reader_t *r;
    evs_t e = read_file(tb, &r);
    cr_expect_eq(e.n, 0);
    cr_expect_eq(reader_damage(r)->chunks_damaged, 3);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

Test(heap_stream, frees_in_and_against_allocation_order, .fini = cleanup) {
    // the "ordered" form of a free's reference (after the last freed serial) and the "young"
    // one (back from the base) both decode, across a chunk boundary that resets the former
    tb_t *tb = new_builder(0);
    uint64_t s[200];
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 0, 1);
    for (int i = 0; i < 200; i++)
        s[i] = tb_rec_h_alloc(tb, HPT_REC_H_MALLOC, (uint64_t)i, 1, 8, 0);
    for (int i = 0; i < 100; i++)
        tb_rec_h_free(tb, 300, s[i], -1, 0); // in order
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_HEAP, 1, 300, 201);
    for (int i = 199; i >= 100; i -= 3)
        tb_rec_h_free(tb, 301, s[i], -1, 0); // backwards, every third
    tb_end(tb, false);
    reader_t *r;
    evs_t e = read_file(tb, &r);
    cr_assert_eq(reader_damage(r)->chunks_damaged, 0);
    size_t k = 200;
    for (int i = 0; i < 100; i++, k++)
        cr_assert(e.v[k].kind == READER_FREE && e.v[k].addr == s[i], "free %d", i);
    for (int i = 199; i >= 100; i -= 3, k++)
        cr_assert(e.v[k].kind == READER_FREE && e.v[k].addr == s[i], "backward free %d", i);
    cr_assert_eq(e.n, k);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}

// ---- the shim's encoder, end to end ----

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return rt_xorshift(&rng); }

typedef struct ring_rec {
    hpt_rec_t rec;
    uint8_t raw[64];
    size_t raw_len;
    uint32_t tid;
} ring_rec_t;

// What the history says each free frees: index of the allocation event (in reader order).
typedef struct truth {
    size_t *freed_alloc; // per reader event: the alloc event index it frees (SIZE_MAX: none)
} truth_t;

// Feeds one ring record to the encoder (the tags the test uses need no raw bytes).
static void feed(hp_resolve_t *rs, hp_hout_t *out, const hpt_rec_t *rec, uint32_t tid, int half,
                 hp_resolve_pending_t *pend) {
    uint8_t raw[8] = {rec->tag, 0};
    cr_assert(hp_resolve_rec(rs, out, tid, rec, raw, raw + 2, half, pend));
}

// Ends the open HEAP chunk with what the encoder wrote since it began.
static void end_chunk(hp_resolve_t *rs, hp_hout_t *out, tb_t *tb, bool zstd) {
    uint8_t *payload = malloc(hp_hout_bytes(out) + HP_HOUT_TABLE_MAX);
    size_t n = hp_hout_assemble(out, payload);
    tb_payload(tb, payload, n, rs->n_out);
    rs->n_out = 0;
    tb_end(tb, zstd);
    free(payload);
}

Test(heap_stream, resolver_keeps_every_block_apart_under_address_reuse, .fini = cleanup) {
    enum { N_EVENTS = 200000, N_ADDR = 512, N_TIDS = 3 };
    hp_resolve_t rs;
    cr_assert(hp_resolve_init(&rs, 4));
    tb_t *tb = new_builder(4);
    hp_hout_t out = {0};
    for (int c = 0; c < HPT_HCOLS; c++)
        out.col[c] = malloc(8u << 20);
    // live[a]: index (in reader order) of the alloc event holding address slot a, or -1
    static long live[N_ADDR];
    for (size_t i = 0; i < N_ADDR; i++)
        live[i] = -1;
    size_t cap = 3 * N_EVENTS;
    long *expect = malloc(cap * sizeof *expect); // per reader event: the alloc it frees
    uint64_t *sizes = calloc(cap, sizeof *sizes); // per allocation event: its size
    size_t n_ev = 0;
    uint64_t t = 0;
    hp_resolve_chunk_start(&rs);
    tb_begin(tb, HPT_CHUNK_HEAP, rs.tid, rs.enc.time_ns, rs.enc.addr);
    for (int i = 0; i < N_EVENTS; i++) {
        if (i % 5000 == 0 && i) { // a new chunk now and then: its header carries the bases
            end_chunk(&rs, &out, tb, i % 10000 == 0);
            hp_resolve_chunk_start(&rs);
            tb_begin(tb, HPT_CHUNK_HEAP, rs.tid, rs.enc.time_ns, rs.enc.addr);
        }
        t += rnd() % 3000;
        uint32_t tid = 1 + (uint32_t)(rnd() % N_TIDS);
        size_t a = rnd() % N_ADDR;
        uint64_t addr = 0x10000 + a * 16;
        hpt_rec_t rec = {0};
        rec.time_ns = t;
        hp_resolve_pending_t pend = {0};
        unsigned what = (unsigned)(rnd() % 10);
        if (live[a] < 0 || what == 0) {
            // an allocation; what == 0 on a live address: its free was missed (H_REUSE)
            rec.tag = what == 1 ? HPT_REC_CALLOC : HPT_REC_MALLOC;
            rec.addr = addr;
            rec.stack = a % 7;
            rec.size = 1 + a;
            expect[n_ev] = live[a] >= 0 ? -2 - live[a] : -1; // -2-k: takes over k's serial
            sizes[n_ev] = rec.size;
            feed(&rs, &out, &rec, tid, 0, &pend);
            live[a] = (long)n_ev++;
        } else if (what < 6) {
            rec.tag = HPT_REC_FREE;
            rec.addr = addr;
            // the stream keeps one count: bytes not zero for a calloc block, else the pattern's
            rec.touch = 1 + HPT_TOUCH_FILL;
            rec.touched = 7;
            rec.touched_nz = 99;
            expect[n_ev++] = live[a];
            feed(&rs, &out, &rec, tid, 0, &pend);
            live[a] = -1;
        } else {
            // realloc: in place (same address) or moved to a free address
            size_t b = a;
            if (what >= 8) {
                b = rnd() % N_ADDR;
                if (live[b] >= 0 && b != a)
                    b = a;
            }
            rec.tag = HPT_REC_REALLOC;
            rec.old_addr = addr;
            rec.addr = 0x10000 + b * 16;
            rec.time2_ns = t + 16;
            rec.stack = 9;
            rec.size = what == 9 ? 5000 + a : sizes[live[a]] + 1 + rnd() % 3; // grown, or anew
            expect[n_ev++] = live[a]; // the free half
            feed(&rs, &out, &rec, tid, 0, &pend);
            live[a] = -1;
            expect[n_ev] = -1;
            sizes[n_ev] = rec.size;
            feed(&rs, &out, &rec, tid, 1, &pend);
            live[b] = (long)n_ev++;
            t += 16;
        }
    }
    end_chunk(&rs, &out, tb, true);
    hp_resolve_fini(&rs);
    for (int c = 0; c < HPT_HCOLS; c++)
        free(out.col[c]);

    reader_t *r;
    evs_t e = read_file(tb, &r);
    cr_assert_eq(e.n, n_ev);
    cr_assert_eq(reader_damage(r)->chunks_damaged, 0);
    for (size_t i = 0; i < n_ev; i++) {
        const reader_event_t *v = &e.v[i];
        if (v->kind == READER_ALLOC) {
            if (expect[i] <= -2) {
                cr_assert_eq(v->addr, e.v[-2 - expect[i]].addr, "event %zu: H_REUSE", i);
            } else {
                for (size_t j = 0; j < i && j < 64; j++) // fresh serials are never reused
                    cr_assert(e.v[i - 1 - j].kind != READER_ALLOC ||
                                  e.v[i - 1 - j].addr != v->addr ||
                                  (v->sub == READER_REALLOC && v->old_addr == v->addr),
                              "event %zu reuses a serial", i);
            }
            cr_assert_eq(v->time_ns & 15, 0, "times are whole units");
            cr_assert_eq(v->size, sizes[i], "event %zu: size", i);
        } else {
            long k = expect[i];
            uint64_t want = k < 0 ? 0 : e.v[k].addr;
            cr_assert_eq(v->addr, want, "event %zu frees serial %lu, expected %lu", i,
                         (unsigned long)v->addr, (unsigned long)want);
            if (!(v->flags & READER_FREE_OF_REALLOC)) {
                bool calloced = k >= 0 && e.v[k].sub == READER_CALLOC;
                cr_assert(v->touch && v->touched == (calloced ? 99u : 7u),
                          "event %zu: touch %lu for a %s block", i, (unsigned long)v->touched,
                          calloced ? "calloc" : "malloc");
            }
        }
    }
    free(expect);
    free(sizes);
    free(e.v);
    reader_close(r);
    tb_free(tb);
}
