// SPDX-License-Identifier: MIT
// Chunk framing as written by the shim's hp_chunk_encode and verified by the reader: every
// flipped byte is caught, compressed and stored payloads read the same, and a frame that
// passes the crc but does not decompress is skipped exactly.
#include "chunk.h"
#include "trace/reader.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zstd.h>

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

static size_t read_file(const uint8_t *bytes, size_t n, reader_event_t *out, size_t max,
                        reader_damage_t *damage) {
    strcpy(path, "/tmp/hpt-chunk-XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
    close(fd);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    cr_assert_not_null(r, "%s", err.msg);
    size_t k = 0;
    reader_event_t ev;
    int rc;
    while ((rc = reader_next(r, &ev, &err)) == 1)
        if (k < max)
            out[k++] = ev;
    cr_assert_eq(rc, 0);
    *damage = *reader_damage(r);
    reader_close(r);
    unlink(path);
    return k;
}

// chunk A (times 1..3), chunk B (times 10..12), chunk C (time 20)
static tb_t *abc(size_t *b_off, size_t *c_off, bool zstd) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    for (uint64_t t = 1; t <= 3; t++)
        tb_rec_malloc(tb, t, 1, 0x1000 * t, 16);
    tb_end(tb, zstd);
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 10, 0x10000);
    for (uint64_t t = 10; t <= 12; t++)
        tb_rec_malloc(tb, t, 2, 0x1000 * t, 100 * t); // big enough to be compressed
    for (int i = 0; i < 30; i++)
        tb_rec_free(tb, 12, 0x1000 * 10);
    *b_off = tb_end(tb, zstd);
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 20, 0);
    tb_rec_malloc(tb, 20, 3, 0x99000, 1);
    *c_off = tb_end(tb, zstd);
    return tb;
}

static void flip_every_byte_of_b(bool zstd) {
    size_t b_off, c_off, n;
    tb_t *tb = abc(&b_off, &c_off, zstd);
    uint8_t *file = tb_data(tb, &n);
    hpt_chunk_hdr_t h;
    memcpy(&h, file + b_off, sizeof h);
    cr_assert_eq(!!(h.flags & HPT_CHUNK_ZSTD), zstd);
    reader_event_t ev[64];
    reader_damage_t d;
    for (size_t i = b_off; i < c_off; i++) {
        for (int bit = 0; bit < 8; bit += 3) {
            file[i] ^= (uint8_t)(1u << bit);
            size_t k = read_file(file, n, ev, 64, &d);
            file[i] ^= (uint8_t)(1u << bit);
            // A and C survive, nothing of B does
            cr_assert_eq(k, 4, "byte %zu bit %d: %zu events", i - b_off, bit, k);
            cr_assert_eq(ev[0].time_ns, 1);
            cr_assert_eq(ev[3].time_ns, 20);
            cr_assert_eq(d.chunks_ok, 2);
            cr_assert_eq(d.chunks_damaged, 1, "byte %zu", i - b_off);
            cr_assert_eq(d.bytes_skipped, c_off - b_off);
            cr_assert_not(d.truncated);
        }
    }
    tb_free(tb);
}

Test(chunk, crc_catches_every_flipped_byte_of_a_stored_chunk, .fini = cleanup) {
    flip_every_byte_of_b(false);
}

Test(chunk, crc_catches_every_flipped_byte_of_a_compressed_chunk, .fini = cleanup) {
    flip_every_byte_of_b(true);
}

Test(chunk, compressed_and_stored_payloads_read_the_same, .fini = cleanup) {
    reader_event_t a[64], b[64];
    reader_damage_t da, db;
    size_t x, y, n;
    tb_t *plain = abc(&x, &y, false);
    tb_t *packed = abc(&x, &y, true);
    uint8_t *pf = tb_data(plain, &n);
    size_t na = read_file(pf, n, a, 64, &da);
    size_t n2;
    uint8_t *zf = tb_data(packed, &n2);
    cr_assert_lt(n2, n);
    size_t nb = read_file(zf, n2, b, 64, &db);
    cr_assert_eq(na, 37);
    cr_assert_eq(na, nb);
    cr_assert_arr_eq(a, b, na * sizeof *a);
    cr_assert_eq(da.chunks_damaged + db.chunks_damaged, 0);
    tb_free(plain);
    tb_free(packed);
}

