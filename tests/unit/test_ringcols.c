// SPDX-License-Identifier: MIT
// ringcols.h: a ring's entries (ringent.h) -> chunks, in columns or as rows, say exactly the
// trace rows the shim wrote before its rings held fixed-width entries: random streams of every
// entry kind (and the trace records between them) are cut into chunks of several sizes, each
// chunk's columns untransposed, and the rows, chunk bases and counts compared with the rows a
// reference encoder (the old per-event encoder) makes of the same events.
#include "ringcols.h"
#include "ringent.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static hpt_cols_enc_t enc; // 768 KiB: not on the stack

#define CAP (1u << 20)
static uint8_t ring[CAP], ref[CAP], got[CAP], cols[4u << 20], rows[CAP], scratch[HP_RC_SCRATCH];
static hpt_cols_alloc_t allocs[1 << 16];

typedef struct stream {
    uint8_t *e, *r;  // next entry byte, next reference row byte
    hpt_dstate_t d;  // the reference encoder's state
    uint64_t t;      // the event clock
    uint64_t hi;     // the high time bits of the last THI entry
    uint32_t n_rec, n_ev;
    uint64_t live[64]; // addresses handed out, for frees of known blocks
    unsigned n_live;
} stream_t;

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void) { return xorshift64(&rng); }

static void r_time(stream_t *s, uint64_t t) {
    s->r = hpt_put_varint(s->r, t - s->d.time_ns);
    s->d.time_ns = t;
}
static void r_addr(stream_t *s, uint64_t a) {
    s->r = hpt_put_varint(s->r, hpt_zigzag((int64_t)(a - s->d.addr)));
    s->d.addr = a;
}

static uint64_t pick_addr(void) {
    switch (rnd() % 8) {
    case 0:
        return rnd(); // anywhere, unaligned
    case 1:
        return 0xffffffffffff0000ull + (rnd() & 0xfff0); // deltas the codes may not take
    default:
        return 0x7f0000000000ull + (rnd() & 0xffff0);
    }
}

static uint64_t pick_size(void) {
    switch (rnd() % 6) {
    case 0:
        return rnd(); // wider than 32 bits, mostly
    case 1:
        return rnd() & 0xffffffffu;
    default:
        return rnd() % 512;
    }
}

