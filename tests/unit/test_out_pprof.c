// SPDX-License-Identifier: MIT
// out_pprof on a synthetic trace: one sample per site with replay's figures (alloc_* over the
// run, inuse_* at exit or at the global peak), an unknown stack as "[unknown stack]", frames as
// return address - 1 in the module's mapping, the mapping with its build id.
#include "analyze/analyze.h"
#include "out/out.h"
#include "pprof_read.h"
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

static void build_trace(void) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/nonexistent/app"};
    tb_rec_process(tb, "/nonexistent/app", 1, argv);
    static const uint8_t bid[] = {0x01, 0xab, 0xcd};
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/nonexistent/app", bid, sizeof bid);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 1000, 0);
    uint64_t s1[] = {0x401000, 0x402000}, s2[] = {0x401100, 0x402000};
    tb_rec_stack(tb, 1, 2, s1);
    tb_rec_stack(tb, 2, 2, s2);
    tb_rec_malloc(tb, 1000, 1, 0x1000, 100);
    tb_rec_malloc(tb, 2000, 1, 0x2000, 50);
    tb_rec_malloc(tb, 3000, 2, 0x3000, 200); // the peak: 350 bytes
    tb_rec_free(tb, 4000, 0x1000);
    tb_rec_free(tb, 5000, 0x3000);
    tb_rec_malloc(tb, 6000, 77, 0x4000, 10); // a stack id never defined
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);
}

static Perftools__Profiles__Profile *profile(bool at_peak) {
    errmsg_t err;
    errmsg_init(&err);
    analyze_t *a = analyze_open(path, 0, NULL, &err);
    cr_assert_not_null(a, "%s", err.msg);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    out_pprof_opts_t o = {.at_peak = at_peak};
    cr_assert_eq(out_pprof_write(a, &o, f, &err), 0, "%s", err.msg);
    fclose(f);
    analyze_close(a);
    Perftools__Profiles__Profile *p = pr_decode((const uint8_t *)buf, len);
    free(buf);
    return p;
}

// The sample whose leaf function is name.
static const Perftools__Profiles__Sample *sample_of(const Perftools__Profiles__Profile *p,
                                                    const char *name) {
    const Perftools__Profiles__Sample *found = NULL;
    for (size_t i = 0; i < p->n_sample; i++)
        if (strcmp(pr_leaf(p, p->sample[i]), name) == 0) {
            cr_assert_null(found, "two samples named %s", name);
            found = p->sample[i];
        }
    cr_assert_not_null(found, "no sample named %s", name);
    return found;
}

static void expect_values(const Perftools__Profiles__Sample *s, int64_t ao, int64_t as,
                          int64_t io, int64_t is) {
    cr_assert_eq(s->n_value, 4);
    cr_expect_eq(s->value[0], ao, "alloc_objects %lld", (long long)s->value[0]);
    cr_expect_eq(s->value[1], as, "alloc_space %lld", (long long)s->value[1]);
    cr_expect_eq(s->value[2], io, "inuse_objects %lld", (long long)s->value[2]);
    cr_expect_eq(s->value[3], is, "inuse_space %lld", (long long)s->value[3]);
}

