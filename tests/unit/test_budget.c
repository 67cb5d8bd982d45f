// SPDX-License-Identifier: MIT
// budget: how budgets are spelled (sizes, counts, percentages, 'PATTERN:METRIC<=VALUE') and how
// they are judged against a summary: at the limit holds, one over breaks, the culprits named.
#include "analyze/budget.h"
#include "analyze/budget_file.h"
#include "analyze/summary.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static uint64_t size_of(const char *s) {
    uint64_t v = 0;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(budget_parse_size(s, &v, &err), 0, "'%s': %s", s, err.msg);
    return v;
}

static bool size_fails(const char *s) {
    uint64_t v;
    errmsg_t err;
    errmsg_init(&err);
    int rc = budget_parse_size(s, &v, &err);
    cr_expect(rc != 0 || !err.is_set);
    if (rc != 0)
        cr_expect(strstr(err.msg, "check: ") == err.msg && !strchr(err.msg, '\n'), "%s", err.msg);
    return rc != 0;
}

Test(budget, sizes_take_binary_and_decimal_units) {
    cr_expect_eq(size_of("1048576"), 1048576);
    cr_expect_eq(size_of("0"), 0);
    cr_expect_eq(size_of("512K"), 512 * 1024);
    cr_expect_eq(size_of("512KiB"), 512 * 1024);
    cr_expect_eq(size_of("1.5MiB"), 3 * 512 * 1024);
    cr_expect_eq(size_of("0.5k"), 512);
    cr_expect_eq(size_of("10MB"), 10000000);
    cr_expect_eq(size_of("2 GB"), 2000000000ull);
    cr_expect_eq(size_of("3g"), 3ull << 30);
    cr_expect_eq(size_of("100B"), 100);
}

Test(budget, sizes_that_are_not_whole_bytes_or_numbers_fail_in_one_line) {
    cr_expect(size_fails(""));
    cr_expect(size_fails("abc"));
    cr_expect(size_fails("-1"));
    cr_expect(size_fails("1.5"));
    cr_expect(size_fails("0.001K")); // 1.024 bytes
    cr_expect(size_fails("12 parsecs"));
    cr_expect(size_fails("99999999999999999999"));
    cr_expect(size_fails("20000000T"));
    cr_expect(size_fails("1e6"));
}

Test(budget, counts_and_percentages) {
    uint64_t v;
    double p;
    cr_assert_eq(budget_parse_count("1000", &v, NULL), 0);
    cr_expect_eq(v, 1000);
    cr_assert_eq(budget_parse_count("10k", &v, NULL), 0);
    cr_expect_eq(v, 10000);
    cr_assert_eq(budget_parse_count("1.5M", &v, NULL), 0);
    cr_expect_eq(v, 1500000);
    cr_expect_neq(budget_parse_count("1MiB", &v, NULL), 0);
    cr_expect_neq(budget_parse_count("0.5", &v, NULL), 0);
    cr_assert_eq(budget_parse_percent("5%", &p, NULL), 0);
    cr_expect_float_eq(p, 5.0, 1e-12);
    cr_assert_eq(budget_parse_percent("0.5", &p, NULL), 0);
    cr_expect_float_eq(p, 0.5, 1e-12);
    cr_expect_neq(budget_parse_percent("-1%", &p, NULL), 0);
    cr_expect_neq(budget_parse_percent("5%%", &p, NULL), 0);
    cr_expect_neq(budget_parse_percent("five", &p, NULL), 0);
}

