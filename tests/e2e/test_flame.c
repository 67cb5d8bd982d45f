// SPDX-License-Identifier: MIT
// `heapprof flame` and `heapprof diff` on real traces: the folded totals of every allocation
// metric are stats' totals (growth: the report's bytes copied); a Rust release binary's folded
// stacks hold its demangled functions;
// the SVG is well-formed XML (xmllint); a trace diffed with itself changes nothing, two different
// samples diff; the SVG's script works in headless Chromium (hover, zoom, search, reset); help
// and bad input give usage or one error line with exit status 2.
#include "spawn.h"

#include <criterion/criterion.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *trace_of(const char *name, const char *dir) {
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/%s", E2E_SAMPLES, name);
    char *trace = malloc(4200);
    snprintf(trace, 4200, "%s/%s.hpt", dir, name);
    char *argv[] = {prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0, "%s", prog);
    return trace;
}

static char *folded(const char *trace, const char *metric) {
    const char *args[] = {"flame", trace, "--metric", metric, "--folded", NULL};
    return e2e_heapprof_ok(args);
}

// Parses folded text exactly as flamegraph.pl and inferno do: the count is the last
// space-separated field; the stack before it has frames separated by ';'. Returns the sum of
// the counts, asserting every line has a non-empty stack and a whole-number count.
static long long folded_total(const char *text, int columns) {
    long long sum = 0;
    const char *p = text;
    while (*p) {
        const char *nl = strchr(p, '\n');
        cr_assert(nl, "unterminated line");
        char line[65536];
        size_t n = (size_t)(nl - p);
        cr_assert_lt(n, sizeof line);
        memcpy(line, p, n);
        line[n] = '\0';
        char *sp = strrchr(line, ' ');
        cr_assert(sp && sp > line, "no count: %s", line);
        char *end;
        long long v = strtoll(sp + 1, &end, 10);
        cr_assert(*end == '\0' && v >= 0, "bad count in: %s", line);
        if (columns == 2) {
            *sp = '\0';
            char *sp2 = strrchr(line, ' ');
            cr_assert(sp2 && sp2 > line, "no before count: %s", line);
            long long before = strtoll(sp2 + 1, &end, 10);
            cr_assert(*end == '\0');
            cr_expect_eq(before, v, "the same trace differs: %s", line);
        }
        cr_expect_neq(line[0], ';', "empty root frame: %s", line);
        sum += v;
        p = nl + 1;
    }
    return sum;
}

Test(flame, folded_totals_are_stats_totals, .timeout = 120) {
    char *dir = e2e_tmpdir("flame_totals");
    char *trace = trace_of("exact_counts", dir);
    json_t *s = e2e_stats(trace, NULL);
    static const struct {
        const char *metric, *key;
    } pairs[] = {
        {"bytes", "bytes"}, {"blocks", "blocks"}, {"peak", "peak_bytes"}, {"leaked", "end_bytes"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char *f = folded(trace, pairs[i].metric);
        cr_expect_eq(folded_total(f, 1), e2e_int(s, pairs[i].key), "%s", pairs[i].metric);
        free(f);
    }
    // sorted, no repeated stack
    char *f = folded(trace, "bytes");
    char *prev = NULL;
    for (char *line = strtok(f, "\n"); line; line = strtok(NULL, "\n")) {
        *strrchr(line, ' ') = '\0';
        if (prev)
            cr_expect_lt(strcmp(prev, line), 0, "%s / %s", prev, line);
        prev = line;
    }
    free(f);
    json_decref(s);
    free(trace);
    free(dir);
}

Test(flame, rust_frames_are_demangled_and_svg_is_well_formed, .timeout = 120) {
    char *dir = e2e_tmpdir("flame_rust");
    char *trace = trace_of("vec_growth", dir);
    char *f = folded(trace, "bytes");
    cr_expect(strstr(f, ";vec_growth::grow_u64_vecs;"), "%.3000s", f);
    free(f);
    // growth: the bytes copied per site, as the report's growth section sums them
    f = folded(trace, "growth");
    cr_expect(strstr(f, ";vec_growth::grow_u64_vecs;"), "%.3000s", f);
    const char *rargs[] = {"report", "--json", trace, NULL};
    char *rj = e2e_heapprof_ok(rargs);
    json_error_t je;
    json_t *r = json_loads(rj, 0, &je);
    cr_assert(r, "report --json: %s", je.text);
    long long copied = 0;
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(r, "growth"), i, g) copied += e2e_int(g, "bytes_copied");
    cr_expect_gt(copied, 0);
    cr_expect_eq(folded_total(f, 1), copied);
    json_decref(r);
    free(rj);
    free(f);
    char svg[4300], cmd[8800];
    snprintf(svg, sizeof svg, "%s/vec_growth.svg", dir);
    const char *args[] = {"flame", trace, "-o", svg, NULL};
    free(e2e_heapprof_ok(args));
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", svg);
    cr_expect_eq(system(cmd), 0, "xmllint rejects %s", svg);
    FILE *in = fopen(svg, "r");
    cr_assert(in);
    static char text[1 << 22];
    size_t n = fread(text, 1, sizeof text - 1, in);
    text[n] = '\0';
    fclose(in);
    cr_expect(strstr(text, "vec_growth::grow_u64_vecs"));
    cr_expect(strstr(text, "Bytes allocated by "));
    free(trace);
    free(dir);
}

