// SPDX-License-Identifier: MIT
// cols_decode (chunk_decode.h): a column chunk decoded straight into events says exactly what
// its rows say (hpt_cols_untranspose, then hpt_rec_decode: dchunk_t.via_rows). Random streams
// of every record kind the column form carries are cut into chunks of many sizes by the shim's
// transposer (one coder for all, as a drainer keeps it), and every chunk is decoded both ways:
// events, definitions, CPU samples and frames must be the same field by field, and the direct
// decoder must take every intact chunk itself (not hand it to the rows). Damaged chunks
// (flipped bytes, cut columns, bad references, a lying table or header, padded varints) get
// the same verdict and the same output both ways. Payload buffers are heap blocks of exactly
// their size, so the ASan build checks the bounds too.
#include "trace/chunk_decode.h"

#include "col_rows.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>

static hpt_cols_enc_t enc; // 768 KiB: not on the stack

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t rnd(void) { return xorshift64(&rng); }

// ---- random streams of every record kind ----

static uint64_t live[64];
static unsigned n_live;

static uint64_t pick_addr(void) {
    switch (rnd() % 10) {
    case 0: // anywhere, unaligned; rarely so far that the codes refuse the delta (the shim
            // then writes the chunk as rows)
        return rnd() % 64 ? rnd() >> 4 : rnd();
    case 1:
        return 0xffffffffffff0000ull + (rnd() & 0xfff8); // near the top, 8-aligned
    case 2:
        return 0; // realloc(NULL, n) where it is an old address
    default:
        return 0x7f0000000000ull + (rnd() & 0xfffff0);
    }
}
static uint64_t known_or_not(void) {
    return n_live && rnd() % 4 ? live[rnd() % (n_live < 64 ? n_live : 64)] : pick_addr();
}
static uint64_t pick_size(void) {
    switch (rnd() % 6) {
    case 0:
        return rnd() >> 1; // wide
    case 1:
        return rnd() & 0xffffffffu;
    default:
        return rnd() % 512;
    }
}
static uint64_t pick_dt(void) {
    return rnd() % 40 == 0 ? rnd() % (1ull << 40) : rnd() % 3 == 0 ? rnd() % 100000 : rnd() % 50;
}

// One OTHER record, as the shim writes it.
static void other(rows_t *r) {
    uint8_t b[600], *p = b;
    unsigned k = rnd() % 9;
    static const uint8_t tags[] = {HPT_REC_STACK,       HPT_REC_THREAD_START, HPT_REC_THREAD_END,
                                   HPT_REC_MODULE_LOAD, HPT_REC_MODULE_UNLOAD, HPT_REC_CPU_SAMPLE,
                                   HPT_REC_CPU_INFO,    HPT_REC_ALLOCATOR,    HPT_REC_TOUCH_LIVE};
    *p++ = tags[k];
    switch (tags[k]) {
    case HPT_REC_STACK: {
        p = hpt_put_varint(p, rnd() % 1000);
        unsigned n = rnd() % 30;
        p = hpt_put_varint(p, n);
        for (unsigned i = 0; i < n; i++)
            p = hpt_put_varint(p, rnd() >> (rnd() % 64));
        break;
    }
    case HPT_REC_THREAD_START:
        p = hpt_put_varint(p, pick_dt());
        p = hpt_put_varint(p, 5);
        memcpy(p, "work1", 5);
        p += 5;
        break;
    case HPT_REC_THREAD_END:
        p = hpt_put_varint(p, pick_dt());
        break;
    case HPT_REC_MODULE_LOAD:
        p = hpt_put_varint(p, pick_dt());
        p = hpt_put_varint(p, pick_addr());
        p = hpt_put_varint(p, pick_size());
        p = hpt_put_varint(p, 7);
        memcpy(p, "/lib/x1", 7);
        p += 7;
        p = hpt_put_varint(p, 3);
        memcpy(p, "\x01\x02\x03", 3);
        p += 3;
        break;
    case HPT_REC_MODULE_UNLOAD:
        p = hpt_put_varint(p, pick_dt());
        p = hpt_put_varint(p, pick_addr());
        break;
    case HPT_REC_CPU_SAMPLE: // a signed time delta
        p = hpt_put_varint(p, hpt_zigzag((int64_t)(rnd() % 2000) - 1000));
        p = hpt_put_varint(p, rnd() % 100000);
        p = hpt_put_varint(p, rnd() % 300);
        break;
    case HPT_REC_CPU_INFO:
        p = hpt_put_varint(p, rnd() % 3); // a source the reader knows
        p = hpt_put_varint(p, 997);
        p = hpt_put_varint(p, rnd() % 5000);
        p = hpt_put_varint(p, rnd() % 7);
        p = hpt_put_varint(p, 2);
        memcpy(p, "ok", 2);
        p += 2;
        break;
    case HPT_REC_ALLOCATOR:
        p = hpt_put_varint(p, rnd() % 3); // a status the reader knows
        p = hpt_put_varint(p, 2);
        memcpy(p, "je", 2);
        p += 2;
        p = hpt_put_varint(p, 0);
        break;
    case HPT_REC_TOUCH_LIVE: { // a block live at exit: its address absolute
        p = hpt_put_varint(p, pick_dt());
        p = hpt_put_varint(p, known_or_not());
        uint64_t t = rnd() % 5000;
        p = hpt_put_touch(p, (int)(rnd() % 5) - 1, t, t + rnd() % 64);
        break;
    }
    }
    r_bytes(r, b, (size_t)(p - b));
}