// One random event or record, into the ring as the shim writes it and into the reference rows
// as the shim wrote them before.
static void one(stream_t *s) {
    s->t += rnd() % 50 == 0 ? rnd() % (1ull << 34) : rnd() % 3 == 0 ? rnd() % 100000 : rnd() % 50;
    const uint64_t t = s->t;
    unsigned k = rnd() % 20;
    if (k < 13 && t >> 32 != s->hi) { // an event's entry carries its time's low bits
        s->hi = t >> 32;
        s->e += hp_re_put_thi(s->e, (uint32_t)s->hi);
    }
    if (k < 6) { // an allocation
        uint8_t tag = k < 4 ? HPT_REC_MALLOC : k == 4 ? HPT_REC_CALLOC : HPT_REC_ALIGNED;
        uint64_t a = pick_addr(), size = pick_size(), align = 1ull << (rnd() % 20);
        uint32_t stack = (uint32_t)(rnd() % 4 ? rnd() % 300 : rnd());
        s->e += hp_re_put_alloc(s->e, tag, t, a, stack, size, align);
        *s->r++ = tag;
        r_time(s, t);
        s->r = hpt_put_varint(s->r, stack);
        r_addr(s, a);
        s->r = hpt_put_varint(s->r, size);
        if (tag == HPT_REC_ALIGNED)
            s->r = hpt_put_varint(s->r, align);
        s->live[s->n_live++ % 64] = a;
        s->n_ev++;
    } else if (k < 11) { // a free, of a known block mostly
        uint64_t a = s->n_live && rnd() % 4 ? s->live[rnd() % (s->n_live < 64 ? s->n_live : 64)]
                                            : pick_addr();
        int method = (int)(rnd() % 5) - 1;
        // a count of a block's bytes: below 2^62, which the touch varint carries
        uint64_t touched = rnd() % 3 ? rnd() % 4096 : rnd() >> (2 + rnd() % 40);
        uint64_t nz = rnd() % 2 ? touched + rnd() % 64 : rnd() >> (rnd() % 40);
        if (method == HPT_TOUCH_RESIDENT)
            nz = touched;
        s->e += hp_re_put_free(s->e, t, a, method, touched, nz);
        *s->r++ = HPT_REC_FREE;
        r_time(s, t);
        r_addr(s, a);
        s->r = hpt_put_touch(s->r, method, touched, nz);
        s->n_ev++;
    } else if (k < 13) { // a sized free
        uint64_t a = s->n_live ? s->live[rnd() % (s->n_live < 64 ? s->n_live : 64)] : 0x1000;
        uint64_t size = pick_size(), align = rnd() % 2 ? 0 : 16;
        s->e += hp_re_put_free_sized(s->e, t, a, size, align);
        *s->r++ = HPT_REC_FREE_SIZED;
        r_time(s, t);
        r_addr(s, a);
        s->r = hpt_put_varint(s->r, size);
        s->r = hpt_put_varint(s->r, align);
        s->n_ev++;
    } else if (k < 16) { // a realloc: in place, moved, or grown a byte
        uint64_t old = s->n_live ? s->live[rnd() % (s->n_live < 64 ? s->n_live : 64)] : 0x2000;
        uint64_t a = rnd() % 2 ? old : pick_addr();
        uint64_t size = rnd() % 2 ? 100 + rnd() % 3 : pick_size();
        uint64_t t1 = rnd() % 2 ? t : t + rnd() % 1000;
        uint32_t stack = (uint32_t)(rnd() % 300);
        s->e += hp_re_put_realloc(s->e, t, t1, stack, old, a, size);
        *s->r++ = HPT_REC_REALLOC;
        r_time(s, t);
        s->r = hpt_put_varint(s->r, t1 - t);
        s->d.time_ns = s->t = t1;
        s->r = hpt_put_varint(s->r, stack);
        r_addr(s, old);
        r_addr(s, a);
        s->r = hpt_put_varint(s->r, size);
        s->live[s->n_live++ % 64] = a;
        s->n_ev++;
    } else if (k < 18) { // a new stack: STACK records have no time
        uint8_t *p = s->e;
        *p++ = HPT_REC_STACK;
        p = hpt_put_varint(p, rnd() % 1000);
        unsigned n = 1 + rnd() % 20;
        p = hpt_put_varint(p, n);
        for (unsigned i = 0; i < n; i++)
            p = hpt_put_varint(p, rnd() >> (rnd() % 64));
        memcpy(s->r, s->e, (size_t)(p - s->e));
        s->r += p - s->e;
        s->e = p;
    } else { // the module scan of a new stack: TBASE, then records counting from it
        s->e += hp_re_put_tbase(s->e, t);
        for (unsigned m = rnd() % 3; m > 0; m--) {
            uint8_t *p = s->e, *q = s->r;
            bool load = rnd() % 2;
            *p++ = *q++ = load ? HPT_REC_MODULE_LOAD : HPT_REC_MODULE_UNLOAD;
            p = hpt_put_varint(p, 0);
            s->r = q;
            r_time(s, t);
            q = s->r;
            uint8_t body[64], *b = body;
            b = hpt_put_varint(b, rnd());
            if (load) {
                b = hpt_put_varint(b, rnd() % 100000);
                b = hpt_put_varint(b, 5);
                memcpy(b, "/lib/", 5);
                b += 5;
                b = hpt_put_varint(b, 0);
            }
            memcpy(p, body, (size_t)(b - body));
            memcpy(q, body, (size_t)(b - body));
            s->e = p + (b - body);
            s->r = q + (b - body);
            s->n_rec++;
        }
        return;
    }
    s->n_rec++;
}

