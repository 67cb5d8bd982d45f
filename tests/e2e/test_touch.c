// SPDX-License-Identifier: MIT
// Bytes touched (docs/trace-format.md#touch) on programs built to touch known amounts: the
// pattern measure exact to the byte when every line is measured, calloc blocks judged by their
// non-zero bytes, a realloc chain, a huge reservation measured by resident pages, the default
// line sampling's estimates, HEAPPROF_TOUCH=0, and the Rust over-reservation of
// samples/rust/vec_growth.rs.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *trace_of(const char *prog, const char *tag, const char *const *env) {
    char *dir = e2e_tmpdir(tag);
    char *trace = malloc(4200);
    snprintf(trace, 4200, "%s/t.hpt", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0, "%s failed", prog);
    free(dir);
    return trace;
}

static const char *method(json_t *s) {
    const char *m = json_string_value(json_object_get(s, "touch_method"));
    return m ? m : "(null)";
}

static char *prog_path(const char *dir, const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

// every line of blocks up to 1 MiB measured: the pattern figures are exact
static const char *const exact_env[] = {"HEAPPROF_TOUCH_SAMPLE_BYTES=1048576", NULL};

Test(touch, exact_figures_by_pattern_and_resident_pages, .timeout = 120) {
    char *prog = prog_path(E2E_PROGS, "touch");
    char *trace = trace_of(prog, "touch", exact_env);
    json_t *r = e2e_report(trace);
    json_t *s = e2e_site(r, "part_written");
    cr_expect_eq(e2e_int(s, "touch_measured_blocks"), 100);
    cr_expect_eq(e2e_int(s, "touch_measured_bytes"), 100000);
    cr_expect_eq(e2e_int(s, "touched_bytes"), 10000);
    cr_expect_str_eq(method(s), "pattern");

    s = e2e_site(r, "calloc_part");
    cr_expect_eq(e2e_int(s, "touch_measured_bytes"), 25600);
    cr_expect_eq(e2e_int(s, "touched_bytes"), 500, "calloc blocks count their non-zero bytes");

    s = e2e_site(r, "zeroed_by_hand");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 5120, "zeros written to a malloc block are touched");

    s = e2e_site(r, "big_reserve");
    cr_expect_str_eq(method(s), "resident pages");
    cr_expect_eq(e2e_int(s, "touch_measured_bytes"), 4 << 20);
    long long big = e2e_int(s, "touched_bytes");
    cr_expect(big >= 64 * 1024 && big <= 72 * 1024, "4 MiB block with 64 KiB written: %lld", big);

    // realloc does not measure the block it replaces (its bytes live on in the new one); the
    // new block stays with the first one's site (DHAT's convention)
    s = e2e_site(r, "grown");
    cr_expect_eq(e2e_int(s, "touch_measured_blocks"), 1);
    cr_expect_eq(e2e_int(s, "touch_measured_bytes"), 1000);
    cr_expect_eq(e2e_int(s, "touched_bytes"), 150);

    s = e2e_site(r, "aligned_full");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 1000);

    s = e2e_site(r, "leaked");
    cr_expect_eq(e2e_int(s, "touch_measured_blocks"), 0, "blocks live at exit are not measured");
    cr_expect(json_is_null(json_object_get(s, "touch_method")));

    json_t *t = json_object_get(json_object_get(r, "totals"), "touch");
    cr_expect(json_is_true(json_object_get(t, "measured")));
    cr_expect_eq(e2e_int(t, "fill_max"), 128 * 1024);
    // the totals (stats' replay) equal the sum over the sites, and stats prints the same
    long long touched = 0, measured = 0;
    json_t *site;
    size_t i;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        touched += e2e_int(site, "touched_bytes");
        measured += e2e_int(site, "touch_measured_bytes");
    }
    cr_expect_eq(e2e_int(t, "touched_bytes"), touched);
    cr_expect_eq(e2e_int(t, "bytes"), measured);
    json_t *st = e2e_stats(trace, NULL);
    cr_expect(json_equal(json_object_get(st, "touch"), t), "stats and report disagree on touch");
    json_decref(st);

    // the text report ranks the 4 MiB reservation first among untouched bytes
    const char *args[] = {"report", trace, NULL};
    char *out = NULL;
    cr_assert_eq(e2e_heapprof(args, &out, NULL), 0);
    const char *sec = strstr(out, "\nReserved but untouched (all: ");
    cr_assert(sec, "no untouched section in:\n%s", out);
    const char *first = strstr(sec, " 1. ");
    cr_assert(first);
    cr_expect(strstr(first, "big_reserve") && strstr(first, "big_reserve") < strstr(first, " 2. "),
              "big_reserve is not first:\n%s", sec);
    cr_expect(strstr(out, "\ntouched    "), "no touched summary line");
    free(out);
    json_decref(r);
    free(trace);
    free(prog);
}