// A random stream of every record kind into r (about fill bytes of rows).
static void random_stream(rows_t *r, size_t fill) {
    r_init(r);
    r->addr = pick_addr();
    while ((size_t)(r->p - r->b) < fill) {
        unsigned k = rnd() % 16;
        if (k < 4) { // an allocation
            uint8_t tag = k < 2 ? HPT_REC_MALLOC : k == 2 ? HPT_REC_CALLOC : HPT_REC_ALIGNED;
            uint64_t a = pick_addr();
            r_alloc(r, tag, pick_dt(), rnd() % 4 ? rnd() % 300 : rnd(), a, pick_size());
            live[n_live++ % 64] = a;
        } else if (k < 8) { // a free, every touch method and none
            uint64_t touched = rnd() % 3 ? rnd() % 4096 : rnd() >> (2 + rnd() % 40);
            uint64_t nz = rnd() % 2 ? touched + rnd() % 64 : rnd() >> (rnd() % 40);
            r_free(r, pick_dt(), known_or_not(), (int)(rnd() % 5) - 1, touched, nz);
        } else if (k < 10) { // a sized free, the size right (of a known block) or not
            r_free_sized(r, pick_dt(), known_or_not(), rnd() % 2 ? 48 : pick_size(),
                         rnd() % 2 ? 0 : 16);
        } else if (k < 13) { // a realloc: in place, moved, from NULL, grown a byte
            uint64_t old = rnd() % 8 ? known_or_not() : 0;
            uint64_t a = rnd() % 2 ? old : pick_addr();
            r_realloc(r, pick_dt(), rnd() % 3 ? rnd() % 1000 : pick_dt(), rnd() % 300, old, a,
                      rnd() % 2 ? 100 + rnd() % 3 : pick_size());
            live[n_live++ % 64] = a;
        } else {
            other(r);
        }
    }
}

// ---- decoding both ways ----

typedef struct chunk {
    hpt_chunk_hdr_t h;
    uint8_t *payload; // the decompressed column payload
    size_t n;
} chunk_t;

static ZSTD_DCtx *dctx;

static void setup(void) {
    dctx = ZSTD_createDCtx();
}
static void teardown(void) {
    ZSTD_freeDCtx(dctx);
}