// Drains the stream's entries in chunks of at most max row bytes from pos, as pipeline.c does,
// and checks every chunk against the reference rows.
static void drain_and_check(const stream_t *s, hp_rc_pos_t pos, size_t max, unsigned *n_cols,
                            unsigned *n_rows) {
    const uint8_t *p = ring, *end = s->e;
    size_t off = 0; // into the reference rows
    hpt_dstate_t chk = pos.w;
    uint32_t recs = 0, evs = 0;
    while (p < end) {
        hp_rc_pos_t pc = pos, pr = pos;
        hp_rc_info_t ic, ir;
        size_t cn = hp_rc_columns(p, (size_t)(end - p), max, cols, sizeof cols, &enc, scratch,
                                  &pc, &ic);
        size_t rows_cap =
            max + HPT_COLS_REC_MAX < sizeof rows ? max + HPT_COLS_REC_MAX : sizeof rows;
        cr_assert(hp_rc_rows(p, (size_t)(end - p), max, rows, rows_cap, scratch,
                             &pr, &ir));
        cr_assert(ir.in_bytes > 0);
        cr_assert(ir.row_bytes <= max || ir.n_records == 1);
        cr_assert(ir.row_bytes <= (size_t)(s->r - ref) - off);
        cr_assert(!memcmp(rows, ref + off, ir.row_bytes), "rows differ at %zu", off);
        // the chunk's base is where the rows before it left the delta state
        cr_assert(chk.time_ns == pos.w.time_ns && chk.addr == pos.w.addr);
        for (const uint8_t *q = rows, *qe = rows + ir.row_bytes; q < qe;) {
            hpt_rec_t r;
            cr_assert((q = hpt_rec_decode(q, qe, &chk, &r)));
        }
        cr_assert(chk.time_ns == pr.w.time_ns && chk.addr == pr.w.addr);
        if (cn) {
            (*n_cols)++;
            cr_assert(ic.in_bytes == ir.in_bytes && ic.row_bytes == ir.row_bytes &&
                      ic.n_records == ir.n_records && ic.n_events == ir.n_events);
            cr_assert(pc.w.time_ns == pr.w.time_ns && pc.w.addr == pr.w.addr &&
                      pc.raw_time == pr.raw_time && pc.t_hi == pr.t_hi);
            memset(got, 0xee, ir.row_bytes + 1);
            size_t gn = hpt_cols_untranspose(cols, cn, got, sizeof got, allocs, 1 << 16);
            cr_assert(gn == ir.row_bytes, "untranspose %zu, rows %zu", gn, ir.row_bytes);
            cr_assert(!memcmp(got, rows, gn));
        } else {
            (*n_rows)++;
        }
        off += ir.row_bytes;
        recs += ir.n_records;
        evs += ir.n_events;
        p += ir.in_bytes;
        pos = pr;
    }
    cr_assert(off == (size_t)(s->r - ref), "rows %zu of %zu", off, (size_t)(s->r - ref));
    cr_assert(recs == s->n_rec && evs == s->n_ev, "records %u/%u events %u/%u", recs, s->n_rec,
              evs, s->n_ev);
}

Test(ringcols, chunks_say_what_the_rows_said) {
    unsigned n_cols = 0, n_rows = 0;
    for (int round = 0; round < 40; round++) {
        stream_t s = {.e = ring, .r = ref};
        hp_rc_pos_t pos = {{0, 0}, 0, 0};
        if (round % 2) { // the middle of a ring: its stream somewhere already
            s.t = s.d.time_ns = rnd() >> 8;
            s.d.addr = 0x7f0000000000ull;
            s.hi = s.t >> 32;
            pos = (hp_rc_pos_t){s.d, s.d.time_ns, s.hi};
        } else { // a ring's first record counts from 0
            s.t = rnd() >> 20;
            uint8_t *p = s.e;
            *p++ = HPT_REC_THREAD_START;
            p = hpt_put_varint(p, s.t);
            p = hpt_put_varint(p, 4);
            memcpy(p, "main", 4);
            p += 4;
            memcpy(s.r, s.e, (size_t)(p - s.e));
            s.r += p - s.e;
            s.e = p;
            s.d.time_ns = s.t;
            s.n_rec++;
        }
        unsigned n = 1 + (unsigned)(rnd() % 3000);
        for (unsigned i = 0; i < n; i++)
            one(&s);
        if (round % 4 == 0) { // thread exit: TBASE, then THREAD_END counting from it
            s.t += 7;
            s.e += hp_re_put_tbase(s.e, s.t);
            *s.e++ = HPT_REC_THREAD_END;
            *s.e++ = 0;
            *s.r++ = HPT_REC_THREAD_END;
            r_time(&s, s.t);
            s.n_rec++;
        }
        cr_assert((size_t)(s.e - ring) < CAP / 2 && (size_t)(s.r - ref) < CAP / 2);
        size_t maxes[] = {1, 64, 1000, 1 << 20};
        for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++)
            drain_and_check(&s, pos, maxes[m], &n_cols, &n_rows);
    }
    cr_assert(n_cols > 100 && n_rows > 10, "columns %u, rows %u", n_cols, n_rows);
}

