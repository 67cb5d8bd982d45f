// SPDX-License-Identifier: MIT
// flame: folding a synthetic trace whose every figure is known (per metric, merged lines of two
// stacks that print alike, sorted output, --trim), frame names made safe (';', newlines, bad
// UTF-8), the diff's two columns, and the SVG: well-formed XML (xmllint), a hostile module name
// ("<script>...&...") escaped, frames narrower than a pixel pruned and counted in the title.
#include "analyze/analyze.h"
#include "analyze/flame.h"
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

#define HOSTILE "/nonexistent/<script>alert('&')<;>.so"

// One thread; s1 and s4 symbolize alike (same frames under two ids), s2 has a libc frame under
// the user's, s3's inner frame is in a module with a hostile name.
//   t10 s1 +100  t15 s1 +50  t20 s2 +30  t25 s4 +20 (peak: 200)  t30 free 100  t35 free 20
//   t40 s3 +7    end: 87 live (s1 50, s2 30, s3 7); s4's block was temporary
static void write_trace(void) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/nonexistent/app", "--x=<&>"};
    tb_rec_process(tb, "/nonexistent/app", 2, argv);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/nonexistent/app", NULL, 0);
    tb_rec_module_load(tb, 0, 0x7f0000000000ull, 0x10000, "/nonexistent/libc.so.6", NULL, 0);
    tb_rec_module_load(tb, 0, 0x500000, 0x10000, HOSTILE, NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 0, 0);
    uint64_t s1[] = {0x401000, 0x402000}, s2[] = {0x7f0000000100ull, 0x401100, 0x402000},
             s3[] = {0x500010, 0x402000};
    tb_rec_stack(tb, 1, 2, s1);
    tb_rec_stack(tb, 2, 3, s2);
    tb_rec_stack(tb, 3, 2, s3);
    tb_rec_stack(tb, 4, 2, s1);
    tb_rec_malloc(tb, 10, 1, 0x1000, 100);
    tb_rec_malloc(tb, 15, 1, 0x1100, 50);
    tb_rec_malloc(tb, 20, 2, 0x2000, 30);
    tb_rec_malloc(tb, 25, 4, 0x3000, 20);
    tb_rec_free(tb, 30, 0x1000);
    tb_rec_free(tb, 35, 0x3000);
    tb_rec_malloc(tb, 40, 3, 0x4000, 7);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);
}

// The folded text of the synthetic trace by metric m.
static char *folded(flame_metric_t m, bool trim, flame_t **keep) {
    errmsg_t err;
    errmsg_init(&err);
    analyze_t *a = analyze_open(path, 0, NULL, &err);
    cr_assert_not_null(a, "%s", err.msg);
    flame_t *f = flame_new(a, m, trim);
    analyze_close(a);
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    cr_assert_eq(out_folded_write(f, out, &err), 0);
    fclose(out);
    if (keep)
        *keep = f;
    else
        flame_free(f);
    return text;
}

#define HOSTILE_FRAME "<script>alert('&')<,>.so+0x10"

static void expect_folded(flame_metric_t m, bool trim, const char *want) {
    char *got = folded(m, trim, NULL);
    cr_expect_str_eq(got, want, "metric %s%s", flame_metric_name(m), trim ? " --trim" : "");
    free(got);
}

Test(flame, folded_values_per_metric_merged_and_sorted, .fini = cleanup) {
    write_trace();
    // sorted by text ('<' before 'a'); s1 and s4 are one line
    expect_folded(FLAME_BYTES, false,
                  "app+0x2000;" HOSTILE_FRAME " 7\n"
                  "app+0x2000;app+0x1000 170\n"
                  "app+0x2000;app+0x1100;libc.so.6+0x100 30\n");
    expect_folded(FLAME_BLOCKS, false,
                  "app+0x2000;" HOSTILE_FRAME " 1\n"
                  "app+0x2000;app+0x1000 3\n"
                  "app+0x2000;app+0x1100;libc.so.6+0x100 1\n");
    expect_folded(FLAME_PEAK, false,
                  "app+0x2000;app+0x1000 170\n"
                  "app+0x2000;app+0x1100;libc.so.6+0x100 30\n");
    expect_folded(FLAME_LEAKED, false,
                  "app+0x2000;" HOSTILE_FRAME " 7\n"
                  "app+0x2000;app+0x1000 50\n"
                  "app+0x2000;app+0x1100;libc.so.6+0x100 30\n");
    expect_folded(FLAME_TEMPORARY, false, "app+0x2000;app+0x1000 20\n");
    // --trim: the libc frame under the site's naming frame goes
    expect_folded(FLAME_BYTES, true,
                  "app+0x2000;" HOSTILE_FRAME " 7\n"
                  "app+0x2000;app+0x1000 170\n"
                  "app+0x2000;app+0x1100 30\n");
}

