// SPDX-License-Identifier: MIT
// hpt_columns.h: records -> columns -> the same record bytes, for every record
// type, across chunk boundaries (one coder state for many chunks), and damaged
// column payloads refused without reading or writing out of bounds (each buffer
// is a heap block of exactly its size, so the ASan build proves it).
#include "format/hpt_columns.h"

#include "col_rows.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

static hpt_cols_enc_t enc; // 768 KiB: not on the stack

// Transposes rows and untransposes them again, each buffer of exactly its size;
// returns the column payload (caller frees) and checks the round trip.
static uint8_t *round_trip(const uint8_t *rows, size_t n, size_t *cn_out) {
    uint8_t *in = malloc(n ? n : 1);
    memcpy(in, rows, n);
    size_t cap = hpt_cols_bound(n);
    uint8_t *cols = malloc(cap);
    hpt_cols_info_t ci;
    size_t cn = hpt_cols_transpose(in, n, SIZE_MAX / 2, cols, cap, &enc, &ci);
    cr_assert_gt(cn, 0, "transpose refused %zu row bytes", n);
    cr_assert_eq(ci.row_bytes, n, "a chunk with no limit took only %zu of %zu bytes", ci.row_bytes,
                 n);
    // its end state is the rows' own, decoded from a zero base
    hpt_dstate_t st = {0};
    hpt_rec_t rec;
    uint32_t n_rec = 0, n_ev = 0;
    for (const uint8_t *p = in; p < in + n; n_rec++) {
        p = hpt_rec_decode(p, in + n, &st, &rec);
        cr_assert_not_null(p);
        n_ev += (rec.tag >= HPT_REC_MALLOC && rec.tag <= HPT_REC_REALLOC) ||
                rec.tag == HPT_REC_FREE_SIZED;
    }
    cr_assert_eq(ci.n_records, n_rec);
    cr_assert_eq(ci.n_events, n_ev);
    cr_assert_eq(ci.end.time_ns, st.time_ns);
    cr_assert_eq(ci.end.addr, st.addr);
    uint8_t *payload = malloc(cn);
    memcpy(payload, cols, cn);
    free(cols);
    uint8_t *back = malloc(n ? n : 1);
    size_t n_allocs = n / 5 + 1;
    hpt_cols_alloc_t *al = malloc(n_allocs * sizeof *al);
    cr_assert_eq(hpt_cols_untranspose(payload, cn, back, n, al, n_allocs), n);
    cr_assert_eq(memcmp(back, in, n), 0, "the rows that came back differ");
    free(al);
    free(back);
    free(in);
    *cn_out = cn;
    return payload;
}

Test(columns, every_record_type_comes_back_byte_for_byte) {
    static rows_t r;
    r_init(&r);
    every_kind(&r);
    size_t cn;
    free(round_trip(r.b, (size_t)(r.p - r.b), &cn));
}

Test(columns, an_empty_chunk_comes_back_empty) {
    size_t cn;
    free(round_trip((const uint8_t *)"", 0, &cn));
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void) {
    uint64_t x = rng_state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return rng_state = x;
}