Test(budget, site_spec_splits_at_the_last_colon_before_the_metric) {
    budget_t b;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(budget_site("std::vector<int>::push_back:total<=1K", &b, &err), 0, "%s", err.msg);
    cr_expect_str_eq(b.pattern, "std::vector<int>::push_back");
    cr_expect_eq(b.metric, SUMMARY_TOTAL);
    cr_expect_eq(b.limit, 1024);
    cr_assert_eq(budget_site("operator<=:blocks<=3", &b, &err), 0, "%s", err.msg);
    cr_expect_str_eq(b.pattern, "operator<=");
    cr_expect_eq(b.metric, SUMMARY_BLOCKS);
    cr_expect_eq(b.limit, 3);
    cr_assert_eq(budget_site("parse_*:peak <= 2MiB", &b, &err), 0, "%s", err.msg);
    cr_expect_eq(b.metric, SUMMARY_PEAK);
    cr_expect_eq(b.limit, 2u << 20);
    const char *bad[] = {"f<=1",      ":total<=1", "f:bogus<=1",
                         "f:total<1", "f:total<=", "f:blocks<=1KiB"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errmsg_init(&err);
        cr_expect_neq(budget_site(bad[i], &b, &err), 0, "'%s' was taken", bad[i]);
        cr_expect(err.is_set && !strchr(err.msg, '\n'), "'%s': %s", bad[i], err.msg);
    }
}

static summary_t *summary_of(uint64_t total_bytes, size_t n, const char *const *fn,
                             const uint64_t *bytes) {
    summary_t *s = calloc(1, sizeof *s);
    s->total[SUMMARY_TOTAL] = total_bytes;
    s->sites = calloc(n, sizeof *s->sites);
    s->n_sites = n;
    for (size_t i = 0; i < n; i++) {
        s->sites[i].function = strdup(fn[i]);
        s->sites[i].v[SUMMARY_TOTAL] = bytes[i];
    }
    return s;
}

Test(budget, a_whole_process_budget_holds_at_the_limit_and_breaks_one_over) {
    const char *fn[] = {"a", "b", "c", "d"};
    uint64_t bytes[] = {10, 400, 90, 500};
    summary_t *s = summary_of(1000, 4, fn, bytes);
    budget_t b;
    budget_result_t r;
    cr_assert_eq(budget_total(SUMMARY_TOTAL, "1000", &b, NULL), 0);
    budget_eval(&b, s, NULL, &r);
    cr_expect_not(r.broken);
    cr_expect_eq(r.n_culprits, 0);
    cr_assert_eq(budget_total(SUMMARY_TOTAL, "999", &b, NULL), 0);
    budget_eval(&b, s, NULL, &r);
    cr_expect(r.broken);
    cr_expect_eq(r.figure, 1000);
    cr_expect_eq(r.limit, 999);
    cr_assert_eq(r.n_culprits, 3);
    cr_expect_str_eq(s->sites[r.culprit[0]].function, "d");
    cr_expect_str_eq(s->sites[r.culprit[1]].function, "b");
    cr_expect_str_eq(s->sites[r.culprit[2]].function, "c");
    cr_expect_eq(r.culprit_value[0], 500);
    summary_free(s);
}

Test(budget, a_site_budget_sums_the_matching_functions) {
    const char *fn[] = {"parse_a", "parse_b", "main"};
    uint64_t bytes[] = {30, 20, 1000};
    summary_t *s = summary_of(1050, 3, fn, bytes);
    budget_t b;
    budget_result_t r;
    cr_assert_eq(budget_site("parse_*:total<=50", &b, NULL), 0);
    budget_eval(&b, s, NULL, &r);
    cr_expect_eq(r.figure, 50);
    cr_expect_not(r.broken);
    cr_assert_eq(budget_site("parse_*:total<=49", &b, NULL), 0);
    budget_eval(&b, s, NULL, &r);
    cr_expect(r.broken);
    cr_assert_eq(r.n_culprits, 2);
    cr_expect_str_eq(s->sites[r.culprit[0]].function, "parse_a");
    summary_free(s);
}