// Decodes k's payload (stored as it is, crc made to match, in a block of exactly its size) into
// c through the direct decoder or the rows.
static void decode(dchunk_t *c, const chunk_t *k, bool via_rows, bool keep) {
    c->h = k->h;
    c->h.flags = HPT_CHUNK_COLUMNS;
    c->h.stored_bytes = c->h.raw_bytes = (uint32_t)k->n;
    c->h.crc32 = 0;
    uLong crc = crc32(0L, (const Bytef *)&c->h, sizeof c->h);
    c->h.crc32 = (uint32_t)crc32(crc, k->payload, (uInt)k->n);
    free(c->in);
    c->in = malloc(k->n ? k->n : 1);
    memcpy(c->in, k->payload, k->n);
    c->in_cap = k->n;
    c->frame_bytes = sizeof c->h + k->n;
    c->keep = keep;
    c->via_rows = via_rows;
    dchunk_decode(c, dctx);
    cr_assert(c->crc_ok);
}

static bool bytes_eq(const uint8_t *a, uint32_t na, const uint8_t *b, uint32_t nb) {
    return na == nb && (na == 0 || memcmp(a, b, na) == 0);
}

// The fields of a definition the reader reads (reader.c apply_defs), by tag: its strings by
// content (they point into each decoder's own buffer).
static void def_eq(const dchunk_def_t *x, const dchunk_def_t *y, const char *what, size_t i) {
    const hpt_rec_t *a = &x->rec, *b = &y->rec;
    cr_assert_eq(a->tag, b->tag, "%s: def %zu tag %u vs %u", what, i, a->tag, b->tag);
    cr_assert_eq(x->ev, y->ev, "%s: def %zu", what, i);
    cr_assert_eq(x->frames_at, y->frames_at, "%s: def %zu", what, i);
    switch (a->tag) {
    case HPT_REC_STACK:
        cr_assert_eq(a->stack, b->stack);
        cr_assert_eq(a->n_frames, b->n_frames);
        break;
    case HPT_REC_MODULE_LOAD:
        cr_assert_eq(a->size, b->size);
        cr_assert(bytes_eq(a->str2, a->str2_len, b->str2, b->str2_len));
        // fall through
    case HPT_REC_MODULE_UNLOAD:
        cr_assert_eq(a->addr, b->addr);
        // fall through
    case HPT_REC_THREAD_START:
    case HPT_REC_THREAD_END:
        cr_assert_eq(a->time_ns, b->time_ns, "%s: def %zu", what, i);
        if (a->tag == HPT_REC_THREAD_START || a->tag == HPT_REC_MODULE_LOAD)
            cr_assert(bytes_eq(a->str, a->str_len, b->str, b->str_len));
        break;
    case HPT_REC_ALLOCATOR:
        cr_assert(bytes_eq(a->str2, a->str2_len, b->str2, b->str2_len));
        // fall through
    case HPT_REC_CPU_INFO:
        cr_assert(bytes_eq(a->str, a->str_len, b->str, b->str_len));
        cr_assert_eq(memcmp(a->counters, b->counters, 4 * sizeof a->counters[0]), 0);
        break;
    default:
        cr_assert_fail("%s: def %zu of tag %u in a column chunk", what, i, a->tag);
    }
}

// Everything a decoded chunk hands the reader, the same in both.
static void same(const dchunk_t *a, const dchunk_t *b, const char *what) {
    cr_assert_eq(a->ok, b->ok, "%s: ok %d vs %d", what, a->ok, b->ok);
    cr_assert_eq(a->n_ev, b->n_ev, "%s: %zu vs %zu events", what, a->n_ev, b->n_ev);
    for (size_t i = 0; i < a->n_ev; i++)
        cr_assert_eq(memcmp(&a->ev[i], &b->ev[i], sizeof a->ev[i]), 0,
                     "%s: event %zu (kind %u) differs", what, i, a->ev[i].kind);
    cr_assert_eq(a->min_time_ns, b->min_time_ns, "%s", what);
    cr_assert_eq(a->n_defs, b->n_defs, "%s: %zu vs %zu defs", what, a->n_defs, b->n_defs);
    for (size_t i = 0; i < a->n_defs; i++)
        def_eq(&a->defs[i], &b->defs[i], what, i);
    cr_assert_eq(a->n_cpu, b->n_cpu, "%s", what);
    if (a->n_cpu)
        cr_assert_eq(memcmp(a->cpu, b->cpu, a->n_cpu * sizeof *a->cpu), 0, "%s", what);
    cr_assert_eq(a->n_frames, b->n_frames, "%s", what);
    if (a->n_frames)
        cr_assert_eq(memcmp(a->frames, b->frames, a->n_frames * sizeof *a->frames), 0, "%s",
                     what);
}

