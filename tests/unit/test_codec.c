// SPDX-License-Identifier: MIT
// hpt_codec.h: varint and zigzag round trips at the edges, and hpt_rec_decode on truncated and
// random input: it must fail cleanly and never read past `end` (run under ASan to prove it:
// every input sits in a heap block of exactly its size).
#include "format/hpt_codec.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static const uint64_t edge_u64[] = {
    0,
    1,
    63,
    64,
    127,
    128,
    255,
    256,
    16383,
    16384,
    2097151,
    2097152,
    0xffffffffull,
    0x100000000ull,
    0x7fffffffffffffffull,
    0x8000000000000000ull,
    0xfffffffffffffffeull,
    UINT64_MAX,
};

Test(codec, varint_round_trips_edge_values) {
    for (size_t i = 0; i < sizeof edge_u64 / sizeof *edge_u64; i++) {
        uint8_t buf[HPT_VARINT_MAX];
        uint8_t *end = hpt_put_varint(buf, edge_u64[i]);
        size_t len = (size_t)(end - buf);
        cr_assert_leq(len, HPT_VARINT_MAX);
        uint64_t v = 42;
        const uint8_t *p = hpt_get_varint(buf, end, &v);
        cr_assert_eq(p, end);
        cr_assert_eq(v, edge_u64[i]);
        // one byte short never decodes
        cr_assert_null(hpt_get_varint(buf, end - 1, &v));
    }
    uint8_t buf[HPT_VARINT_MAX];
    cr_assert_eq(hpt_put_varint(buf, 0) - buf, 1);
    cr_assert_eq(hpt_put_varint(buf, 127) - buf, 1);
    cr_assert_eq(hpt_put_varint(buf, 128) - buf, 2);
    cr_assert_eq(hpt_put_varint(buf, UINT64_MAX) - buf, 10);
}

Test(codec, varint_rejects_overlong_and_empty_input) {
    uint8_t buf[12];
    memset(buf, 0x80, sizeof buf);
    uint64_t v;
    cr_assert_null(hpt_get_varint(buf, buf + sizeof buf, &v)); // never terminates in 10 bytes
    cr_assert_null(hpt_get_varint(buf, buf, &v));
}

Test(codec, zigzag_round_trips_edge_values) {
    static const int64_t vals[] = {0,
                                   1,
                                   -1,
                                   2,
                                   -2,
                                   63,
                                   -64,
                                   INT32_MAX,
                                   INT32_MIN,
                                   INT64_MAX,
                                   INT64_MIN,
                                   INT64_MAX - 1,
                                   INT64_MIN + 1};
    for (size_t i = 0; i < sizeof vals / sizeof *vals; i++)
        cr_assert_eq(hpt_unzigzag(hpt_zigzag(vals[i])), vals[i]);
    cr_assert_eq(hpt_zigzag(0), 0);
    cr_assert_eq(hpt_zigzag(-1), 1);
    cr_assert_eq(hpt_zigzag(1), 2);
    cr_assert_eq(hpt_zigzag(INT64_MIN), UINT64_MAX);
    cr_assert_eq(hpt_zigzag(INT64_MAX), UINT64_MAX - 1);
}

// One valid record of every tag, hand-encoded.
static size_t sample_records(uint8_t *out, size_t *starts, size_t *n) {
    uint8_t *p = out;
    size_t k = 0;
#define REC(tag) (starts[k++] = (size_t)(p - out), *p++ = (tag))
#define V(x) (p = hpt_put_varint(p, (x)))
    REC(HPT_REC_MALLOC), V(5), V(3), V(hpt_zigzag(4096)), V(100);
    REC(HPT_REC_CALLOC), V(1), V(3), V(hpt_zigzag(-64)), V(24);
    REC(HPT_REC_ALIGNED), V(1), V(4), V(hpt_zigzag(8192)), V(64), V(64);
    REC(HPT_REC_FREE), V(2), V(hpt_zigzag(-8192)), V(((10 << 2) | HPT_TOUCH_FILL) + 1),
        V(hpt_zigzag(7 - 10));
    REC(HPT_REC_REALLOC), V(1), V(7), V(9), V(hpt_zigzag(16)), V(hpt_zigzag(1 << 20)), V(300);
    REC(HPT_REC_STACK), V(9), V(3), V(0x401000), V(hpt_zigzag(0x20)), V(hpt_zigzag(-0x100));
    REC(HPT_REC_THREAD_START), V(1), V(4), memcpy(p, "work", 4), p += 4;
    REC(HPT_REC_THREAD_END), V(1);
    REC(HPT_REC_MODULE_LOAD), V(1), V(0x400000), V(0x1000), V(4), memcpy(p, "/bin", 4), p += 4,
        V(2), *p++ = 0xab, *p++ = 0xcd;
    REC(HPT_REC_MODULE_UNLOAD), V(1), V(0x400000);
    REC(HPT_REC_PROCESS), V(2), memcpy(p, "sh", 2), p += 2, V(2), V(2), memcpy(p, "sh", 2), p += 2,
        V(2), memcpy(p, "-c", 2), p += 2;
    REC(HPT_REC_TRAILER), V(10), V(0), V(3), V(0), V(2), V(123456), V(7), V(900), V(80), V(3);
#undef REC
#undef V
    *n = k;
    starts[k] = (size_t)(p - out);
    return (size_t)(p - out);
}