Test(flame, frame_names_are_made_safe) {
    char buf[64];
    cr_expect_str_eq(flame_frame_text("<impl Default for [T; 3]>::default", buf, sizeof buf),
                     "<impl Default for [T, 3]>::default");
    cr_expect_str_eq(flame_frame_text("a\nb\tc\rd", buf, sizeof buf), "a\\x0ab\\x09c\\x0dd");
    cr_expect_str_eq(flame_frame_text("bad\xff\xfe utf8", buf, sizeof buf), "bad\\xff\\xfe utf8");
    cr_expect_str_eq(flame_frame_text("caf\xc3\xa9", buf, sizeof buf), "caf\xc3\xa9");
    cr_expect_str_eq(flame_frame_text("", buf, sizeof buf), "[unnamed]");
    cr_expect_str_eq(flame_frame_text(NULL, buf, sizeof buf), "[unnamed]");
    // cut at the buffer, never inside a character
    char small[5];
    cr_expect_str_eq(flame_frame_text("ab\xc3\xa9\xc3\xa9", small, sizeof small), "ab\xc3\xa9");
}

// A trace with no blocks (a program that allocated nothing, or all of it lost to damage) folds
// to nothing for every metric: its empty list of lines was handed to qsort as NULL, which
// UBSan (this test's ASan/UBSan build) reports (bench/par_fuzz.py's first find, session 21).
Test(flame, a_trace_without_blocks_folds_to_nothing, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    const char *argv[] = {"/nonexistent/app"};
    tb_rec_process(tb, "/nonexistent/app", 1, argv);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);
    for (flame_metric_t m = FLAME_BYTES; m <= FLAME_CPU; m++)
        for (int trim = 0; trim < 2; trim++) {
            char *got = folded(m, trim, NULL);
            cr_expect_str_eq(got, "", "metric %s", flame_metric_name(m));
            free(got);
        }
}

Test(flame, metric_names) {
    flame_metric_t m;
    errmsg_t err;
    errmsg_init(&err);
    static const char *const names[] = {"bytes",     "blocks", "peak", "leaked",
                                        "temporary", "growth", "cpu"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        cr_expect_eq(flame_metric_parse(names[i], &m, &err), 0);
        cr_expect_str_eq(flame_metric_name(m), names[i]);
    }
    cr_expect_eq(flame_metric_parse("bogus", &m, &err), -1);
    cr_expect(strstr(err.msg, "bogus"));
}

Test(flame, frame_kinds) {
    cr_expect_eq(flame_classify("main", "/src/a.c", "/usr/bin/a"), FLAME_KIND_USER);
    cr_expect_eq(flame_classify("malloc", NULL, "/lib/libc.so.6"), FLAME_KIND_ALLOCATOR);
    cr_expect_eq(flame_classify("__libc_start_main_impl", NULL, "/lib/libc.so.6"), FLAME_KIND_LIBC);
    cr_expect_eq(flame_classify("alloc::vec::Vec<T,A>::push", NULL, NULL), FLAME_KIND_RUST_STD);
    cr_expect_eq(flame_classify("std::rt::lang_start_internal", NULL, NULL), FLAME_KIND_RUST_STD);
    cr_expect_eq(flame_classify("<&dyn core::ops::function::Fn<(), Output = i32> as "
                                "core::ops::function::FnOnce<()>>::call_once",
                                NULL, NULL),
                 FLAME_KIND_RUST_STD);
    cr_expect_eq(
        flame_classify("std::vector<int, std::allocator<int> >::push_back(int&&)", NULL, NULL),
        FLAME_KIND_CXX_STD);
}

static char *svg_of(const flame_t *f) {
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    errmsg_t err;
    errmsg_init(&err);
    out_svg_opts_t o = {.width_px = 1200, .min_width_px = 1.2};
    cr_assert_eq(out_svg_write(f, &o, out, &err), 0);
    fclose(out);
    return text;
}

static void expect_well_formed(const char *svg) {
    char tmp[] = "/tmp/hp_flame_XXXXXX";
    int fd = mkstemp(tmp);
    cr_assert_geq(fd, 0);
    size_t n = strlen(svg);
    cr_assert_eq(write(fd, svg, n), (ssize_t)n);
    close(fd);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "xmllint --noout %s", tmp);
    cr_expect_eq(system(cmd), 0, "xmllint rejects the SVG (is libxml2-utils installed?)");
    unlink(tmp);
}

Test(flame, svg_escapes_hostile_names_and_is_well_formed, .fini = cleanup) {
    write_trace();
    flame_t *f = NULL;
    free(folded(FLAME_BYTES, false, &f));
    char *svg = svg_of(f);
    expect_well_formed(svg);
    cr_expect_null(strstr(svg, "<script>alert"), "raw hostile name in the SVG");
    cr_expect(strstr(svg, "&lt;script&gt;alert(&#39;&amp;&#39;)&lt;,&gt;.so+0x10"));
    cr_expect(strstr(svg, "/nonexistent/app --x=&lt;&amp;&gt;"), "program in the title");
    cr_expect(strstr(svg, "Bytes allocated"));
    cr_expect(strstr(svg, "total 207 bytes in 3 stacks"));
    // the only <script> element is ours
    char *s = strstr(svg, "<script");
    cr_expect(s && !strstr(s + 1, "<script"));
    free(svg);
    flame_free(f);
}