Test(budget, a_baseline_allows_its_percentage_rounded_down_and_names_what_grew) {
    const char *fn0[] = {"load", "keep"};
    uint64_t b0[] = {100, 900};
    summary_t *base = summary_of(1000, 2, fn0, b0);
    const char *fn1[] = {"keep", "load", "new_one"};
    uint64_t held[] = {900, 150, 0};
    summary_t *cur = summary_of(1050, 3, fn1, held);
    budget_t b;
    budget_result_t r;
    budget_baseline(SUMMARY_TOTAL, 5.0, &b);
    budget_eval(&b, cur, base, &r);
    cr_expect_eq(r.limit, 1050);
    cr_expect_not(r.broken);
    cur->total[SUMMARY_TOTAL] = 1051;
    cur->sites[2].v[SUMMARY_TOTAL] = 1;
    budget_eval(&b, cur, base, &r);
    cr_expect(r.broken);
    cr_assert_eq(r.n_culprits, 2);
    cr_expect_str_eq(cur->sites[r.culprit[0]].function, "load");
    cr_expect_eq(r.culprit_value[0], 50);
    cr_expect_str_eq(cur->sites[r.culprit[1]].function, "new_one"); // absent before: all new
    budget_baseline(SUMMARY_TOTAL, 0.0, &b);
    cur->total[SUMMARY_TOTAL] = 1001;
    budget_eval(&b, cur, base, &r);
    cr_expect(r.broken, "0%% allows no growth");
    summary_free(base);
    summary_free(cur);
}

Test(budget, summaries_combine_by_minimum_or_median) {
    const char *fn[] = {"f"};
    uint64_t v1[] = {10}, v2[] = {30}, v3[] = {20};
    summary_t *runs[3] = {summary_of(10, 1, fn, v1), summary_of(30, 1, fn, v2),
                          summary_of(20, 1, fn, v3)};
    summary_t *med = summary_combine(runs, 3, true), *min = summary_combine(runs, 3, false);
    cr_expect_eq(med->total[SUMMARY_TOTAL], 20);
    cr_expect_eq(min->total[SUMMARY_TOTAL], 10);
    cr_expect_eq(med->sites[0].v[SUMMARY_TOTAL], 20);
    cr_expect_eq(min->sites[0].v[SUMMARY_TOTAL], 10);
    summary_free(med);
    summary_free(min);
    for (int i = 0; i < 3; i++)
        summary_free(runs[i]);
}

// A budgets file in a temporary file; its path into path (64 bytes).
static void write_file(char *path, const char *text) {
    strcpy(path, "/tmp/test_budget_XXXXXX");
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
}

Test(budget, a_budgets_file_reads_as_the_flags_do) {
    char path[64];
    write_file(path, "# budgets\n"
                     "peak: 64MiB\n"
                     "blocks: 10k\n"
                     "sites:\n"
                     "  - 'parse_*:total<=1K'\n"
                     "  - \"std::vector<*>::*:blocks<=3\"\n"
                     "baseline: ci/base.json\n"
                     "max-increase: 5%\n"
                     "exclude: __libc_*\n"
                     "from-module: app\n");
    budget_file_t f;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(budget_file_read(path, &f, &err), 0, "%s", err.msg);
    unlink(path);
    cr_assert_eq(f.n_budgets, 4);
    cr_expect_eq(f.budgets[0].metric, SUMMARY_PEAK);
    cr_expect_eq(f.budgets[0].limit, 64u << 20);
    cr_expect_eq(f.budgets[1].limit, 10000);
    cr_expect_eq(f.budgets[2].kind, BUDGET_SITE);
    cr_expect_str_eq(f.budgets[3].pattern, "std::vector<*>::*");
    cr_expect_str_eq(f.baseline, "ci/base.json");
    cr_expect(f.has_max_increase);
    cr_expect_float_eq(f.max_increase_pct, 5.0, 1e-12);
    cr_assert_eq(f.n_exclude, 1);
    cr_expect_str_eq(f.exclude[0], "__libc_*");
    cr_expect_str_eq(f.from_module, "app");
    budget_file_fini(&f);
}