Test(codec, decodes_every_record_kind) {
    uint8_t buf[512];
    size_t starts[16], n;
    size_t len = sample_records(buf, starts, &n);
    hpt_dstate_t st = {.time_ns = 1000, .addr = 0x10000};
    const uint8_t *p = buf, *end = buf + len;
    hpt_rec_t r;
    size_t count = 0;
    while (p < end) {
        p = hpt_rec_decode(p, end, &st, &r);
        cr_assert_not_null(p, "record %zu", count);
        cr_assert_eq((size_t)(p - buf), starts[count + 1]);
        switch (r.tag) {
        case HPT_REC_MALLOC:
            cr_assert_eq(r.time_ns, 1005);
            cr_assert_eq(r.addr, 0x11000);
            cr_assert_eq(r.size, 100);
            break;
        case HPT_REC_FREE:
            cr_assert_eq(r.touch, 1 + HPT_TOUCH_FILL);
            cr_assert_eq(r.touched, 10);
            cr_assert_eq(r.touched_nz, 7);
            break;
        case HPT_REC_REALLOC:
            cr_assert_eq(r.time2_ns, r.time_ns + 7);
            cr_assert_eq(r.stack, 9);
            break;
        case HPT_REC_STACK: {
            uint64_t fr[3];
            cr_assert_eq(hpt_stack_frames(&r, fr), 0);
            cr_assert_eq(fr[0], 0x401000);
            cr_assert_eq(fr[1], 0x401020);
            cr_assert_eq(fr[2], 0x400f20);
            break;
        }
        case HPT_REC_TRAILER:
            cr_assert_eq(r.counters[0], 10);
            cr_assert_eq(r.counters[2], 3);
            cr_assert_eq(r.counters[4], 2); // events placed late
            cr_assert_eq(r.counters[5], 123456); // time the program waited
            cr_assert_eq(r.counters[6], 7);
            cr_assert_eq(r.counters[9], 3); // most pipeline workers
            break;
        default:
            break;
        }
        count++;
    }
    cr_assert_eq(count, n);
}

// Every proper prefix of every record fails to decode, reading nothing past its end.
Test(codec, truncated_records_fail_without_overread) {
    uint8_t buf[512];
    size_t starts[16], n;
    sample_records(buf, starts, &n);
    for (size_t i = 0; i < n; i++) {
        size_t len = starts[i + 1] - starts[i];
        for (size_t cut = 0; cut < len; cut++) {
            uint8_t *exact = malloc(cut ? cut : 1);
            memcpy(exact, buf + starts[i], cut);
            hpt_dstate_t st = {0};
            hpt_rec_t r;
            cr_assert_null(hpt_rec_decode(exact, exact + cut, &st, &r), "tag %u cut %zu",
                           buf[starts[i]], cut);
            free(exact);
        }
    }
}

Test(codec, rejects_unknown_tags_and_absurd_counts) {
    hpt_dstate_t st = {0};
    hpt_rec_t r;
    uint8_t bad_tags[] = {0, 13, 0x7f, 0xff};
    for (size_t i = 0; i < sizeof bad_tags; i++) {
        uint8_t rec[4] = {bad_tags[i], 1, 1, 1};
        cr_assert_null(hpt_rec_decode(rec, rec + sizeof rec, &st, &r));
    }
    uint8_t big[16], *p = big;
    *p++ = HPT_REC_STACK;
    p = hpt_put_varint(p, 1);
    p = hpt_put_varint(p, HPT_MAX_FRAMES + 1);
    cr_assert_null(hpt_rec_decode(big, p, &st, &r));
    p = big;
    *p++ = HPT_REC_THREAD_START;
    p = hpt_put_varint(p, 1);
    p = hpt_put_varint(p, HPT_MAX_STRING + 1);
    cr_assert_null(hpt_rec_decode(big, p, &st, &r));
    p = big;
    *p++ = HPT_REC_THREAD_START;
    p = hpt_put_varint(p, 1);
    p = hpt_put_varint(p, UINT64_MAX); // length that would wrap a pointer
    cr_assert_null(hpt_rec_decode(big, p, &st, &r));
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) { return xorshift64(&rng); }