Test(flame, diff_of_a_trace_with_itself_is_zero_and_two_samples_diff, .timeout = 120) {
    char *dir = e2e_tmpdir("flame_diff");
    char *t1 = trace_of("exact_counts", dir), *t2 = trace_of("vec_growth", dir);
    const char *same[] = {"diff", t1, t1, "--folded", NULL};
    char *f = e2e_heapprof_ok(same);
    cr_expect_gt(folded_total(f, 2), 0);
    free(f);
    const char *same_table[] = {"diff", t1, t1, "--metric", "blocks", NULL};
    char *t = e2e_heapprof_ok(same_table);
    cr_expect(strstr(t, "no site changed"), "%s", t);
    free(t);

    char svg[4300], cmd[8800];
    snprintf(svg, sizeof svg, "%s/diff.svg", dir);
    const char *two[] = {"diff", t1, t2, "-o", svg, NULL};
    t = e2e_heapprof_ok(two);
    cr_expect(strstr(t, "Sites that changed most"), "%s", t);
    cr_expect(strstr(t, "vec_growth::grow_u64_vecs"), "%s", t);
    cr_expect(strstr(t, "new"), "%s", t);
    free(t);
    snprintf(cmd, sizeof cmd, "xmllint --noout '%s'", svg);
    cr_expect_eq(system(cmd), 0, "xmllint rejects %s", svg);
    free(t1);
    free(t2);
    free(dir);
}

static void expect_one_error_line(const char *const args[], const char *needle) {
    char *out = NULL, *err = NULL;
    int st = e2e_heapprof(args, &out, &err);
    cr_expect_eq(st, 2, "heapprof %s ...: status %d", args[0], st);
    cr_expect(strncmp(err, "heapprof: ", 10) == 0, "stderr: %s", err);
    const char *nl = strchr(err, '\n');
    cr_expect(nl && nl[1] == '\0', "not one line: %s", err);
    if (needle)
        cr_expect(strstr(err, needle), "stderr: %s", err);
    cr_expect_str_eq(out, "");
    free(out);
    free(err);
}

