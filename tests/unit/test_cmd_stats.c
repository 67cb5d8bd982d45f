// SPDX-License-Identifier: MIT
// cmd_stats: option parsing, JSON keys and values on a synthetic trace, the text summary with
// its loss lines, and --from-module.
#include "cmd/cmd_stats.h"
#include "trace_builder.h"

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char path[64];

static void cleanup(void) {
    if (path[0])
        unlink(path);
}

// Two threads: main allocates 3 blocks from libfoo and app, frees one; a worker reallocs.
static tb_t *sample(bool trailer) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"app"};
    tb_rec_process(tb, "/usr/bin/app", 1, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/usr/bin/app", NULL, 0);
    tb_rec_module_load(tb, 0, 0x7f0000000000ull, 0x10000, "/lib/libfoo.so", NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 10, 0);
    uint64_t app[] = {0x401000}, foo[] = {0x7f0000000040ull, 0x401000};
    tb_rec_stack(tb, 1, 1, app);
    tb_rec_stack(tb, 2, 2, foo);
    tb_rec_malloc(tb, 10, 1, 0x1000, 100);
    tb_rec_malloc(tb, 20, 2, 0x2000, 1000);
    tb_rec_calloc(tb, 30, 2, 0x3000, 10);
    tb_rec_free(tb, 40, 0x2000);
    tb_end(tb, true);
    tb_sync(tb, 45);
    tb_begin(tb, HPT_CHUNK_EVENTS, 101, 50, 0);
    tb_rec_realloc(tb, 50, 60, 1, 0x1000, 0x4000, 500);
    tb_rec_free(tb, 70, 0x9999);
    tb_end(tb, false);
    if (trailer) {
        tb_begin(tb, HPT_CHUNK_TRAILER, 0, 0, 0);
        tb_rec_trailer(tb, 6, 3, 2, 0);
        tb_end(tb, false);
    }
    return tb;
}

static char *run_stats(const char *const *args, int argc) {
    cmd_stats_opts_t o;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(cmd_stats_parse(argc, (char **)args, &o, &err), 0, "%s", err.msg);
    char *buf = NULL;
    size_t len = 0;
    FILE *out = open_memstream(&buf, &len);
    cr_assert_eq(cmd_stats_run(&o, out, &err), 0, "%s", err.msg);
    fclose(out);
    return buf;
}

static json_int_t jget(json_t *j, const char *a, const char *b) {
    json_t *v = json_object_get(j, a);
    if (b)
        v = json_object_get(v, b);
    cr_assert(json_is_integer(v), "%s.%s", a, b ? b : "");
    return json_integer_value(v);
}

Test(cmd_stats, json_has_the_totals, .fini = cleanup) {
    tb_t *tb = sample(true);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    const char *args[] = {"stats", path, "--json"};
    char *out = run_stats(args, 3);
    json_error_t je;
    json_t *j = json_loads(out, 0, &je);
    cr_assert_not_null(j, "%s", je.text);
    cr_assert_eq(jget(j, "blocks", NULL), 4);
    cr_assert_eq(jget(j, "bytes", NULL), 1610);
    cr_assert_eq(jget(j, "frees", NULL), 1);
    cr_assert_eq(jget(j, "peak_bytes", NULL), 1110);
    cr_assert_eq(jget(j, "peak_blocks", NULL), 3);
    cr_assert_eq(jget(j, "end_bytes", NULL), 510);
    cr_assert_eq(jget(j, "end_blocks", NULL), 2);
    cr_assert_eq(jget(j, "threads", NULL), 2);
    cr_assert_eq(jget(j, "events", NULL), 6);
    cr_assert_eq(jget(j, "stacks", NULL), 2);
    cr_assert_eq(jget(j, "duration_ns", NULL), 70);
    cr_assert_eq(jget(j, "pid", NULL), 4242);
    cr_assert_str_eq(json_string_value(json_object_get(j, "exe")), "/usr/bin/app");
    cr_assert_eq(jget(j, "damage", "chunks_damaged"), 0);
    cr_assert_eq(jget(j, "damage", "bytes_skipped"), 0);
    cr_assert_eq(jget(j, "damage", "chunks_missing"), 0);
    cr_assert_eq(jget(j, "damage", "late_events"), 0);
    cr_assert(json_is_false(json_object_get(json_object_get(j, "damage"), "truncated")));
    cr_assert(json_is_true(json_object_get(json_object_get(j, "damage"), "clean_exit")));
    cr_assert_eq(jget(j, "anomalies", "unknown_frees"), 1);
    cr_assert_eq(jget(j, "anomalies", "double_allocs"), 0);
    cr_assert_eq(jget(j, "shim", "events_lost"), 3);
    cr_assert_eq(jget(j, "shim", "events_recorded"), 6);
    json_decref(j);
    free(out);
    tb_free(tb);
}