static void add_line(flame_t *f, size_t *cap, const char *stack, uint64_t v0, uint64_t v1) {
    f->lines = realloc(f->lines, (*cap = f->n + 1) * sizeof *f->lines);
    flame_line_t *l = &f->lines[f->n++];
    l->stack = strdup(stack);
    l->n_frames = 1;
    for (const char *p = stack; *p; p++)
        l->n_frames += *p == ';';
    l->kinds = calloc(l->n_frames, 1);
    l->value[0] = v0;
    l->value[1] = v1;
    f->total[0] += v0;
    f->total[1] += v1;
}

Test(flame, svg_prunes_frames_narrower_than_a_pixel) {
    flame_t *f = calloc(1, sizeof *f);
    f->title_program = strdup("app");
    size_t cap = 0;
    add_line(f, &cap, "main;big", 1000000, 0);
    char stack[64];
    for (int i = 0; i < 500; i++) { // each 1e-5 of the total: far below a pixel
        snprintf(stack, sizeof stack, "main;small%03d;leaf", i);
        add_line(f, &cap, stack, 10, 0);
    }
    char *svg = svg_of(f);
    expect_well_formed(svg);
    cr_expect(strstr(svg, "1,000 frames narrower than 1.2 px not drawn"), "%.2000s", svg);
    cr_expect_null(strstr(svg, "small000"));
    cr_expect(strstr(svg, ">big<") || strstr(svg, "<title>big\n"));
    free(svg);
    flame_free(f);
}

Test(flame, diff_has_two_columns_and_all_stacks) {
    flame_t *b = calloc(1, sizeof *b), *a = calloc(1, sizeof *a);
    b->title_program = strdup("app");
    a->title_program = strdup("app");
    size_t cb = 0, ca = 0;
    add_line(b, &cb, "main;gone", 5, 0);
    add_line(b, &cb, "main;same", 7, 0);
    add_line(b, &cb, "main;shrank", 10, 0);
    add_line(a, &ca, "main;grew", 3, 0);
    add_line(a, &ca, "main;same", 7, 0);
    add_line(a, &ca, "main;shrank", 4, 0);
    flame_t *d = flame_diff(b, a);
    char *text = NULL;
    size_t n = 0;
    FILE *out = open_memstream(&text, &n);
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(out_folded_write(d, out, &err), 0);
    fclose(out);
    cr_expect_str_eq(text, "main;gone 5 0\n"
                           "main;grew 0 3\n"
                           "main;same 7 7\n"
                           "main;shrank 10 4\n");
    cr_expect_eq(d->total[0], 22);
    cr_expect_eq(d->total[1], 14);
    char *svg = svg_of(d);
    expect_well_formed(svg);
    cr_expect(strstr(svg, "Differential flamegraph"));
    cr_expect(strstr(svg, "delta -6"), "shrank's delta in its tooltip");
    free(svg);
    free(text);
    flame_free(d);
    flame_free(a);
    flame_free(b);
}

// growth: a block grown twice by moving reallocs copies 16 + 32 bytes, charged to its site
Test(flame, growth_metric_is_bytes_copied, .fini = cleanup) {
    tb_t *tb = tb_new();
    tb_begin(tb, HPT_CHUNK_META, 0, 0, 0);
    tb_rec_module_load(tb, 0, 0x400000, 0x10000, "/nonexistent/app", NULL, 0);
    tb_end(tb, false);
    tb_begin(tb, HPT_CHUNK_EVENTS, 100, 0, 0);
    uint64_t s1[] = {0x401000, 0x402000}, s2[] = {0x401100, 0x402000};
    tb_rec_stack(tb, 1, 2, s1);
    tb_rec_stack(tb, 2, 2, s2);
    tb_rec_malloc(tb, 10, 1, 0x1000, 16);
    tb_rec_realloc(tb, 20, 21, 1, 0x1000, 0x2000, 32);
    tb_rec_realloc(tb, 30, 31, 1, 0x2000, 0x3000, 64);
    tb_rec_malloc(tb, 40, 2, 0x9000, 100); // no growth here
    tb_rec_free(tb, 50, 0x3000);
    tb_end(tb, false);
    cr_assert_eq(tb_write_tmp(tb, path), 0);
    tb_free(tb);
    errmsg_t err;
    errmsg_init(&err);
    analyze_opts_t o = {.growth = true, .short_ns = GROWTH_DEFAULT_SHORT_NS};
    analyze_t *a = analyze_open_opts(path, &o, NULL, &err);
    cr_assert_not_null(a, "%s", err.msg);
    flame_t *f = flame_new(a, FLAME_GROWTH, false);
    analyze_close(a);
    cr_assert_eq(f->n, 1);
    cr_expect_str_eq(f->lines[0].stack, "app+0x2000;app+0x1000");
    cr_expect_eq(f->lines[0].value[0], 48);
    flame_free(f);
}