// The CPU sampler's ring holds only trace records, their times signed deltas from the one
// before: they stand as they are.
Test(ringcols, trace_records_in_stream_stand_as_they_are) {
    uint8_t *p = ring;
    for (int i = 0; i < 100; i++) {
        *p++ = HPT_REC_CPU_SAMPLE;
        p = hpt_put_varint(p, hpt_zigzag(i % 3 ? 1000 : -300));
        p = hpt_put_varint(p, 42);
        p = hpt_put_varint(p, (uint64_t)i);
    }
    hp_rc_pos_t pos = {{5000, 0}, 5000, 0};
    hp_rc_info_t info;
    size_t cn = hp_rc_columns(ring, (size_t)(p - ring), 1 << 20, cols, sizeof cols, &enc, scratch,
                              &pos, &info);
    cr_assert(cn && info.row_bytes == (size_t)(p - ring) && info.n_records == 100 &&
              info.n_events == 0);
    cr_assert(hpt_cols_untranspose(cols, cn, got, sizeof got, allocs, 1) == info.row_bytes);
    cr_assert(!memcmp(got, ring, info.row_bytes));
    cr_assert(pos.w.time_ns == 5000 + 66 * 1000 - 34 * 300 && pos.raw_time == pos.w.time_ns);
}

// Columns that run out of room are refused whole (the drain then writes rows), never written
// past out_cap: the column writer checks the room once for several entries (ringcols.c,
// RC_ROOM_EVERY), so the check must hold for the widest entries of every kind.
Test(ringcols, columns_out_of_room_are_refused_never_overrun) {
    uint8_t *p = ring;
    uint64_t t = 1;
    for (int i = 0; i < 3000; i++) {
        // unaligned and far apart in the user half: the longest address codes the columns take
        uint64_t a = (rnd() & 0x7fffffffffffull) | 1, size = rnd() >> 2;
        t += rnd() >> 44; // up to 1 ms a step: 3-byte times, all within one THI (2^32 ns)
        switch (i % 4) {
        case 0:
            p += hp_re_put_alloc(p, HPT_REC_ALIGNED, t, a, (uint32_t)rnd(), size, rnd());
            break;
        case 1:
            p += hp_re_put_free(p, t, a, HPT_TOUCH_FILL, rnd() >> 1, rnd() >> 1);
            break;
        case 2:
            p += hp_re_put_free_sized(p, t, a, size, rnd());
            break;
        default:
            p += hp_re_put_realloc(p, t, t + (rnd() >> 44), (uint32_t)rnd(), a,
                                   (rnd() & 0x7fffffffffffull) | 1, size);
            t += rnd() >> 44;
            break;
        }
    }
    cr_assert(t < (1ull << 32));
    size_t n = (size_t)(p - ring);
    hp_rc_pos_t pos0 = {{0, 0}, 0, 0};
    hp_rc_info_t info;
    size_t full = hp_rc_columns(ring, n, 1u << 30, cols, sizeof cols, &enc, scratch, &pos0, &info);
    cr_assert(full && info.in_bytes == n, "the whole stream fits 4 MiB of columns");
    unsigned refused = 0;
    for (size_t cap = HPT_COLS_HDR_MAX + (size_t)HPT_COLS * 4 * HPT_VARINT_MAX; cap < full * 3;
         cap += cap / 7 + 1) {
        memset(cols, 0xee, sizeof cols);
        hp_rc_pos_t pos = {{0, 0}, 0, 0};
        size_t cn = hp_rc_columns(ring, n, 1u << 30, cols, cap, &enc, scratch, &pos, &info);
        for (size_t k = cap; k < cap + 4096 && k < sizeof cols; k++)
            cr_assert(cols[k] == 0xee, "byte %zu written past out_cap %zu", k, cap);
        if (!cn) {
            refused++;
            continue;
        }
        cr_assert(cn <= cap && info.in_bytes == n);
        cr_assert(hpt_cols_untranspose(cols, cn, got, sizeof got, allocs, 1 << 16) ==
                  info.row_bytes);
    }
    cr_assert(refused > 0, "some of the sizes were too small");
}

