// SPDX-License-Identifier: MIT
// Helpers of the reader tests: open a trace a builder made, read all its events; with them
// xorshift.h's repeatable random stream. Header-only; every function asserts with Criterion on
// failure.
#ifndef HEAPPROF_TESTS_READ_TRACE_H
#define HEAPPROF_TESTS_READ_TRACE_H

#include "trace/reader.h"
#include "trace_builder.h"
#include "xorshift.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdlib.h>

// Writes tb to a new temporary file (its name into path, at least 64 bytes) and opens it.
static inline reader_t *rt_open_built(tb_t *tb, char *path) {
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *r = reader_open(path, &err);
    cr_assert_not_null(r, "reader_open: %s", err.msg);
    reader_keep_threads(r); // the tests read the thread list
    return r;
}

typedef struct rt_events {
    reader_event_t *v;
    size_t n, cap;
} rt_events_t;

// Appends ev to e.
static inline void rt_push(rt_events_t *e, const reader_event_t *ev) {
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 64;
        e->v = realloc(e->v, e->cap * sizeof *e->v);
        cr_assert_not_null(e->v);
    }
    e->v[e->n++] = *ev;
}

// Every event reader_next hands out, in order; the caller frees .v.
static inline rt_events_t rt_read_all(reader_t *r) {
    rt_events_t e = {0};
    errmsg_t err;
    errmsg_init(&err);
    reader_event_t ev;
    int rc;
    while ((rc = reader_next(r, &ev, &err)) == 1)
        rt_push(&e, &ev);
    cr_assert_eq(rc, 0, "reader_next: %s", err.msg);
    return e;
}

#endif