Test(flame, help_and_bad_input, .timeout = 120) {
    const char *help[] = {"flame", "--help", NULL};
    char *out = e2e_heapprof_ok(help);
    cr_expect(strstr(out, "usage: heapprof flame"));
    free(out);
    const char *dhelp[] = {"diff", "--help", NULL};
    out = e2e_heapprof_ok(dhelp);
    cr_expect(strstr(out, "usage: heapprof diff"));
    free(out);

    char *dir = e2e_tmpdir("flame_bad");
    char *trace = trace_of("exact_counts", dir);
    char junk[4300];
    snprintf(junk, sizeof junk, "%s/junk.hpt", dir);
    FILE *j = fopen(junk, "w");
    fputs("not a trace\n", j);
    fclose(j);
    // a trace recorded without CPU samples (a short run with them may have none, or a few)
    char unsampled[4300];
    snprintf(unsampled, sizeof unsampled, "%s/unsampled.hpt", dir);
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/exact_counts", E2E_SAMPLES);
    char *argv[] = {prog, NULL};
    static const char *const cpu_off[] = {"HEAPPROF_CPU=0", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, unsampled, cpu_off, NULL), 0);
    const char *cpu[] = {"flame", unsampled, "--metric", "cpu", NULL};
    expect_one_error_line(cpu, "this trace has no CPU samples (cpu: off: HEAPPROF_CPU=0)");
    const char *metric[] = {"flame", trace, "--metric", "bogus", NULL};
    expect_one_error_line(metric, "bogus");
    const char *none[] = {"flame", NULL};
    expect_one_error_line(none, "missing TRACE");
    const char *opt[] = {"flame", trace, "--frobnicate", NULL};
    expect_one_error_line(opt, "--frobnicate");
    const char *missing[] = {"flame", "/nonexistent/t.hpt", NULL};
    expect_one_error_line(missing, NULL);
    const char *bad[] = {"flame", junk, "--folded", NULL};
    expect_one_error_line(bad, NULL);
    const char *one[] = {"diff", trace, NULL};
    expect_one_error_line(one, "BEFORE and AFTER");
    const char *dbad[] = {"diff", trace, junk, NULL};
    expect_one_error_line(dbad, NULL);
    free(trace);
    free(dir);
}

static bool have_chromium(const char **path) {
    const char *env = getenv("CHROMIUM");
    static const char *const paths[] = {"/usr/bin/chromium", "/usr/bin/chromium-browser"};
    if (env && *env) {
        *path = env;
        return access(env, X_OK) == 0;
    }
    for (size_t i = 0; i < 2; i++)
        if (access(paths[i], X_OK) == 0) {
            *path = paths[i];
            return true;
        }
    return false;
}

// An HTML page that loads the SVG, drives it as a user would and prints what it saw.
static const char harness[] =
    "<!DOCTYPE html><html><body><pre id='out'>pending</pre>\n"
    "<object id='o' data='flame.svg' type='image/svg+xml' width='1200' height='300'></object>\n"
    "<script>\n"
    "document.getElementById('o').addEventListener('load', function () {\n"
    "  var d = this.contentDocument, res = [], out = document.getElementById('out');\n"
    "  try {\n"
    "    var gs = d.getElementsByClassName('f'), main = null, hidden = 0;\n"
    "    for (var g of gs)\n"
    "      if (g.getElementsByTagName('title')[0].textContent.startsWith('main\\n')) main = g;\n"
    "    main.dispatchEvent(new MouseEvent('mouseover', {bubbles: true}));\n"
    "    res.push('status=' + d.getElementById('status').textContent);\n"
    "    main.dispatchEvent(new MouseEvent('click', {bubbles: true}));\n"
    "    for (var g of gs) if (g.classList.contains('hide')) hidden++;\n"
    "    res.push('zoomed_hidden=' + hidden);\n"
    "    res.push('zoomed_width=' + main.getElementsByTagName('rect')[0].getAttribute('width'));\n"
    "    res.push('reset_shown=' + !d.getElementById('reset').classList.contains('hide'));\n"
    "    var s = d.getElementById('search');\n"
    "    s.value = 'phase_peak'; s.dispatchEvent(new Event('input'));\n"
    "    setTimeout(function () {\n"
    "      res.push('matched=' + d.getElementById('matched').textContent);\n"
    "      d.getElementById('reset').dispatchEvent(new MouseEvent('click', {bubbles: true}));\n"
    "      hidden = 0;\n"
    "      for (var g of gs) if (g.classList.contains('hide')) hidden++;\n"
    "      res.push('reset_hidden=' + hidden);\n"
    "      out.textContent = 'RESULT\\n' + res.join('\\n') + '\\nEND';\n"
    "    }, 500);\n"
    "  } catch (e) { out.textContent = 'RESULT\\nerror=' + e + '\\nEND'; }\n"
    "});\n"
    "</script></body></html>\n";

