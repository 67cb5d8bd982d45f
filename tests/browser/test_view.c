// SPDX-License-Identifier: MIT
// `heapprof view` without a browser: bad input gives one line and status 2, never a crash or a
// half-written page; the page is one file with every placeholder filled, its data agrees with
// `heapprof stats`, and names from the trace cannot close the data's <script> element.
#include "../e2e/spawn.h" // not on the include path: it would hide <spawn.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static bool one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == 0 && strncmp(s, "heapprof: ", 10) == 0;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    cr_assert(f, "cannot open %s", path);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    cr_assert_eq(fread(s, 1, (size_t)n, f), (size_t)n);
    s[n] = 0;
    fclose(f);
    return s;
}

// Records prog under the shim into dir/name.hpt; returns the trace path (malloc'd).
static char *record(const char *dir, const char *name, const char *prog) {
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/%s.hpt", dir, name);
    char *argv[] = {(char *)prog, NULL};
    const char *env[] = {"HEAPPROF_QUIET=1", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0, "%s failed", prog);
    return strdup(trace);
}

// The JSON inside the page's data element.
static json_t *page_data(const char *html) {
    const char *open = "<script type=\"application/json\" id=\"heapprof-data\">";
    const char *a = strstr(html, open);
    cr_assert(a, "no data element");
    a += strlen(open);
    const char *b = strstr(a, "</script>");
    cr_assert(b);
    json_error_t e;
    json_t *j = json_loadb(a, (size_t)(b - a), 0, &e);
    cr_assert(j, "data is not JSON: %s at %d", e.text, e.position);
    return j;
}