Test(out_pprof, sites_with_replays_figures_at_exit, .init = build_trace, .fini = cleanup) {
    Perftools__Profiles__Profile *p = profile(false);
    static const char *const types[] = {"alloc_objects", "alloc_space", "inuse_objects",
                                        "inuse_space"};
    cr_assert_eq(p->n_sample_type, 4);
    for (size_t i = 0; i < 4; i++)
        cr_expect_str_eq(pr_str(p, p->sample_type[i]->type), types[i]);
    cr_expect_str_eq(pr_str(p, p->default_sample_type), "inuse_space");
    cr_assert_eq(p->n_sample, 3);
    // the module is not on disk: frames are named module+offset, as the report names them
    expect_values(sample_of(p, "app+0x1000"), 2, 150, 1, 50);
    expect_values(sample_of(p, "app+0x1100"), 1, 200, 0, 0);
    const Perftools__Profiles__Sample *u = sample_of(p, "[unknown stack]");
    expect_values(u, 1, 10, 1, 10);
    cr_expect_eq(pr_location(p, u->location_id[0])->mapping_id, 0);

    const Perftools__Profiles__Sample *s = sample_of(p, "app+0x1000");
    cr_assert_eq(s->n_location_id, 2);
    const Perftools__Profiles__Location *leaf = pr_location(p, s->location_id[0]);
    cr_expect_eq(leaf->address, 0x400fff, "the call, one byte before the return address");
    cr_expect_eq(leaf->mapping_id, 1);
    // the caller's location is shared by both stacks
    cr_expect_eq(s->location_id[1], sample_of(p, "app+0x1100")->location_id[1]);
    cr_assert_eq(p->n_mapping, 1);
    cr_expect_str_eq(pr_str(p, p->mapping[0]->filename), "/nonexistent/app");
    cr_expect_str_eq(pr_str(p, p->mapping[0]->build_id), "01abcd");
    cr_expect_eq(p->mapping[0]->memory_start, 0x400000);
    cr_expect_eq(p->mapping[0]->memory_limit, 0x410000);
    cr_expect(!p->mapping[0]->has_functions, "a missing module is left to pprof to symbolize");
    bool exit_comment = false, unfinished = false;
    for (size_t i = 0; i < p->n_comment; i++) {
        exit_comment |= strstr(pr_str(p, p->comment[i]), "live at exit") != NULL;
        unfinished |= strstr(pr_str(p, p->comment[i]), "no trailer") != NULL;
    }
    cr_expect(exit_comment && unfinished);
    perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(out_pprof, at_peak_inuse_is_the_global_peak, .init = build_trace, .fini = cleanup) {
    Perftools__Profiles__Profile *p = profile(true);
    expect_values(sample_of(p, "app+0x1000"), 2, 150, 2, 150);
    expect_values(sample_of(p, "app+0x1100"), 1, 200, 1, 200);
    expect_values(sample_of(p, "[unknown stack]"), 1, 10, 0, 0);
    perftools__profiles__profile__free_unpacked(p, NULL);
}

Test(out_pprof, since_counts_only_what_earlier_profiles_did_not, .init = build_trace,
     .fini = cleanup) {
    hmap_t since;
    hmap_init(&since, sizeof(out_pprof_alloc_t));
    // as if an earlier profile had counted one block of 100 bytes at stack 1
    *(out_pprof_alloc_t *)hmap_put(&since, 1, NULL) = (out_pprof_alloc_t){1, 100};
    for (int round = 0; round < 2; round++) {
        errmsg_t err;
        errmsg_init(&err);
        analyze_t *a = analyze_open(path, 0, NULL, &err);
        cr_assert_not_null(a, "%s", err.msg);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        out_pprof_opts_t o = {.since = &since, .since_ns = 2500};
        cr_assert_eq(out_pprof_write(a, &o, f, &err), 0, "%s", err.msg);
        fclose(f);
        analyze_close(a);
        Perftools__Profiles__Profile *p = pr_decode((const uint8_t *)buf, len);
        free(buf);
        cr_expect_eq(p->duration_nanos, 6000 - 2500);
        if (round == 0) {
            expect_values(sample_of(p, "app+0x1000"), 1, 50, 1, 50);
            expect_values(sample_of(p, "app+0x1100"), 1, 200, 0, 0);
            expect_values(sample_of(p, "[unknown stack]"), 1, 10, 1, 10);
        } else {
            // nothing new: only the sites with live blocks are left, with no allocations
            cr_expect_eq(p->n_sample, 2);
            expect_values(sample_of(p, "app+0x1000"), 0, 0, 1, 50);
            expect_values(sample_of(p, "[unknown stack]"), 0, 0, 1, 10);
        }
        perftools__profiles__profile__free_unpacked(p, NULL);
    }
    out_pprof_alloc_t *s1 = hmap_get(&since, 1);
    cr_expect(s1 && s1->blocks == 2 && s1->bytes == 150);
    hmap_fini(&since);
}