// A churn of allocations and frees (some of live blocks of earlier chunks, some
// reallocs), cut into chunks at random record boundaries with one coder for
// all: each chunk stands alone.
Test(columns, random_streams_cut_into_chunks_come_back) {
    static rows_t r;
    static uint64_t live[512];
    for (int i = 0; i < 512; i++)
        live[i] = 0x5555000000ull + (uint64_t)i * 0x100;
    for (int chunk = 0; chunk < 300; chunk++) {
        r_init(&r);
        r.addr = live[rnd() % 512]; // any base: only differences are written
        int n = (int)(rnd() % 400);
        for (int i = 0; i < n; i++) {
            uint64_t x = rnd(), slot = x % 512;
            uint64_t a = 0x5555000000ull + ((x >> 9) % 65536) * 16 + ((x >> 40) % 8 == 0 ? 8 : 0);
            switch ((x >> 32) % 8) {
            case 0:
            case 1:
            case 2:
                r_free(&r, x % 300, live[slot], (int)((x >> 20) % 4) - 1, (x >> 24) % 5000,
                       (x >> 12) % 5000);
                live[slot] = a;
                r_alloc(&r, HPT_REC_MALLOC + (uint8_t)((x >> 50) % 3), x % 1000, x % 7, a,
                        (x >> 16) % 9000);
                break;
            case 3:
                r_realloc(&r, x % 50, (x >> 8) % 3, 2, live[slot], a, (x >> 20) % 70000);
                live[slot] = a;
                break;
            case 4: {
                uint8_t end[] = {HPT_REC_THREAD_END, (uint8_t)(x & 0x7f)};
                r_bytes(&r, end, sizeof end);
                break;
            }
            case 5: // a sized free (Rust's dealloc), naming the size right or wrong
                r_free_sized(&r, x % 300, live[slot], (x >> 16) % 9000, (x >> 44) % 2 ? 64 : 0);
                live[slot] = a;
                r_alloc(&r, HPT_REC_MALLOC, x % 1000, x % 7, a, (x >> 16) % 9000);
                break;
            default:
                r_free(&r, x % 300, live[slot], HPT_TOUCH_FILL, (x >> 20) % 64, (x >> 12) % 64);
                live[slot] = a;
                r_alloc(&r, HPT_REC_MALLOC, x % 1000, x % 7, a, (x >> 16) % 64);
                break;
            }
        }
        size_t cn;
        free(round_trip(r.b, (size_t)(r.p - r.b), &cn));
    }
}

