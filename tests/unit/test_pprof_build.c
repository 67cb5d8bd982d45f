// SPDX-License-Identifier: MIT
// pprof_build: functions and locations are de-duplicated by everything that defines them (and
// only by that), strings are made UTF-8, and what is written decodes back, gzip and protobuf
// alike, to the same tables.
#include "out/pprof_build.h"
#include "pprof_read.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

static const char *const types[][2] = {{"alloc_space", "bytes"}, {"inuse_space", "bytes"}};

static Perftools__Profiles__Profile *written(pprof_build_t *b) {
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(pprof_build_write(b, f, &err), 0, "%s", err.msg);
    fclose(f);
    Perftools__Profiles__Profile *p = pr_decode((const uint8_t *)buf, len);
    free(buf);
    return p;
}

Test(pprof_build, functions_are_one_per_name_system_name_and_file) {
    pprof_build_t *b = pprof_build_new(types, 2);
    uint64_t f1 = pprof_build_function(b, "main", NULL, "/src/a.c");
    cr_expect_eq(f1, 1);
    cr_expect_eq(pprof_build_function(b, "main", "", "/src/a.c"), f1, "NULL and \"\" are one");
    uint64_t f2 = pprof_build_function(b, "main", NULL, "/src/b.c");
    uint64_t f3 = pprof_build_function(b, "main", "main", "/src/a.c");
    uint64_t f4 = pprof_build_function(b, "mai", NULL, "n/src/a.c"); // same bytes run together
    cr_expect(f2 != f1 && f3 != f1 && f3 != f2 && f4 != f1);
    cr_expect_eq(pprof_build_n_functions(b), 4);
    pprof_build_free(b);
}

Test(pprof_build, locations_are_one_per_mapping_address_and_lines) {
    pprof_build_t *b = pprof_build_new(types, 2);
    uint64_t inner = pprof_build_function(b, "inlined_helper", NULL, "/src/h.h");
    uint64_t outer = pprof_build_function(b, "caller", NULL, "/src/c.c");
    pprof_line_t both[] = {{inner, 12}, {outer, 40}};
    uint64_t l1 = pprof_build_location(b, 1, 0x1000, both, 2);
    cr_expect_eq(pprof_build_location(b, 1, 0x1000, both, 2), l1);
    // the same address cut inside its inlined run, another line, mapping or address: new ones
    uint64_t l2 = pprof_build_location(b, 1, 0x1000, both + 1, 1);
    pprof_line_t other_line[] = {{inner, 13}, {outer, 40}};
    uint64_t l3 = pprof_build_location(b, 1, 0x1000, other_line, 2);
    uint64_t l4 = pprof_build_location(b, 2, 0x1000, both, 2);
    uint64_t l5 = pprof_build_location(b, 1, 0x1001, both, 2);
    uint64_t ids[] = {l1, l2, l3, l4, l5};
    for (size_t i = 0; i < 5; i++)
        for (size_t j = i + 1; j < 5; j++)
            cr_expect_neq(ids[i], ids[j], "locations %zu and %zu", i, j);
    cr_expect_eq(pprof_build_n_locations(b), 5);
    // many locations: the table grows and every one still finds itself
    pprof_line_t l = {outer, 0};
    for (uint64_t a = 0; a < 5000; a++) {
        l.line = (int64_t)a;
        cr_assert_eq(pprof_build_location(b, 3, a, &l, 1), 6 + a);
    }
    for (uint64_t a = 0; a < 5000; a++) {
        l.line = (int64_t)a;
        cr_assert_eq(pprof_build_location(b, 3, a, &l, 1), 6 + a);
    }
    cr_expect_eq(pprof_build_location(b, 1, 0x1000, both, 2), l1);
    pprof_build_free(b);
}

