// SPDX-License-Identifier: MIT
// out_dhat on a synthetic trace: the keys the viewer requires, DHAT's counting (malloc(0) is
// 1 byte, realloc stays at its first site), frames written once, and stacks that print alike
// (here: two stack ids the trace never defined) merged so the viewer sees no repeated stack.
#include "analyze/analyze.h"
#include "out/out.h"
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

static json_int_t ival(json_t *o, const char *k) {
    json_t *v = json_object_get(o, k);
    cr_assert(json_is_integer(v), "%s", k);
    return json_integer_value(v);
}

Test(out_dhat, viewer_keys_counting_and_merged_stacks, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/nonexistent/app", "--flag"};
    tb_rec_process(tb, "/nonexistent/app", 2, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/nonexistent/app", NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 7, 1000, 0);
    uint64_t s1[] = {0x401000, 0x402000}, s2[] = {0x401100, 0x402000};
    tb_rec_stack(tb, 1, 2, s1);
    tb_rec_stack(tb, 2, 2, s2);
    tb_rec_malloc(tb, 1000, 1, 0x1000, 0);              // 1 byte for DHAT
    tb_rec_malloc(tb, 2000, 2, 0x2000, 16);
    tb_rec_realloc(tb, 3000, 3001, 1, 0x2000, 0x3000, 32); // stays at site 2
    tb_rec_malloc(tb, 4000, 77, 0x4000, 5);             // stack ids never defined:
    tb_rec_malloc(tb, 5000, 78, 0x5000, 6);             // one merged program point
    tb_rec_free(tb, 6000, 0x1000);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);

    errmsg_t err;
    errmsg_init(&err);
    analyze_t *a = analyze_open(path, REPLAY_DHAT, NULL, &err);
    cr_assert_not_null(a, "%s", err.msg);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    cr_assert_eq(out_dhat_write(a, f, &err), 0, "%s", err.msg);
    fclose(f);
    analyze_close(a);

    json_error_t je;
    json_t *j = json_loads(buf, 0, &je);
    cr_assert_not_null(j, "%s: %s", je.text, buf);
    static const char *const required[] = {"dhatFileVersion", "mode", "verb", "bklt", "bkacc",
                                           "tu", "Mtu", "tuth", "cmd", "pid", "te", "tg",
                                           "pps", "ftbl"};
    for (size_t i = 0; i < sizeof required / sizeof *required; i++)
        cr_expect_not_null(json_object_get(j, required[i]), "%s", required[i]);
    cr_expect_eq(ival(j, "dhatFileVersion"), 2);
    cr_expect_str_eq(json_string_value(json_object_get(j, "cmd")), "/nonexistent/app --flag");
    cr_expect_eq(ival(j, "te"), 6);
    json_t *ftbl = json_object_get(j, "ftbl"), *pps = json_object_get(j, "pps");
    cr_expect_str_eq(json_string_value(json_array_get(ftbl, 0)), "[root]");
    cr_assert_eq(json_array_size(pps), 3);
    // frames: 0x401000, 0x401100, the shared 0x402000, the unknown-stack marker
    cr_expect_eq(json_array_size(ftbl), 5);
    json_int_t tb_sum = 0, tbk_sum = 0;
    size_t i;
    json_t *pp;
    json_array_foreach(pps, i, pp) {
        static const char *const keys[] = {"tb", "tbk", "tl", "mb", "mbk", "gb",
                                           "gbk", "eb", "ebk"};
        for (size_t k = 0; k < sizeof keys / sizeof *keys; k++)
            ival(pp, keys[k]);
        tb_sum += ival(pp, "tb");
        tbk_sum += ival(pp, "tbk");
        json_t *fs = json_object_get(pp, "fs");
        if (json_array_size(fs) == 1) { // the merged unknown stacks
            cr_expect_eq(ival(pp, "tb"), 11);
            cr_expect_eq(ival(pp, "tbk"), 2);
            cr_expect_eq(ival(pp, "eb"), 11);
        }
        if (ival(pp, "tbk") == 2 && json_array_size(fs) == 2) { // site 2 with its realloc
            cr_expect_eq(ival(pp, "tb"), 48);
            cr_expect_eq(ival(pp, "eb"), 32);
            cr_expect_eq(ival(pp, "gb"), 32); // peak 44 at t=5000: 1 + 32 + 5 + 6
        }
    }
    cr_expect_eq(tb_sum, 1 + 16 + 32 + 5 + 6);
    cr_expect_eq(tbk_sum, 5);
    json_decref(j);
    free(buf);
}
