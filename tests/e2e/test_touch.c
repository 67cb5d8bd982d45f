// SPDX-License-Identifier: MIT
// Bytes touched (docs/trace-format.md#touch) on programs built to touch known amounts: the
// pattern measure exact to the byte when every line is measured, calloc blocks judged by their
// non-zero bytes, a realloc chain, a huge fresh reservation measured on its resident pages, the
// default line sampling's estimates, HEAPPROF_TOUCH=0, and the Rust over-reservation of
// samples/rust/vec_growth.rs. Issue #23: blocks of 16 B to 64 MiB from every origin glibc has
// (progs/touch_origins.c, whose own tally of what it wrote is the truth), and the Rust buffer
// reserved after large frees (samples/rust/reserve_after_free.rs).
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
static const char *const live_env[] = {"HEAPPROF_TOUCH_LIVE=1", NULL};
// and blocks live at exit measured then (HEAPPROF_TOUCH_LIVE, off by default)
static const char *const exact_env[] = {"HEAPPROF_TOUCH_SAMPLE_BYTES=1048576",
                                        "HEAPPROF_TOUCH_LIVE=1", NULL};

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

    // a fresh mapping: the pages the 64 KiB write faulted in, whole (the first starts 16 bytes
    // into the block, the last holds 16 written bytes)
    s = e2e_site(r, "big_reserve");
    cr_expect_str_eq(method(s), "pattern on resident pages");
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

    // still live at exit: measured then (issue #23)
    s = e2e_site(r, "leaked");
    cr_expect_eq(e2e_int(s, "touch_measured_blocks"), 1, "a block live at exit is measured");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 300);
    cr_expect_str_eq(method(s), "pattern");

    json_t *t = json_object_get(json_object_get(r, "totals"), "touch");
    cr_expect(json_is_true(json_object_get(t, "measured")));
    cr_expect_eq(e2e_int(t, "fill_max"), 128 * 1024);
    cr_expect_eq(e2e_int(t, "live_blocks"), 1, "leaked's block, the one live at exit");
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
    cr_expect_str_eq(method(s), "pattern on resident pages");
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

// every line of blocks up to 1 GiB (HEAPPROF_TOUCH_SAMPLE_BYTES' most) measured
static const char *const every_line_env[] = {"HEAPPROF_TOUCH_SAMPLE_BYTES=1073741824",
                                             "HEAPPROF_TOUCH_LIVE=1", NULL};

// What a site's functions add up to: touch_origins' sites allocate in more than one place each
// (and realloc keeps the first block's site), so every site named fn counts.
typedef struct site_sum {
    long long touched, measured, blocks;
    bool by_pages; // some block measured by the pattern on resident pages
} site_sum_t;

static site_sum_t site_sum(json_t *report, const char *fn) {
    site_sum_t t = {0, 0, 0, false};
    json_t *s;
    size_t i;
    json_array_foreach(json_object_get(report, "sites"), i, s) {
        const char *f = json_string_value(json_object_get(s, "function"));
        if (!f || strcmp(f, fn) != 0)
            continue;
        t.touched += e2e_int(s, "touched_bytes");
        t.measured += e2e_int(s, "touch_measured_bytes");
        t.blocks += e2e_int(s, "touch_measured_blocks");
        t.by_pages |= strstr(method(s), "pattern on resident pages") != NULL;
    }
    return t;
}

typedef struct truth {
    char site[64];
    long long written, ranges, requested;
} truth_t;

// Runs touch_origins under the shim with env; its stdout, one line a site, into truths.
static size_t run_origins(const char *tag, const char *const *env, char **trace,
                          truth_t truths[16]) {
    char *prog = prog_path(E2E_PROGS, "touch_origins");
    char *dir = e2e_tmpdir(tag);
    *trace = malloc(4200);
    snprintf(*trace, 4200, "%s/t.hpt", dir);
    char *argv[] = {prog, NULL};
    e2e_run_opts_t o = {.out_template = *trace, .env = env, .timeout_s = 100};
    char *out = NULL, *err = NULL;
    int rc = e2e_run(argv, &o, &out, &err, NULL);
    // status 1: glibc did not serve a block from the origin its site is about (stderr says
    // which), so the figures would not be of the case this test is for
    cr_assert_eq(rc, 0, "touch_origins: status %d: %s", rc, err);
    size_t n = 0;
    for (char *line = strtok(out, "\n"); line && n < 16; line = strtok(NULL, "\n")) {
        truth_t *t = &truths[n];
        if (sscanf(line, "%63s %lld %lld %lld", t->site, &t->written, &t->ranges,
                   &t->requested) == 4)
            n++;
    }
    cr_assert_eq(n, 10, "touch_origins printed %zu sites:\n%s", n, out);
    free(out);
    free(err);
    free(dir);
    free(prog);
    return n;
}