static dchunk_t direct, rows_way, alone;

static void fini_all(void) {
    dchunk_fini(&direct);
    dchunk_fini(&rows_way);
    dchunk_fini(&alone);
    memset(&direct, 0, sizeof direct);
    memset(&rows_way, 0, sizeof rows_way);
    memset(&alone, 0, sizeof alone);
}

// An intact chunk: both ways take it whole with the same output, and the direct decoder takes
// it by itself (cols_decode, not the rows behind it).
static void check_intact(const chunk_t *k, bool keep) {
    decode(&direct, k, false, keep);
    decode(&rows_way, k, true, keep);
    cr_assert(rows_way.ok, "the rows refuse an intact chunk");
    same(&direct, &rows_way, "intact");
    alone.h = k->h;
    alone.keep = keep;
    alone.n_ev = alone.n_defs = alone.n_cpu = alone.n_frames = 0;
    cr_assert(cols_decode(&alone, k->payload, k->n), "the direct decoder refuses an intact chunk");
    cr_assert_eq(alone.n_ev, rows_way.n_ev);
    if (alone.n_ev)
        cr_assert_eq(memcmp(alone.ev, rows_way.ev, alone.n_ev * sizeof *alone.ev), 0);
}

// A damaged chunk: the same verdict and output both ways. Returns whether it was taken.
static bool check_damaged(const chunk_t *k, const char *what) {
    decode(&direct, k, false, true);
    decode(&rows_way, k, true, true);
    same(&direct, &rows_way, what);
    return rows_way.ok;
}

// Cuts rows [b, b + len) into column chunks of at most max_bytes of rows each (the shim's
// transposer, one coder for all), from the delta state {t0, a0}; calls fn on each. Records the
// column form cannot carry (a delta its codes do not take) are skipped, as the shim would
// write them as rows.
static size_t cut(const uint8_t *b, size_t len, uint64_t a0, size_t max_bytes,
                  void (*fn)(const chunk_t *, void *), void *arg) {
    static uint8_t out[1u << 21];
    hpt_dstate_t base = {.time_ns = 1000, .addr = a0};
    size_t at = 0, chunks = 0;
    while (at < len) {
        hpt_cols_info_t ci;
        size_t cn = hpt_cols_transpose(b + at, len - at, max_bytes, out, sizeof out, &enc, &ci);
        if (cn == 0) { // skip one record, as rows
            hpt_rec_t rec;
            hpt_dstate_t st = base;
            const uint8_t *next = hpt_rec_decode(b + at, b + len, &st, &rec);
            cr_assert_not_null(next);
            base = st;
            at = (size_t)(next - b);
            continue;
        }
        chunk_t k = {.n = cn};
        k.h.magic = HPT_CHUNK_MAGIC;
        k.h.type = HPT_CHUNK_EVENTS;
        k.h.tid = 4243;
        k.h.n_records = ci.n_records;
        k.h.seq = chunks;
        k.h.base_time_ns = base.time_ns;
        k.h.base_addr = base.addr;
        k.payload = malloc(cn);
        memcpy(k.payload, out, cn);
        fn(&k, arg);
        free(k.payload);
        base.time_ns += ci.end.time_ns;
        base.addr += ci.end.addr;
        at += ci.row_bytes;
        chunks++;
    }
    return chunks;
}

static void intact_fn(const chunk_t *k, void *arg) {
    size_t *n_ev = arg;
    check_intact(k, true);
    *n_ev += rows_way.n_ev;
    check_intact(k, false); // definitions only (reader_load_defs)
}