Test(flame, svg_script_hovers_zooms_searches_and_resets, .timeout = 300) {
    const char *chromium = NULL;
    if (!have_chromium(&chromium))
        cr_skip_test("Chromium is not installed (apt-get install chromium; scripts/deps.sh does "
                     "it): the SVG's script cannot be exercised");
    char *dir = e2e_tmpdir("flame_js");
    char *trace = trace_of("exact_counts", dir);
    char svg[4300], html[4300], cmd[16384];
    snprintf(svg, sizeof svg, "%s/flame.svg", dir);
    snprintf(html, sizeof html, "%s/harness.html", dir);
    const char *args[] = {"flame", trace, "-o", svg, NULL};
    free(e2e_heapprof_ok(args));
    FILE *h = fopen(html, "w");
    cr_assert(h);
    fputs(harness, h);
    fclose(h);
    snprintf(cmd, sizeof cmd,
             "timeout 240 %s --headless=new --no-sandbox --disable-gpu --no-first-run "
             "--disable-background-networking --disable-component-update --disable-sync "
             "--disable-quic --user-data-dir=%s/chromium --allow-file-access-from-files "
             "--virtual-time-budget=5000 --dump-dom file://%s 2>/dev/null",
             chromium, dir, html);
    FILE *p = popen(cmd, "r");
    cr_assert(p);
    static char dom[1 << 16];
    size_t n = fread(dom, 1, sizeof dom - 1, p);
    dom[n] = '\0';
    pclose(p);
    char *r = strstr(dom, "RESULT");
    cr_assert(r, "the harness printed nothing:\n%.4000s", dom);
    char *end = strstr(r, "END");
    cr_assert(end);
    *end = '\0';
    cr_expect(strstr(r, "status=main  \xe2\x80\x94  "), "%s", r); // name, then value and share
    cr_expect(strstr(r, "%\n"), "%s", r);
    cr_expect_null(strstr(r, "zoomed_hidden=0\n"), "zooming hid nothing: %s", r);
    cr_expect(strstr(r, "zoomed_width=1180.00\n"), "%s", r);
    cr_expect(strstr(r, "reset_shown=true\n"), "%s", r);
    cr_expect(strstr(r, "matched=Matched: ") && !strstr(r, "matched=Matched: 0.00%"), "%s", r);
    cr_expect(strstr(r, "reset_hidden=0\n"), "%s", r);
    cr_expect_null(strstr(r, "error="), "%s", r);
    free(trace);
    free(dir);
}

// The check a user runs after taking the report's advice: vec_growth --presized builds its
// Vec<u64>s with Vec::with_capacity(n), and the diff shows grow_u64_vecs' growth gone.
Test(flame, diff_after_a_with_capacity_fix_shows_the_growth_site_shrinking, .timeout = 120) {
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/vec_growth", E2E_SAMPLES);
    if (access(prog, X_OK))
        cr_skip_test("vec_growth was not built (no rustc?)");
    char *dir = e2e_tmpdir("flame_fix");
    char before[4200], after[4200], svg[4200];
    snprintf(before, sizeof before, "%s/before.hpt", dir);
    snprintf(after, sizeof after, "%s/after.hpt", dir);
    snprintf(svg, sizeof svg, "%s/fix.svg", dir);
    char *argv_before[] = {prog, NULL}, *argv_after[] = {prog, "--presized", NULL};
    cr_assert_eq(e2e_run_preloaded(argv_before, before, NULL, NULL), 0);
    cr_assert_eq(e2e_run_preloaded(argv_after, after, NULL, NULL), 0);
    const char *args[] = {"diff", before, after, "--metric", "growth", "-o", svg, NULL};
    char *out = e2e_heapprof_ok(args);
    // the row of the fixed site: "before after delta %  site", its growth all gone
    const char *row = strstr(out, "vec_growth::grow_u64_vecs  samples/rust/vec_growth.rs:37");
    cr_assert(row, "the fixed site is not in the table:\n%s", out);
    const char *line = row;
    while (line > out && line[-1] != '\n')
        line--;
    cr_expect(strstr(line, "-100.0%") && strstr(line, "-100.0%") < row,
              "grow_u64_vecs did not shrink to nothing: %.*s", (int)(strchr(row, '\n') - line),
              line);
    // and the differential flamegraph was written
    struct stat st;
    cr_expect(stat(svg, &st) == 0 && st.st_size > 1000, "no differential SVG");
    free(out);
    free(dir);
}