// Every line measured: the figure is exact on pages the block was handed out on resident
// (recycled heap pages, which glibc's risen threshold makes large blocks use), and counts the
// pages the program faulted in whole, which touch_origins' writes cover to a page boundary.
// So per site, touched bytes are exactly what the program wrote, from 16 B to 64 MiB.
Test(touch, every_origin_counts_exactly_what_was_written, .timeout = 200) {
    truth_t truths[16];
    char *trace;
    size_t n = run_origins("touch_origins", every_line_env, &trace, truths);
    json_t *r = e2e_report(trace);
    for (size_t i = 0; i < n; i++) {
        site_sum_t s = site_sum(r, truths[i].site);
        cr_expect_eq(s.measured, truths[i].requested, "%s: measured %lld, requested %lld",
                     truths[i].site, s.measured, truths[i].requested);
        cr_expect_eq(s.touched, truths[i].written, "%s: touched %lld, written %lld",
                     truths[i].site, s.touched, truths[i].written);
        // every site past the first has blocks above touch_fill_max
        cr_expect(s.by_pages == (strcmp(truths[i].site, "small_blocks") != 0), "%s",
                  truths[i].site);
    }
    json_decref(r);
    free(trace);
}

// The default sampling (a 64-byte line a page at most, scaled), blocks live at exit measured too:
// within 64 x stride bytes, at most a page, of the exact figure per written range
// (docs/trace-format.md#touch).
Test(touch, every_origin_is_within_a_page_per_written_range_when_sampled, .timeout = 200) {
    truth_t truths[16];
    char *trace;
    size_t n = run_origins("touch_origins_sampled", live_env, &trace, truths);
    json_t *r = e2e_report(trace);
    for (size_t i = 0; i < n; i++) {
        site_sum_t s = site_sum(r, truths[i].site);
        long long bound = 4096 * truths[i].ranges, d = s.touched - truths[i].written;
        cr_expect_eq(s.measured, truths[i].requested, "%s", truths[i].site);
        cr_expect(d <= bound && -d <= bound, "%s: touched %lld, written %lld, bound %lld",
                  truths[i].site, s.touched, truths[i].written, bound);
    }
    json_decref(r);
    free(trace);
}

// Issue #23's Rust case: after 1 MiB vectors were grown, written and freed, glibc serves the
// 1 MiB with_capacity buffer from their pages. It holds 1 KiB and must be reported as that
// (exact) or at most a page more (sampled), and the vectors as written whole.
Test(touch, rust_reservation_after_large_frees_is_almost_untouched, .timeout = 120) {
    char *prog = prog_path(E2E_SAMPLES, "reserve_after_free");
    if (access(prog, X_OK))
        cr_skip_test("reserve_after_free was not built (no rustc?)");
    char expect[4200];
    snprintf(expect, sizeof expect, "%s/reserve_after_free.expect", E2E_SAMPLES);
    long long reserved = e2e_expect(expect, "reserved_bytes"),
              written = e2e_expect(expect, "written_bytes"), vecs = e2e_expect(expect, "vecs"),
              vec_bytes = e2e_expect(expect, "vec_bytes");
    cr_assert(reserved > 0 && written > 0 && vecs > 0 && vec_bytes > 0);
    for (int exact = 0; exact < 2; exact++) {
        char *trace = trace_of(prog, exact ? "touch_rust_exact" : "touch_rust_sampled",
                               exact ? every_line_env : live_env);
        json_t *r = e2e_report(trace);
        site_sum_t s = site_sum(r, "reserve_after_free::reserve_after_free");
        cr_expect_eq(s.measured, reserved);
        cr_expect(s.by_pages);
        if (exact)
            cr_expect_eq(s.touched, written, "%lld touched", s.touched);
        else
            cr_expect(s.touched >= written && s.touched <= written + 4096, "%lld touched",
                      s.touched);
        // the vectors: every byte written, but a byte that happens to equal the pattern (0xA5)
        // reads as untouched: 1 in 256 of pseudo-random bytes, so 99% is a safe floor
        site_sum_t v = site_sum(r, "reserve_after_free::grow_and_free");
        cr_expect_eq(v.measured, vecs * vec_bytes);
        cr_expect(v.touched * 100 >= v.measured * 99 && v.touched <= v.measured,
                  "vectors: %lld of %lld touched", v.touched, v.measured);
        json_decref(r);
        free(trace);
    }
    free(prog);
}

// HEAPPROF_TOUCH_LIVE=0 (the default): the blocks live at exit get no figure, the freed ones
// theirs as before.
Test(touch, live_off_leaves_blocks_live_at_exit_unmeasured, .timeout = 120) {
    char *prog = prog_path(E2E_PROGS, "touch");
    const char *env[] = {"HEAPPROF_TOUCH_LIVE=0", "HEAPPROF_TOUCH_SAMPLE_BYTES=1048576", NULL};
    char *trace = trace_of(prog, "touch_live_off", env);
    json_t *r = e2e_report(trace);
    json_t *s = e2e_site(r, "leaked");
    cr_expect_eq(e2e_int(s, "touch_measured_blocks"), 0);
    cr_expect(json_is_null(json_object_get(s, "touch_method")));
    s = e2e_site(r, "part_written");
    cr_expect_eq(e2e_int(s, "touched_bytes"), 10000);
    json_t *t = json_object_get(json_object_get(r, "totals"), "touch");
    cr_expect_eq(e2e_int(t, "live_blocks"), 0);
    json_decref(r);
    free(trace);
    free(prog);
}