// By default blocks above 512 usable bytes are measured on every k-th 64-byte line: estimates.
Test(touch, sampled_lines_estimate, .timeout = 120) {
    char *prog = prog_path(E2E_PROGS, "touch");
    char *trace = trace_of(prog, "touch_sampled", NULL);
    json_t *r = e2e_report(trace);
    // 1000-byte blocks (1008 usable): every other line, 512 bytes measured of each; the first
    // 100 bytes written touch line 0 only, so the estimate is 2 x 64 per block
    json_t *s = e2e_site(r, "part_written");
    cr_expect_str_eq(method(s), "sampled pattern");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 100 * 128);
    // 256-byte blocks are measured whole, as before
    s = e2e_site(r, "zeroed_by_hand");
    cr_expect_str_eq(method(s), "pattern");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 5120);
    s = e2e_site(r, "aligned_full");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 1000, "a fully written block stays fully touched");
    s = e2e_site(r, "big_reserve");
    cr_expect_str_eq(method(s), "resident pages");
    json_decref(r);
    free(trace);
    free(prog);
}

Test(touch, off_measures_nothing_and_changes_no_allocation_figure, .timeout = 120) {
    char *prog = prog_path(E2E_PROGS, "touch");
    char *on = trace_of(prog, "touch_on", NULL);
    const char *env[] = {"HEAPPROF_TOUCH=0", NULL};
    char *off = trace_of(prog, "touch_off", env);
    json_t *r = e2e_report(off);
    json_t *t = json_object_get(json_object_get(r, "totals"), "touch");
    cr_expect(json_is_false(json_object_get(t, "measured")));
    cr_expect_eq(e2e_int(t, "blocks"), 0);
    json_decref(r);
    json_t *a = e2e_stats(on, "touch"), *b = e2e_stats(off, "touch");
    const char *keys[] = {"blocks", "bytes", "frees", "peak_bytes", "end_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_expect_eq(e2e_int(a, keys[i]), e2e_int(b, keys[i]), "%s differs", keys[i]);
    json_decref(a);
    json_decref(b);
    free(on);
    free(off);
    free(prog);
}

Test(touch, rust_over_reservation_shows_almost_nothing_touched, .timeout = 120) {
    char *prog = prog_path(E2E_SAMPLES, "vec_growth");
    if (access(prog, X_OK))
        cr_skip_test("vec_growth was not built (no rustc?)");
    char *trace = trace_of(prog, "touch_rust", NULL);
    json_t *r = e2e_report(trace);
    // Vec::<u8>::with_capacity(1 << 20) with 1 KiB pushed
    json_t *s = e2e_site(r, "vec_growth::over_reserve");
    long long measured = e2e_int(s, "touch_measured_bytes"), touched = e2e_int(s, "touched_bytes");
    cr_expect_eq(measured, 1 << 20);
    cr_expect(touched * 20 <= measured, "%lld of %lld touched (more than 5%%)", touched, measured);
    cr_expect(touched >= 1024, "%lld touched, 1 KiB was written", touched);
    json_decref(r);
    free(trace);
    free(prog);
}