// The crc is recomputed after the damage, as a buggy writer would produce it: the reader must
// catch the bad frame by itself and skip exactly that chunk.
static void reframe(uint8_t *chunk) {
    hpt_chunk_hdr_t h;
    memcpy(&h, chunk, sizeof h);
    h.crc32 = hp_chunk_crc(&h, chunk + sizeof h, h.stored_bytes);
    memcpy(chunk, &h, sizeof h);
}

Test(chunk, bad_zstd_frame_with_valid_crc_is_skipped, .fini = cleanup) {
    size_t b_off, c_off, n;
    tb_t *tb = abc(&b_off, &c_off, true);
    uint8_t *file = tb_data(tb, &n);
    file[b_off + sizeof(hpt_chunk_hdr_t)] ^= 0x55; // the zstd frame's magic
    reframe(file + b_off);
    reader_event_t ev[64];
    reader_damage_t d;
    size_t k = read_file(file, n, ev, 64, &d);
    cr_assert_eq(k, 4);
    cr_assert_eq(d.chunks_damaged, 1);
    cr_assert_eq(d.bytes_skipped, c_off - b_off);
    cr_assert_eq(d.seq_gaps, 1);
    tb_free(tb);
}

Test(chunk, raw_size_that_disagrees_with_the_frame_is_damage, .fini = cleanup) {
    size_t b_off, c_off, n;
    tb_t *tb = abc(&b_off, &c_off, true);
    uint8_t *file = tb_data(tb, &n);
    hpt_chunk_hdr_t h;
    memcpy(&h, file + b_off, sizeof h);
    h.raw_bytes += 1;
    memcpy(file + b_off, &h, sizeof h);
    reframe(file + b_off);
    reader_event_t ev[64];
    reader_damage_t d;
    cr_assert_eq(read_file(file, n, ev, 64, &d), 4);
    cr_assert_eq(d.chunks_damaged, 1);
    tb_free(tb);
}

Test(chunk, oversized_raw_length_is_damage_not_an_allocation, .fini = cleanup) {
    size_t b_off, c_off, n;
    tb_t *tb = abc(&b_off, &c_off, false);
    uint8_t *file = tb_data(tb, &n);
    hpt_chunk_hdr_t h;
    memcpy(&h, file + b_off, sizeof h);
    h.raw_bytes = h.stored_bytes = HPT_CHUNK_MAX_RAW + 1;
    memcpy(file + b_off, &h, sizeof h); // refused on the header alone: no crc, no allocation
    reader_event_t ev[64];
    reader_damage_t d;
    cr_assert_eq(read_file(file, n, ev, 64, &d), 4);
    cr_assert_eq(d.chunks_damaged, 1);
    tb_free(tb);
}

Test(chunk, encode_sets_crc_that_hp_chunk_crc_reproduces) {
    uint8_t raw[200];
    for (size_t i = 0; i < sizeof raw; i++)
        raw[i] = (uint8_t)(i % 3);
    uint8_t out[1024];
    hpt_chunk_hdr_t h;
    memset(&h, 0, sizeof h);
    h.type = HPT_CHUNK_EVENTS;
    ZSTD_CCtx *cctx = ZSTD_createCCtx();
    size_t n = hp_chunk_encode(out, sizeof out, &h, raw, sizeof raw, cctx);
    cr_assert_gt(n, sizeof h);
    cr_assert_eq(h.flags, HPT_CHUNK_ZSTD);
    cr_assert_eq(h.raw_bytes, sizeof raw);
    cr_assert_eq(n, sizeof h + h.stored_bytes);
    cr_assert_eq(hp_chunk_crc(&h, out + sizeof h, h.stored_bytes), h.crc32);
    ZSTD_freeCCtx(cctx);
}