// A damaged ring is refused, never read past its end.
Test(ringcols, damage_is_refused) {
    uint8_t *p = ring;
    p += hp_re_put_alloc(p, HPT_REC_MALLOC, 10, 0x1000, 1, 16, 0);
    size_t n = (size_t)(p - ring);
    hp_rc_pos_t pos = {{0, 0}, 0, 0};
    hp_rc_info_t info;
    for (size_t cut = 1; cut < n; cut++) {
        cr_assert(
            !hp_rc_columns(ring, cut, 1 << 20, cols, sizeof cols, &enc, scratch, &pos, &info));
        cr_assert(!hp_rc_rows(ring, cut, 1 << 20, rows, sizeof rows, scratch, &pos, &info));
    }
    ring[0] = 0xff; // no such kind
    cr_assert(!hp_rc_rows(ring, n, 1 << 20, rows, sizeof rows, scratch, &pos, &info));
    cr_assert(pos.w.time_ns == 0 && pos.raw_time == 0);
}

// Every kind of fixed entry the shim writes is as long as hp_re_bytes says (the drain's
// lookahead steps over entries by it) and as hp_re_read_fixed reads it, which refuses it one
// byte short.
Test(ringcols, entry_sizes_agree) {
    uint8_t buf[64];
    size_t made[32], n_made = 0;
    uint8_t kinds[32];
    static const uint8_t tags[] = {HPT_REC_MALLOC, HPT_REC_CALLOC, HPT_REC_ALIGNED};
    for (size_t i = 0; i < 3; i++)
        for (int wide = 0; wide < 2; wide++) {
            made[n_made] = hp_re_put_alloc(buf, tags[i], 5, 0x1000, 7,
                                           wide ? 1ull << 40 : 64, 16);
            kinds[n_made++] = buf[0];
        }
    for (int method = -1; method <= 3; method++)
        for (int wide = 0; wide < 2; wide++) {
            made[n_made] = hp_re_put_free(buf, 5, 0x1000, method, wide ? 1ull << 40 : 8,
                                          wide ? 1ull << 41 : 9);
            kinds[n_made++] = buf[0];
        }
    made[n_made] = hp_re_put_free_sized(buf, 5, 0x1000, 64, 16);
    kinds[n_made++] = buf[0];
    made[n_made] = hp_re_put_realloc(buf, 5, 6, 7, 0x1000, 0x2000, 64);
    kinds[n_made++] = buf[0];
    made[n_made] = hp_re_put_tbase(buf, 5);
    kinds[n_made++] = buf[0];
    made[n_made] = hp_re_put_thi(buf, 5);
    kinds[n_made++] = buf[0];
    for (size_t i = 0; i < n_made; i++) {
        // rebuild entry i (buf holds the last one made)
        memset(buf, 0, sizeof buf);
        buf[0] = kinds[i];
        hp_rent_t e;
        cr_expect_eq(hp_re_bytes(kinds[i]), made[i], "kind 0x%x: %zu bytes made, table %zu",
                     kinds[i], made[i], hp_re_bytes(kinds[i]));
        cr_expect_eq(hp_re_read_fixed(buf, buf + made[i], 0, &e), buf + made[i], "kind 0x%x",
                     kinds[i]);
        cr_expect_null(hp_re_read_fixed(buf, buf + made[i] - 1, 0, &e), "kind 0x%x short",
                       kinds[i]);
    }
    cr_expect_eq(hp_re_bytes(0xff), 0);
    cr_expect_eq(n_made, 20u); // 6 allocations, 10 frees, the sized free, realloc, TBASE, THI
}