Test(cols_decode, every_record_kind_decodes_as_its_rows, .init = setup, .fini = teardown) {
    static rows_t r;
    r_init(&r);
    while ((size_t)(r.p - r.b) < sizeof r.b / 2)
        every_kind(&r);
    static const size_t sizes[] = {1, 16, 100, 256, 1000, 4096, 20000, SIZE_MAX / 2};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n_ev = 0;
        size_t chunks = cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, sizes[i], intact_fn, &n_ev);
        cr_assert_gt(chunks, 0);
        cr_assert_gt(n_ev, 1000);
    }
    fini_all();
}

Test(cols_decode, random_streams_cut_into_chunks_of_many_sizes, .init = setup,
     .fini = teardown) {
    static rows_t r;
    size_t n_ev = 0, chunks = 0;
    for (int s = 0; s < 40; s++) {
        random_stream(&r, 1000 + rnd() % (sizeof r.b - 2000));
        static const size_t sizes[] = {1, 40, 300, 2000, 9000, SIZE_MAX / 2};
        size_t max_bytes = sizes[rnd() % 6];
        chunks += cut(r.b, (size_t)(r.p - r.b), r.addr, max_bytes, intact_fn, &n_ev);
    }
    cr_log_info("%zu chunks, %zu events", chunks, n_ev);
    cr_assert_gt(chunks, 100);
    cr_assert_gt(n_ev, 50000);
    fini_all();
}

// ---- damage ----

typedef struct tally {
    size_t taken, refused;
} tally_t;

static void count(tally_t *t, bool ok) {
    if (ok)
        t->taken++;
    else
        t->refused++;
}

// Every byte of the payload changed to a few values (the table, each column, OTHER's records).
static void flip_fn(const chunk_t *k, void *arg) {
    tally_t *t = arg;
    static const uint8_t vals[] = {0x00, 0x01, 0x02, 0x7f, 0x80, 0xff};
    chunk_t bad = *k;
    bad.payload = malloc(k->n);
    for (size_t i = 0; i < k->n; i++) {
        for (size_t v = 0; v < sizeof vals; v++) {
            memcpy(bad.payload, k->payload, k->n);
            if (bad.payload[i] == vals[v])
                continue;
            bad.payload[i] = vals[v];
            count(t, check_damaged(&bad, "flipped byte"));
        }
        memcpy(bad.payload, k->payload, k->n);
        bad.payload[i] ^= 0x40;
        count(t, check_damaged(&bad, "flipped bit"));
    }
    free(bad.payload);
}

// Cut short anywhere, and a lying record count.
static void truncate_fn(const chunk_t *k, void *arg) {
    tally_t *t = arg;
    for (size_t len = 0; len < k->n; len++) {
        chunk_t bad = *k;
        bad.n = len;
        count(t, check_damaged(&bad, "truncated"));
    }
    chunk_t bad = *k;
    bad.h.n_records = k->h.n_records + 1;
    count(t, check_damaged(&bad, "one record more"));
    bad.h.n_records = k->h.n_records - 1;
    count(t, check_damaged(&bad, "one record less"));
}

// Rewrites the table so that column col is cut short by cut bytes (its bytes gone) or the
// rows' size is off by delta, each a well-formed table of a payload that does not add up.
static chunk_t retable(const chunk_t *k, int col, size_t cut_bytes, int64_t row_delta) {
    hpt_colr_t c[HPT_COLS];
    uint64_t row_bytes = 0;
    cr_assert(hpt_cols_open(k->payload, k->n, c, &row_bytes));
    chunk_t bad = *k;
    bad.payload = malloc(k->n + 3 * HPT_VARINT_MAX);
    uint8_t *q = hpt_put_varint(bad.payload, HPT_COLS);
    q = hpt_put_varint(q, row_bytes + (uint64_t)row_delta);
    size_t len[HPT_COLS];
    for (int i = 0; i < HPT_COLS; i++) {
        len[i] = (size_t)(c[i].end - c[i].p);
        if (i == col)
            len[i] = len[i] > cut_bytes ? len[i] - cut_bytes : 0;
        q = hpt_put_varint(q, len[i]);
    }
    for (int i = 0; i < HPT_COLS; i++) {
        memcpy(q, c[i].p, len[i]);
        q += len[i];
    }
    bad.n = (size_t)(q - bad.payload);
    return bad;
}