// Random bytes (biased towards valid tags and short varints) in exact-size heap blocks: the
// decoder either fails or returns a pointer within [p, end].
Test(codec, random_garbage_never_reads_out_of_bounds) {
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = rnd() % 40;
        uint8_t *b = malloc(len ? len : 1);
        for (size_t i = 0; i < len; i++) {
            uint64_t x = rnd();
            b[i] = (uint8_t)(i == 0 ? 1 + x % 13 : (x % 4 == 0 ? x >> 8 : (x >> 8) % 8));
        }
        hpt_dstate_t st = {.time_ns = rnd(), .addr = rnd()};
        hpt_rec_t r;
        const uint8_t *p = b, *end = b + len;
        while (p && p < end) {
            const uint8_t *q = hpt_rec_decode(p, end, &st, &r);
            if (q) {
                cr_assert(q > p && q <= end);
                if (r.tag == HPT_REC_STACK) {
                    uint64_t fr[HPT_MAX_FRAMES];
                    (void)hpt_stack_frames(&r, fr);
                }
            }
            p = q;
        }
        free(b);
    }
}

Test(codec, touch_measures_round_trip) {
    const struct {
        int method;
        uint64_t touched, nz;
    } cases[] = {{-1, 0, 0},
                 {HPT_TOUCH_FILL, 0, 0},
                 {HPT_TOUCH_FILL, 100, 7},
                 {HPT_TOUCH_FILL_SAMPLED, 1ull << 40, 3},
                 {HPT_TOUCH_RESIDENT, 4096, 4096},
                 {HPT_TOUCH_PAGES, 5000, 300},
                 {HPT_TOUCH_PAGES, 0, 1ull << 33}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        uint8_t buf[64], *p = buf;
        *p++ = HPT_REC_FREE;
        p = hpt_put_varint(p, 1);
        p = hpt_put_varint(p, 0);
        p = hpt_put_touch(p, cases[i].method, cases[i].touched, cases[i].nz);
        hpt_dstate_t st = {0};
        hpt_rec_t r;
        cr_assert_eq(hpt_rec_decode(buf, p, &st, &r), p, "case %zu", i);
        cr_assert_eq(r.touch, cases[i].method < 0 ? 0 : 1 + cases[i].method, "case %zu", i);
        if (cases[i].method >= 0) {
            cr_assert_eq(r.touched, cases[i].touched, "case %zu", i);
            cr_assert_eq(r.touched_nz, cases[i].method == HPT_TOUCH_RESIDENT ? cases[i].touched
                                                                             : cases[i].nz);
        }
    }
    // a block live at exit: its absolute address and the same touch varints
    {
        uint8_t buf[64], *p = buf;
        *p++ = HPT_REC_TOUCH_LIVE;
        p = hpt_put_varint(p, 7);
        p = hpt_put_varint(p, 0x7f0012345670ull);
        p = hpt_put_touch(p, HPT_TOUCH_PAGES, 8192, 100);
        hpt_dstate_t st = {.time_ns = 10, .addr = 0x1000};
        hpt_rec_t r;
        cr_assert_eq(hpt_rec_decode(buf, p, &st, &r), p);
        cr_assert_eq(r.tag, HPT_REC_TOUCH_LIVE);
        cr_assert_eq(r.time_ns, 17);
        cr_assert_eq(r.addr, 0x7f0012345670ull);
        cr_assert_eq(st.addr, 0x1000, "the address is not a delta: the state stays");
        cr_assert_eq(r.touch, 1 + HPT_TOUCH_PAGES);
        cr_assert_eq(r.touched, 8192);
        cr_assert_eq(r.touched_nz, 100);
    }
    // method 3 (pattern on resident pages) carries the non-zero count: without it, damage
    uint8_t bad[] = {HPT_REC_FREE, 1, 0, (5 << 2 | 3) + 1};
    hpt_dstate_t st = {0};
    hpt_rec_t r;
    cr_assert_null(hpt_rec_decode(bad, bad + sizeof bad, &st, &r));
}
