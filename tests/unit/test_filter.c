// SPDX-License-Identifier: MIT
// filter: "from module" decided by the innermost frame, with stacks defined after their use
// and a module address range reused by another module after dlclose.
#include "model/filter.h"
#include "trace/reader.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <unistd.h>

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

static reader_event_t alloc_at(uint64_t t, uint64_t stack) {
    return (reader_event_t){.kind = READER_ALLOC,
                            .sub = READER_MALLOC,
                            .tid = 1,
                            .time_ns = t,
                            .stack = stack,
                            .addr = 0x10,
                            .size = 1};
}

Test(filter, keeps_allocations_whose_caller_is_in_the_module, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/usr/bin/app", NULL, 0);
    tb_rec_module_load(tb, 0, 0x7f0000000000ull, 0x20000, "/usr/lib/libfoo.so.1", NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 10, 0);
    tb_rec_malloc(tb, 10, 1, 0x10, 1);
    tb_end(tb, false);
    // stacks arrive after their use; 2 has libfoo only as an outer frame
    tb_begin(tb, HPT_CHUNK_EVENTS, 2, 10, 0);
    uint64_t s1[] = {0x7f0000000100ull, 0x401000};
    uint64_t s2[] = {0x401000, 0x7f0000000100ull};
    uint64_t s3[] = {0x12345678};
    tb_rec_stack(tb, 1, 2, s1);
    tb_rec_stack(tb, 2, 2, s2);
    tb_rec_stack(tb, 3, 1, s3);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *defs = reader_open(path, &err);
    cr_assert_not_null(defs);
    cr_assert_eq(reader_load_defs(defs, &err), 0);

    filter_t *f = filter_new_from_module(defs, "libfoo.so.1");
    cr_assert_eq(filter_n_matching_modules(f), 1);
    reader_event_t e1 = alloc_at(10, 1), e2 = alloc_at(10, 2), e3 = alloc_at(10, 3),
                   e9 = alloc_at(10, 9);
    for (int twice = 0; twice < 2; twice++) { // second round hits the cache
        cr_assert(filter_keep(f, &e1));
        cr_assert_not(filter_keep(f, &e2));
        cr_assert_not(filter_keep(f, &e3));
        cr_assert_not(filter_keep(f, &e9)); // undefined stack
    }
    filter_free(f);

    f = filter_new_from_module(defs, "libfoo.so"); // the basename must match exactly
    cr_assert_eq(filter_n_matching_modules(f), 0);
    cr_assert_not(filter_keep(f, &e1));
    filter_free(f);
    reader_close(defs);
    tb_free(tb);
}

Test(filter, reused_address_range_is_judged_by_time, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_EVENTS, 1, 0, 0);
    tb_rec_module_load(tb, 100, 0x7f0000000000ull, 0x1000, "/p/liba.so", NULL, 0);
    tb_rec_module_unload(tb, 200, 0x7f0000000000ull);
    tb_rec_module_load(tb, 300, 0x7f0000000000ull, 0x1000, "/p/libb.so", NULL, 0);
    uint64_t s[] = {0x7f0000000010ull};
    tb_rec_stack(tb, 4, 1, s);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    errmsg_t err;
    errmsg_init(&err);
    reader_t *defs = reader_open(path, &err);
    cr_assert_eq(reader_load_defs(defs, &err), 0);
    filter_t *f = filter_new_from_module(defs, "liba.so");
    reader_event_t before = alloc_at(50, 4), during = alloc_at(150, 4), gap = alloc_at(250, 4),
                   after = alloc_at(350, 4);
    cr_assert(filter_keep(f, &before)); // constructor allocations precede the load record
    cr_assert(filter_keep(f, &during));
    cr_assert_not(filter_keep(f, &gap)); // libb's constructors: libb loads next
    cr_assert_not(filter_keep(f, &after));
    filter_free(f);
    reader_close(defs);
    tb_free(tb);
}