static void columns_fn(const chunk_t *k, void *arg) {
    tally_t *t = arg;
    for (int col = 0; col < HPT_COLS; col++) {
        for (size_t cut_bytes = 1; cut_bytes <= 3; cut_bytes++) {
            chunk_t bad = retable(k, col, cut_bytes, 0);
            count(t, check_damaged(&bad, "column cut short"));
            free(bad.payload);
        }
    }
    for (int64_t d = -2; d <= 2; d++) {
        chunk_t bad = retable(k, -1, 0, d);
        bool ok = check_damaged(&bad, "rows' size");
        cr_assert_eq(ok, d == 0, "rows' size off by %lld taken: %d", (long long)d, ok);
        count(t, ok);
        free(bad.payload);
    }
}

// k's payload with column x replaced by [col, col + n): the table says the new length.
static chunk_t with_column(const chunk_t *k, int x, const uint8_t *col, size_t n) {
    hpt_colr_t c[HPT_COLS];
    uint64_t row_bytes = 0;
    cr_assert(hpt_cols_open(k->payload, k->n, c, &row_bytes));
    chunk_t bad = *k;
    bad.payload = malloc(k->n + n + 3 * HPT_VARINT_MAX);
    uint8_t *p = hpt_put_varint(bad.payload, HPT_COLS);
    p = hpt_put_varint(p, row_bytes);
    for (int i = 0; i < HPT_COLS; i++)
        p = hpt_put_varint(p, i == x ? n : (size_t)(c[i].end - c[i].p));
    for (int i = 0; i < HPT_COLS; i++) {
        const uint8_t *s = i == x ? col : c[i].p;
        size_t len = i == x ? n : (size_t)(c[i].end - c[i].p);
        memcpy(p, s, len);
        p += len;
    }
    bad.n = (size_t)(p - bad.payload);
    return bad;
}

// The values of column x of k (at most max).
static size_t column_values(const chunk_t *k, int x, uint64_t *vals, size_t max) {
    hpt_colr_t c[HPT_COLS];
    uint64_t row_bytes;
    cr_assert(hpt_cols_open(k->payload, k->n, c, &row_bytes));
    size_t nv = 0;
    for (hpt_colr_t f = c[x]; f.p < f.end && nv < max;)
        cr_assert(hpt_colr_get(&f, &vals[nv++]));
    return nv;
}

// Block references to allocations the chunk has not made, or other ones: every reference in
// the FREE column made larger by 1, 2 and far.
static void refs_fn(const chunk_t *k, void *arg) {
    tally_t *t = arg;
    static uint64_t vals[4096];
    static uint8_t col[4096 * HPT_VARINT_MAX];
    const size_t nv = column_values(k, HPT_COL_FREE, vals, 4096);
    static const uint64_t bumps[] = {2, 4, 1u << 20};
    for (size_t i = 0; i < nv; i++) {
        if (vals[i] & 1)
            continue; // a delta: any value is an address
        for (size_t b = 0; b < 3; b++) {
            uint8_t *q = col;
            for (size_t j = 0; j < nv; j++)
                q = hpt_put_varint(q, j == i ? vals[j] + bumps[b] : vals[j]);
            chunk_t bad = with_column(k, HPT_COL_FREE, col, (size_t)(q - col));
            count(t, check_damaged(&bad, "bad reference"));
            free(bad.payload);
        }
    }
}

