// SPDX-License-Identifier: MIT
// col_rows: record rows written by hand for the column tests (test_columns.c, test_cols_decode.c):
// one writer per heap record kind, keeping the address delta base as the shim does, and
// every_kind, one of each record kind the column form carries.
#ifndef HEAPPROF_TESTS_COL_ROWS_H
#define HEAPPROF_TESTS_COL_ROWS_H

#include "format/hpt_codec.h"

#include <stddef.h>
#include <stdint.h>
#include <string.h>

typedef struct rows {
    uint8_t b[1 << 16];
    uint8_t *p;
    uint64_t addr; // the last address field written (the delta base)
    uint32_t n;
} rows_t;

static void r_init(rows_t *r) {
    r->p = r->b;
    r->addr = 0x7f0000001000ull;
    r->n = 0;
}

static void r_addr(rows_t *r, uint64_t a) {
    r->p = hpt_put_varint(r->p, hpt_zigzag((int64_t)(a - r->addr)));
    r->addr = a;
}

static void r_alloc(rows_t *r, uint8_t tag, uint64_t dt, uint64_t stack, uint64_t a,
                    uint64_t size) {
    *r->p++ = tag;
    r->p = hpt_put_varint(r->p, dt);
    r->p = hpt_put_varint(r->p, stack);
    r_addr(r, a);
    r->p = hpt_put_varint(r->p, size);
    if (tag == HPT_REC_ALIGNED)
        r->p = hpt_put_varint(r->p, 64);
    r->n++;
}

static void r_free(rows_t *r, uint64_t dt, uint64_t a, int method, uint64_t t, uint64_t nz) {
    *r->p++ = HPT_REC_FREE;
    r->p = hpt_put_varint(r->p, dt);
    r_addr(r, a);
    r->p = hpt_put_touch(r->p, method, t, nz);
    r->n++;
}

static void r_free_sized(rows_t *r, uint64_t dt, uint64_t a, uint64_t size, uint64_t align) {
    *r->p++ = HPT_REC_FREE_SIZED;
    r->p = hpt_put_varint(r->p, dt);
    r_addr(r, a);
    r->p = hpt_put_varint(r->p, size);
    r->p = hpt_put_varint(r->p, align);
    r->n++;
}

static void r_realloc(rows_t *r, uint64_t dt, uint64_t dt2, uint64_t stack, uint64_t old,
                      uint64_t a, uint64_t size) {
    *r->p++ = HPT_REC_REALLOC;
    r->p = hpt_put_varint(r->p, dt);
    r->p = hpt_put_varint(r->p, dt2);
    r->p = hpt_put_varint(r->p, stack);
    r_addr(r, old);
    r_addr(r, a);
    r->p = hpt_put_varint(r->p, size);
    r->n++;
}

static void r_bytes(rows_t *r, const void *s, size_t n) {
    memcpy(r->p, s, n);
    r->p += n;
    r->n++;
}