Test(cmd_stats, json_without_trailer_has_null_shim_counters, .fini = cleanup) {
    tb_t *tb = sample(false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    const char *args[] = {"stats", "--json", path};
    char *out = run_stats(args, 3);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert(json_is_null(json_object_get(json_object_get(j, "shim"), "events_lost")));
    cr_assert(json_is_false(json_object_get(json_object_get(j, "damage"), "clean_exit")));
    json_decref(j);
    free(out);
    tb_free(tb);
}

Test(cmd_stats, text_summary_names_peak_and_losses, .fini = cleanup) {
    tb_t *tb = sample(false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    const char *args[] = {"stats", path};
    char *out = run_stats(args, 2);
    cr_assert_not_null(strstr(out, "peak       1.1 KiB (1,110 bytes) in 3 blocks"), "%s", out);
    cr_assert_not_null(strstr(out, "at end     510 B (510 bytes) in 2 blocks"), "%s", out);
    cr_assert_not_null(strstr(out, "no trailer"), "%s", out);
    cr_assert_not_null(strstr(out, "1 frees of unknown addresses"), "%s", out);
    cr_assert_null(strstr(out, "damaged"), "%s", out);
    free(out);
    tb_free(tb);
}

// Strings from the trace reach the text summary through fmt_safe_text (issue 17, item 7): an
// executable path and a CPU sampler reason with terminal escapes print as \xNN.
Test(cmd_stats, text_escapes_control_bytes_from_the_trace, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"app"};
    tb_rec_process(tb, "/tmp/\x1b]0;PWNED\x07" "app", 1, argv);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 10, 0);
    tb_rec_cpu_info(tb, HPT_CPU_OFF, 997, 0, 0, "refused\x1b[2J\n");
    tb_rec_stack(tb, 1, 1, (const uint64_t[]){0x401000});
    tb_rec_malloc(tb, 10, 1, 0x1000, 100);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    const char *args[] = {"stats", path};
    char *out = run_stats(args, 2);
    cr_expect_not_null(strstr(out, "/tmp/\\x1b]0;PWNED\\x07app"), "%s", out);
    cr_expect_not_null(strstr(out, "off: refused\\x1b[2J\\x0a\n"), "%s", out);
    for (const char *c = out; *c; c++)
        cr_expect(*c == '\n' || ((unsigned char)*c >= 0x20 && *c != 0x7f),
                  "control byte 0x%02x at offset %zu", (unsigned char)*c, (size_t)(c - out));
    free(out);
    tb_free(tb);
}

Test(cmd_stats, from_module_counts_only_that_module, .fini = cleanup) {
    tb_t *tb = sample(true);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    const char *args[] = {"stats", path, "--json", "--from-module", "libfoo.so"};
    char *out = run_stats(args, 5);
    json_t *j = json_loads(out, 0, NULL);
    cr_assert_not_null(j);
    cr_assert_eq(jget(j, "blocks", NULL), 2);
    cr_assert_eq(jget(j, "bytes", NULL), 1010);
    cr_assert_eq(jget(j, "frees", NULL), 1);
    cr_assert_eq(jget(j, "peak_bytes", NULL), 1010);
    cr_assert_eq(jget(j, "end_bytes", NULL), 10);
    cr_assert_eq(jget(j, "filter", "modules_matched"), 1);
    json_decref(j);
    free(out);
    tb_free(tb);
}

static void expect_parse_error(const char *const *args, int argc, const char *needle) {
    cmd_stats_opts_t o;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(cmd_stats_parse(argc, (char **)args, &o, &err), -1);
    cr_assert_not_null(strstr(err.msg, needle), "'%s'", err.msg);
}

Test(cmd_stats, parse_rejects_bad_usage) {
    expect_parse_error((const char *[]){"stats"}, 1, "missing TRACE");
    expect_parse_error((const char *[]){"stats", "a", "--frob"}, 3, "unknown option '--frob'");
    expect_parse_error((const char *[]){"stats", "a", "b"}, 3, "unexpected argument 'b'");
    expect_parse_error((const char *[]){"stats", "a", "--from-module"}, 3, "needs a NAME");
}

Test(cmd_stats, run_reports_unreadable_trace) {
    cmd_stats_opts_t o = {.trace = "/nonexistent.hpt"};
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(cmd_stats_run(&o, stdout, &err), -1);
    cr_assert_not_null(strstr(err.msg, "/nonexistent.hpt"));
}