Test(view, bad_input_is_one_line_and_status_2) {
    char *dir = e2e_tmpdir("view_bad");
    char garbage[4096], out[4096];
    snprintf(garbage, sizeof garbage, "%s/garbage.hpt", dir);
    FILE *f = fopen(garbage, "w");
    fputs("this is not a trace\n", f);
    fclose(f);
    snprintf(out, sizeof out, "%s/out.html", dir);
    const char *cases[][5] = {
        {"view", NULL},
        {"view", "/nonexistent/trace.hpt", "-o", out, NULL},
        {"view", garbage, "-o", out, NULL},
        {"view", dir, "-o", out, NULL}, // a directory
        {"view", "--bogus", garbage, NULL},
        {"view", garbage, "-o", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *err;
        cr_expect_eq(e2e_heapprof(cases[i], NULL, &err), 2, "case %zu", i);
        cr_expect(one_line(err), "case %zu: stderr was: %s", i, err);
        free(err);
    }
    cr_expect(access(out, F_OK) != 0, "a failed run left %s", out);
    free(dir);
}

Test(view, unwritable_output_is_one_line_and_status_2) {
    char *dir = e2e_tmpdir("view_unwritable");
    char *trace = record(dir, "t", E2E_SAMPLES "/exact_counts");
    const char *paths[] = {"/nonexistent/dir/x.html", "/proc/version", dir};
    for (size_t i = 0; i < 3; i++) {
        const char *args[] = {"view", trace, "-o", paths[i], NULL};
        char *err;
        cr_expect_eq(e2e_heapprof(args, NULL, &err), 2, "-o %s", paths[i]);
        cr_expect(one_line(err), "-o %s: stderr was: %s", paths[i], err);
        free(err);
    }
    free(trace);
    free(dir);
}

// The page is written to a temporary file renamed over FILE, and only over a regular file: a
// symlink at FILE is refused (one line, status 2) and the page never reaches its target.
Test(view, output_at_a_symlink_is_refused) {
    char *dir = e2e_tmpdir("view_link");
    char *trace = record(dir, "t", E2E_SAMPLES "/exact_counts");
    char target[4096], link[4096];
    snprintf(target, sizeof target, "%s/target.html", dir);
    snprintf(link, sizeof link, "%s/link.html", dir);
    cr_assert_eq(symlink("target.html", link), 0);
    const char *args[] = {"view", trace, "-o", link, NULL};
    char *err;
    cr_expect_eq(e2e_heapprof(args, NULL, &err), 2);
    cr_expect(one_line(err), "stderr was: %s", err);
    free(err);
    struct stat st;
    cr_assert_eq(lstat(link, &st), 0);
    cr_expect(S_ISLNK(st.st_mode), "the symlink was replaced");
    cr_expect_neq(lstat(target, &st), 0, "the page reached the link's target");
    free(trace);
    free(dir);
}

Test(view, page_is_self_contained_and_agrees_with_stats) {
    char *dir = e2e_tmpdir("view_page");
    char *trace = record(dir, "ec", E2E_SAMPLES "/exact_counts");
    const char *args[] = {"view", trace, NULL}; // default name: ec.html beside the trace
    char *err;
    cr_assert_eq(e2e_heapprof(args, NULL, &err), 0, "%s", err);
    cr_expect(strstr(err, "ec.html"), "stderr was: %s", err);
    free(err);
    char html_path[4096];
    snprintf(html_path, sizeof html_path, "%s/ec.html", dir);
    char *html = slurp(html_path);
    cr_expect(!strstr(html, "/*HEAPPROF_"), "a placeholder is left");
    cr_expect(!strstr(html, "http://") && !strstr(html, "https://") && !strstr(html, " src="),
              "the page refers to something outside itself");
    json_t *d = page_data(html);
    json_t *st = e2e_stats(trace, NULL);
    json_t *t = json_object_get(d, "totals");
    const char *keys[][2] = {{"blocks", "blocks"},
                             {"bytes", "bytes"},
                             {"frees", "frees"},
                             {"peak_bytes", "peak_bytes"},
                             {"peak_blocks", "peak_blocks"},
                             {"end_bytes", "end_bytes"},
                             {"threads", "threads"},
                             {"events", "events"}};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_expect_eq(e2e_int(t, keys[i][0]), e2e_int(st, keys[i][1]), "%s", keys[i][0]);
    // the site columns add up to the totals, and the timeline reaches the exact peak
    json_t *sites = json_object_get(d, "sites");
    long long sum = 0, peak = 0, max_point = 0;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(sites, "bytes"), i, v) sum += json_integer_value(v);
    json_array_foreach(json_object_get(sites, "peak"), i, v) peak += json_integer_value(v);
    cr_expect_eq(sum, e2e_int(st, "bytes"));
    cr_expect_eq(peak, e2e_int(st, "peak_bytes"));
    json_t *tl = json_object_get(d, "timeline");
    json_array_foreach(json_object_get(tl, "max"), i, v) if (json_integer_value(v) > max_point)
        max_point = json_integer_value(v);
    cr_expect_eq(max_point, e2e_int(st, "peak_bytes"), "the curve misses the peak");
    cr_expect(json_array_size(json_object_get(tl, "t")) <= 4096);
    cr_expect(json_array_size(json_object_get(tl, "snaps")) <= 256);
    // reserved but untouched: the report's figures, or null when the trace has no measure
    const char *rargs[] = {"report", "--json", trace, NULL};
    char *rout;
    cr_assert_eq(e2e_heapprof(rargs, &rout, NULL), 0);
    json_t *rep = json_loads(rout, 0, NULL);
    cr_assert(rep);
    json_t *touch = json_object_get(json_object_get(rep, "totals"), "touch");
    json_t *u = json_object_get(d, "untouched");
    if (touch && json_is_true(json_object_get(touch, "measured"))) {
        cr_expect_eq(e2e_int(u, "bytes"), e2e_int(touch, "bytes"));
        cr_expect_eq(e2e_int(u, "touched"), e2e_int(touch, "touched_bytes"));
        cr_expect(json_array_size(json_object_get(u, "sites")) > 0);
    } else {
        cr_expect(json_is_null(u));
    }
    // CPU samples: the count `heapprof stats` gives
    json_t *cpu = json_object_get(d, "cpu");
    json_t *scpu = json_object_get(st, "cpu");
    if (scpu)
        cr_expect_eq(e2e_int(cpu, "samples"), e2e_int(scpu, "samples"));
    json_decref(rep);
    free(rout);
    json_decref(st);
    json_decref(d);
    free(html);
    free(trace);
    free(dir);
}

Test(view, names_from_the_trace_cannot_leave_the_data_element) {
    char *dir = e2e_tmpdir("view_hostile");
    char *trace = record(dir, "h", E2E_PROGS "/hostile_names");
    const char *args[] = {"view", trace, "-o", "-", NULL};
    char *html;
    cr_assert_eq(e2e_heapprof(args, &html, NULL), 0);
    cr_expect(!strstr(html, "<img src=x"), "a raw <img> from the trace is in the page");
    cr_expect(!strstr(html, "</script><script>window"), "the data can close its element");
    // the names did reach the data, escaped: the test would prove nothing otherwise
    cr_expect(strstr(html, "\\u003cimg src=x onerror=window.__pwned=1\\u003e"), "no <img> name");
    cr_expect(strstr(html, "\\u003c/script\\u003e\\u003cscript\\u003ewindow.__pwned=2"),
              "no </script> name");
    json_t *d = page_data(html);
    bool found = false;
    size_t i;
    json_t *v;
    json_array_foreach(json_object_get(d, "strings"), i, v) found |=
        strcmp(json_string_value(v), "<img src=x onerror=window.__pwned=1>") == 0;
    cr_expect(found, "the JSON does not decode to the original name");
    json_decref(d);
    free(html);
    free(trace);
    free(dir);
}