// A value padded to one byte more than it needs (0x80 on its last byte, then 0x00): the same
// value, and the rows the reference rebuilds are the same, so it takes the chunk; the direct
// decoder, which counts the rows' size from the columns' lengths, must leave it to the rows.
static void padded_fn(const chunk_t *k, void *arg) {
    tally_t *t = arg;
    static uint64_t vals[4096];
    static uint8_t col[4096 * HPT_VARINT_MAX + 1];
    for (int x = HPT_COL_TIME; x < HPT_COL_OTHER; x++) {
        const size_t nv = column_values(k, x, vals, 4096);
        for (size_t i = 0; i < nv; i += 1 + nv / 16) {
            uint8_t *q = col;
            bool padded = false;
            for (size_t j = 0; j < nv; j++) {
                uint8_t *v = q;
                q = hpt_put_varint(q, vals[j]);
                if (j == i && q - v < HPT_VARINT_MAX) {
                    q[-1] |= 0x80;
                    *q++ = 0;
                    padded = true;
                }
            }
            if (!padded)
                continue;
            chunk_t bad = with_column(k, x, col, (size_t)(q - col));
            cr_assert(check_damaged(&bad, "padded varint"),
                      "column %d value %zu padded: the rows refuse it", x, i);
            count(t, true);
            alone.h = bad.h;
            alone.keep = true;
            alone.n_ev = alone.n_defs = alone.n_cpu = alone.n_frames = 0;
            cr_assert_not(cols_decode(&alone, bad.payload, bad.n),
                          "column %d value %zu padded: taken without the rows", x, i);
            free(bad.payload);
        }
    }
}

Test(cols_decode, damaged_chunks_get_the_same_verdict_and_output, .init = setup,
     .fini = teardown) {
    static rows_t r;
    r_init(&r);
    every_kind(&r);
    tally_t t = {0};
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, flip_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, 64, flip_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, truncate_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, 100, truncate_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, columns_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, refs_fn, &t);
    cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, padded_fn, &t);
    for (int s = 0; s < 6; s++) {
        random_stream(&r, 400 + rnd() % 1500);
        cut(r.b, (size_t)(r.p - r.b), r.addr, SIZE_MAX / 2, flip_fn, &t);
        cut(r.b, (size_t)(r.p - r.b), r.addr, SIZE_MAX / 2, columns_fn, &t);
        cut(r.b, (size_t)(r.p - r.b), r.addr, SIZE_MAX / 2, refs_fn, &t);
        cut(r.b, (size_t)(r.p - r.b), r.addr, 500, padded_fn, &t);
    }
    cr_log_info("damaged: %zu taken, %zu refused", t.taken, t.refused);
    // both verdicts were met many times
    cr_assert_gt(t.taken, 100, "%zu taken", t.taken);
    cr_assert_gt(t.refused, 1000, "%zu refused", t.refused);
    fini_all();
}

// A definition the reader could not take (an unknown CPU source, an unknown allocator status)
// between heap events: the rows keep the definitions before it and the chunk is refused; the
// direct decoder hands such a chunk to them.
static void bad_def_fn(const chunk_t *k, void *arg) {
    size_t *n_defs = arg;
    cr_assert_not(check_damaged(k, "bad definition"));
    *n_defs += rows_way.n_defs;
}

Test(cols_decode, definitions_the_reader_cannot_take_keep_those_before, .init = setup,
     .fini = teardown) {
    static const uint8_t info_bad[] = {HPT_REC_CPU_INFO, 9, 1, 1, 1, 0}; // unknown source
    static const uint8_t alloc_bad[] = {HPT_REC_ALLOCATOR, 7, 0, 0};     // unknown status
    for (int which = 0; which < 2; which++) {
        static rows_t r;
        r_init(&r);
        every_kind(&r);
        if (which == 0)
            r_bytes(&r, info_bad, sizeof info_bad);
        else
            r_bytes(&r, alloc_bad, sizeof alloc_bad);
        every_kind(&r);
        size_t n_defs = 0;
        cr_assert_eq(cut(r.b, (size_t)(r.p - r.b), 0x7f0000001000ull, SIZE_MAX / 2, bad_def_fn,
                         &n_defs),
                     1);
        cr_assert_gt(n_defs, 5, "the definitions before the bad one are kept");
    }
    fini_all();
}