Test(budget, a_bad_budgets_file_is_one_line_with_file_and_line) {
    static const struct {
        const char *text, *want;
    } cases[] = {
        {"peak: 1M\nbogus: 3\n", ":2: unknown key 'bogus'"},
        {"peak: lots\n", ":1: 'lots' is not a size"},
        {"sites:\n  - 'f:bogus<=1'\n", ":2: --site 'f:bogus<=1': unknown metric"},
        {"peak: [1, 2]\n", ":1: 'peak' needs a single value"},
        {"- peak\n", ":1: expected 'key: value' lines"},
        {"peak: 1M\n  total: : :\n", ": not YAML"},
        {"", ": empty"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char path[64];
        write_file(path, cases[i].text);
        budget_file_t f;
        errmsg_t err;
        errmsg_init(&err);
        cr_expect_neq(budget_file_read(path, &f, &err), 0, "case %zu taken", i);
        unlink(path);
        cr_expect(strstr(err.msg, cases[i].want) && strncmp(err.msg, "check: /tmp/", 12) == 0 &&
                      !strchr(err.msg, '\n'),
                  "case %zu: %s", i, err.msg);
        budget_file_fini(&f);
    }
    budget_file_t f;
    errmsg_t err;
    errmsg_init(&err);
    cr_expect_neq(budget_file_read("/nonexistent/budgets.yml", &f, &err), 0);
    cr_expect(strstr(err.msg, "cannot read the budgets file"), "%s", err.msg);
}

// summary_json then summary_read gives the figures back; only the top functions are written.
Test(budget, the_summary_json_reads_back_and_keeps_the_top_functions) {
    enum { N = SUMMARY_KEEP + 10 };
    summary_t *s = calloc(1, sizeof *s);
    s->program = strdup("app");
    s->sites = calloc(N, sizeof *s->sites);
    s->n_sites = N;
    for (size_t i = 0; i < N; i++) {
        char name[32];
        snprintf(name, sizeof name, "f%02zu", i);
        s->sites[i].function = strdup(name);
        s->sites[i].location = strdup("app.c:1");
        s->sites[i].v[SUMMARY_TOTAL] = 1000 - i; // f00 largest
        s->total[SUMMARY_TOTAL] += 1000 - i;
    }
    s->sites[N - 1].v[SUMMARY_LEAKED] = 7; // last by total, but it is the only leak
    s->total[SUMMARY_LEAKED] = 7;
    s->total[SUMMARY_PEAK] = 123;
    json_t *j = summary_json(s, 0);
    char path[] = "/tmp/test_budget_summary_XXXXXX";
    int fd = mkstemp(path);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(json_dump_file(j, path, JSON_INDENT(2)), 0);
    json_decref(j);
    errmsg_t err;
    errmsg_init(&err);
    summary_t *r = summary_read(path, &err);
    unlink(path);
    cr_assert(r, "%s", err.msg);
    cr_expect_str_eq(r->program, "app");
    for (int m = 0; m < SUMMARY_N_METRICS; m++)
        cr_expect_eq(r->total[m], s->total[m], "%s", summary_metric_name(m));
    cr_expect_eq(r->n_sites, SUMMARY_KEEP + 1);
    cr_expect_eq(r->n_omitted, N - SUMMARY_KEEP - 1);
    const summary_site_t *leak = summary_find(r, "f59");
    cr_assert(leak, "the only leak was left out");
    cr_expect_eq(leak->v[SUMMARY_LEAKED], 7);
    cr_expect_str_eq(r->sites[0].function, "f00");
    cr_expect_null(summary_find(r, "f55"));
    summary_free(r);
    summary_free(s);
}

Test(budget, a_file_that_is_no_summary_is_refused_in_one_line) {
    static const char *const docs[] = {
        "{\"totals\": {}}", "[1, 2]", "not json", "{\"heapprof_check_summary\": 2, \"totals\": {}}",
        "{\"heapprof_check_summary\": 1, \"totals\": {\"peak\": 1}}"};
    for (size_t i = 0; i < sizeof docs / sizeof *docs; i++) {
        char path[] = "/tmp/test_budget_summary_XXXXXX";
        int fd = mkstemp(path);
        cr_assert(fd >= 0);
        cr_assert_eq(write(fd, docs[i], strlen(docs[i])), (ssize_t)strlen(docs[i]));
        close(fd);
        errmsg_t err;
        errmsg_init(&err);
        cr_expect_null(summary_read(path, &err), "doc %zu taken", i);
        unlink(path);
        cr_expect(strncmp(err.msg, "check: /tmp/", 12) == 0 && !strchr(err.msg, '\n'), "%s",
                  err.msg);
    }
}