Test(pprof_build, strings_become_utf8_and_index_0_is_empty) {
    pprof_build_t *b = pprof_build_new(types, 2);
    cr_expect_eq(pprof_build_string(b, ""), 0);
    cr_expect_eq(pprof_build_string(b, NULL), 0);
    int64_t bad = pprof_build_string(b, "f\xff\xc3 x");
    cr_expect_eq(pprof_build_string(b, "f?? x"), bad, "invalid bytes become '?'");
    int64_t good = pprof_build_string(b, "caf\xc3\xa9");
    cr_expect_neq(good, bad);
    Perftools__Profiles__Profile *p = written(b);
    cr_expect_str_eq(p->string_table[0], "");
    cr_expect_str_eq(pr_str(p, bad), "f?? x");
    cr_expect_str_eq(pr_str(p, good), "caf\xc3\xa9");
    perftools__profiles__profile__free_unpacked(p, NULL);
    pprof_build_free(b);
}

Test(pprof_build, written_profile_decodes_to_the_same_tables) {
    pprof_build_t *b = pprof_build_new(types, 2);
    static const uint8_t bid[] = {0xde, 0xad, 0x00, 0x0f};
    pprof_mapping_t m = {.start = 0x400000, .limit = 0x500000, .file = "/bin/app",
                         .build_id = bid, .build_id_len = sizeof bid, .has_functions = true};
    cr_expect_eq(pprof_build_mapping(b, &m), 1);
    uint64_t fa = pprof_build_function(b, "alloc_here", NULL, "/src/a.c");
    uint64_t fm = pprof_build_function(b, "main", NULL, "/src/main.c");
    pprof_line_t la = {fa, 7}, lm = {fm, 3};
    uint64_t stack[] = {pprof_build_location(b, 1, 0x401000, &la, 1),
                        pprof_build_location(b, 1, 0x402000, &lm, 1)};
    int64_t v1[] = {100, 0}, v2[] = {5000000000ll, 32};
    pprof_build_sample(b, stack, 2, v1);
    pprof_build_sample(b, stack + 1, 1, v2);
    pprof_build_set_period(b, "space", "bytes", 1);
    pprof_build_set_time(b, 1700000000000000000ll, 2500000000ll);
    pprof_build_set_default_type(b, "inuse_space");
    pprof_build_add_comment(b, "hello");

    Perftools__Profiles__Profile *p = written(b);
    cr_assert_eq(p->n_sample_type, 2);
    cr_expect_str_eq(pr_str(p, p->sample_type[0]->type), "alloc_space");
    cr_expect_str_eq(pr_str(p, p->sample_type[1]->unit), "bytes");
    cr_expect_str_eq(pr_str(p, p->default_sample_type), "inuse_space");
    cr_expect_str_eq(pr_str(p, p->period_type->type), "space");
    cr_expect_eq(p->period, 1);
    cr_expect_eq(p->time_nanos, 1700000000000000000ll);
    cr_expect_eq(p->duration_nanos, 2500000000ll);
    cr_assert_eq(p->n_comment, 1);
    cr_expect_str_eq(pr_str(p, p->comment[0]), "hello");
    cr_assert_eq(p->n_mapping, 1);
    cr_expect_eq(p->mapping[0]->id, 1);
    cr_expect_eq(p->mapping[0]->memory_start, 0x400000);
    cr_expect_eq(p->mapping[0]->memory_limit, 0x500000);
    cr_expect_str_eq(pr_str(p, p->mapping[0]->filename), "/bin/app");
    cr_expect_str_eq(pr_str(p, p->mapping[0]->build_id), "dead000f");
    cr_expect(p->mapping[0]->has_functions && !p->mapping[0]->has_line_numbers);
    cr_assert_eq(p->n_sample, 2);
    cr_assert_eq(p->sample[0]->n_location_id, 2);
    cr_expect_str_eq(pr_leaf(p, p->sample[0]), "alloc_here");
    cr_expect_eq(pr_location(p, p->sample[0]->location_id[1])->address, 0x402000);
    cr_expect_eq(pr_location(p, p->sample[0]->location_id[0])->line[0]->line, 7);
    cr_expect_str_eq(pr_str(p, pr_function(p, fm)->filename), "/src/main.c");
    cr_assert_eq(p->sample[1]->n_value, 2);
    cr_expect_eq(p->sample[1]->value[0], 5000000000ll);
    cr_expect_eq(p->sample[1]->value[1], 32);
    cr_expect_str_eq(pr_leaf(p, p->sample[1]), "main");
    perftools__profiles__profile__free_unpacked(p, NULL);
    pprof_build_free(b);
}