Test(columns, records_the_column_form_does_not_carry_are_refused) {
    static const uint8_t process[] = {HPT_REC_PROCESS, 1, 'x', 0};
    static const uint8_t trailer[] = {HPT_REC_TRAILER, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t unknown[] = {16, 1, 1}; // a tag no record has (v3's heap stream had it)
    static const uint8_t cut[] = {HPT_REC_MALLOC, 1, 1}; // ends inside the record
    static uint8_t out[4096];
    hpt_cols_info_t ci;
    const size_t all = SIZE_MAX / 2;
    cr_assert_eq(hpt_cols_transpose(process, sizeof process, all, out, sizeof out, &enc, &ci), 0);
    cr_assert_eq(hpt_cols_transpose(trailer, sizeof trailer, all, out, sizeof out, &enc, &ci), 0);
    cr_assert_eq(hpt_cols_transpose(unknown, sizeof unknown, all, out, sizeof out, &enc, &ci), 0);
    cr_assert_eq(hpt_cols_transpose(cut, sizeof cut, all, out, sizeof out, &enc, &ci), 0);
    cr_assert_eq(hpt_cols_transpose(cut, sizeof cut, all, out, hpt_cols_bound(3) - 1, &enc, &ci), 0);
}

// The drainers cut a ring's records into chunks of at most max_bytes of rows: each chunk
// takes whole records, starts where the last ended, and its untransposed rows, decoded from
// the state the previous chunks reached, are the records it took.
Test(columns, chunks_cut_at_max_bytes_take_whole_records_in_order) {
    static rows_t r;
    r_init(&r);
    while ((size_t)(r.p - r.b) < sizeof r.b / 4)
        every_kind(&r);
    const size_t len = (size_t)(r.p - r.b);
    size_t cap = hpt_cols_bound(256 + HPT_COLS_REC_MAX);
    uint8_t *cols = malloc(cap), *back = malloc(len);
    hpt_cols_alloc_t *al = malloc(len * sizeof *al);
    size_t at = 0, chunks = 0;
    while (at < len) {
        hpt_cols_info_t ci;
        size_t cn = hpt_cols_transpose(r.b + at, len - at, 256, cols, cap, &enc, &ci);
        cr_assert_gt(cn, 0, "chunk %zu refused", chunks);
        cr_assert_gt(ci.row_bytes, 0);
        // whole records: the rows taken decode exactly, and stop at the limit unless one
        // record alone is longer
        hpt_dstate_t st = {0};
        hpt_rec_t rec;
        const uint8_t *p = r.b + at, *end = p + ci.row_bytes, *first_end = NULL;
        while (p < end) {
            p = hpt_rec_decode(p, end, &st, &rec);
            cr_assert_not_null(p, "chunk %zu does not end on a record boundary", chunks);
            if (!first_end)
                first_end = p;
        }
        cr_assert(ci.row_bytes <= 256 || first_end == end, "chunk %zu took %zu bytes", chunks,
                  ci.row_bytes);
        cr_assert_eq(ci.end.time_ns, st.time_ns);
        cr_assert_eq(ci.end.addr, st.addr);
        cr_assert_eq(hpt_cols_untranspose(cols, cn, back, ci.row_bytes, al, len), ci.row_bytes);
        cr_assert_eq(memcmp(back, r.b + at, ci.row_bytes), 0);
        at += ci.row_bytes;
        chunks++;
    }
    cr_assert_gt(chunks, 10);
    free(al);
    free(back);
    free(cols);
}

// Untransposes a copy of p[0, n) in a block of exactly n bytes, into exactly
// rows_cap bytes.
static size_t untranspose_exact(const uint8_t *p, size_t n, size_t rows_cap, size_t n_allocs) {
    uint8_t *in = malloc(n ? n : 1), *rows = malloc(rows_cap ? rows_cap : 1);
    hpt_cols_alloc_t *al = malloc((n_allocs ? n_allocs : 1) * sizeof *al);
    memcpy(in, p, n);
    size_t got = hpt_cols_untranspose(in, n, rows, rows_cap, al, n_allocs);
    free(al);
    free(rows);
    free(in);
    return got;
}

Test(columns, damaged_payloads_fail_cleanly) {
    static rows_t r;
    r_init(&r);
    every_kind(&r);
    const size_t n = (size_t)(r.p - r.b);
    size_t cn;
    uint8_t *cols = round_trip(r.b, n, &cn);
    // every truncation: the table no longer adds up
    for (size_t len = 0; len < cn; len++)
        cr_assert_eq(untranspose_exact(cols, len, n, n), 0, "cut to %zu of %zu bytes", len, cn);
    // too little room for the rows, or for the allocations
    cr_assert_eq(untranspose_exact(cols, cn, n - 1, n), 0);
    cr_assert_eq(untranspose_exact(cols, cn, n, 2), 0);
    cr_assert_eq(untranspose_exact(cols, cn, n, 0), 0);
    // every byte changed to a few values: whatever comes out fits the room given
    static const uint8_t vals[] = {0x00, 0x01, 0x7f, 0x80, 0xff};
    uint8_t *bad = malloc(cn);
    for (size_t i = 0; i < cn; i++) {
        for (size_t k = 0; k < sizeof vals; k++) {
            memcpy(bad, cols, cn);
            if (bad[i] == vals[k])
                continue;
            bad[i] = vals[k];
            cr_assert_leq(untranspose_exact(bad, cn, n, n), n);
        }
    }
    // a free that names an allocation the chunk has not made yet (reference 0
    // before any)
    free(bad);
    free(cols);
    static rows_t f;
    r_init(&f);
    r_free(&f, 1, 0x1000, -1, 0, 0);
    r_alloc(&f, HPT_REC_MALLOC, 1, 1, 0x2000, 16);
    cols = round_trip(f.b, (size_t)(f.p - f.b), &cn);
    hpt_colr_t c[HPT_COLS];
    uint64_t rb;
    cr_assert(hpt_cols_open(cols, cn, c, &rb));
    uint8_t *fv = cols + (c[HPT_COL_FREE].p - cols);
    memset(fv, 0, (size_t)(c[HPT_COL_FREE].end - c[HPT_COL_FREE].p));
    cr_assert_eq(untranspose_exact(cols, cn, rb, rb), 0);
    free(cols);
}