// Every record type the column form carries, frees of blocks of the chunk and
// of others.
static void every_kind(rows_t *r) {
    static const uint8_t stack[] = {HPT_REC_STACK, 5, 3, 0x80, 0x80, 0x04, 0x10, 0x11};
    static const uint8_t tstart[] = {HPT_REC_THREAD_START, 7, 3, 'a', 'b', 'c'};
    static const uint8_t tend[] = {HPT_REC_THREAD_END, 0};
    static const uint8_t mload[] = {HPT_REC_MODULE_LOAD, 1, 0x80, 0x20, 0x10, 2, '/', 'x', 1, 9};
    static const uint8_t munload[] = {HPT_REC_MODULE_UNLOAD, 3, 0x80, 0x20};
    static const uint8_t sample[] = {HPT_REC_CPU_SAMPLE, 3, 0x2a, 5};
    static const uint8_t info[] = {HPT_REC_CPU_INFO, 1, 0xe5, 0x07, 4, 0, 2, 'o', 'k'};
    // a block live at exit (issue #23): dt 3, address 0x123450, PAGES 64 bytes, nz 64 + 1
    static const uint8_t live[] = {HPT_REC_TOUCH_LIVE, 3, 0xd0, 0xe8, 0x48, 0x84, 0x02, 2};
    static const uint8_t allocator[] = {HPT_REC_ALLOCATOR, 0, 2, 'j', 'e', 3, '/', 'l', 'i'};
    r_bytes(r, tstart, sizeof tstart);
    r_bytes(r, stack, sizeof stack);
    const uint64_t h = 0x55550000a000ull;
    r_alloc(r, HPT_REC_MALLOC, 120, 5, h, 24);
    r_alloc(r, HPT_REC_CALLOC, 300, 5, h + 0x40, 100);
    r_alloc(r, HPT_REC_ALIGNED, 1, 6, h + 0x1000, 4096);
    r_free(r, 80, h + 0x40, HPT_TOUCH_FILL, 3, 100);  // a block of the chunk
    r_free(r, 80, h, HPT_TOUCH_FILL_SAMPLED, 24, 16); // nz below the count
    r_alloc(r, HPT_REC_MALLOC, 5, 5, h + 0x40000, 300000);
    r_free(r, 80, h + 0x40000, HPT_TOUCH_PAGES, 8192, 4000); // a block of the chunk, by pages
    r_free(r, 80, h + 0x77770, HPT_TOUCH_PAGES, 70, 1u << 21); // not of the chunk
    r_free(r, 80, h - 0x999, HPT_TOUCH_RESIDENT, 4096,
           0);                      // not 16-aligned, not of the chunk
    r_free(r, 9, 0x1234, -1, 0, 0); // not measured
    r_bytes(r, sample, sizeof sample);
    r_realloc(r, 10, 0, 7, 0, h + 0x2000, 10); // realloc(NULL, n)
    r_realloc(r, 10, 0, 7, h + 0x2000, h + 0x2000,
              11);                                           // in place, size grown by one
    r_realloc(r, 10, 5000, 7, h + 0x2000, h + 0x8000, 4000); // moved
    r_realloc(r, 10, 1, 7, 0xdead0, 0xbeef8, 1);             // old not of the chunk
    r_bytes(r, mload, sizeof mload);
    r_bytes(r, munload, sizeof munload);
    r_free(r, 2, h + 0x8000, HPT_TOUCH_FILL, 4000, 4000);
    r_free(r, 2, h + 0x1000, HPT_TOUCH_FILL, 0, 4096);
    r_alloc(r, HPT_REC_MALLOC, UINT32_MAX, 0, UINT64_MAX - 15,
            1ull << 40); // far away
    r_free(r, 0, UINT64_MAX - 15, HPT_TOUCH_FILL, 1ull << 40, 0);
    // sized frees: of a block of the chunk with its size, with another size (smaller and
    // larger: the column holds the difference), and of a block the chunk did not make
    r_alloc(r, HPT_REC_MALLOC, 3, 8, h + 0x9000, 48);
    r_alloc(r, HPT_REC_MALLOC, 3, 8, h + 0x9040, 48);
    r_alloc(r, HPT_REC_MALLOC, 3, 8, h + 0x9080, 48);
    r_free_sized(r, 4, h + 0x9000, 48, 8);
    r_free_sized(r, 4, h + 0x9040, 40, 8);
    r_free_sized(r, 4, h + 0x9080, 1ull << 50, 0);
    r_free_sized(r, 4, 0x777770, 33, 4096);
    r_bytes(r, info, sizeof info);
    r_bytes(r, live, sizeof live);
    r_free(r, 2, h + 0x40000 + 0x1000, HPT_TOUCH_FILL, 5, 6); // after it: deltas as before
    r_bytes(r, allocator, sizeof allocator);
    r_bytes(r, tend, sizeof tend);
}

#endif
