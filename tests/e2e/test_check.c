// SPDX-License-Identifier: MIT
// `heapprof check`: every budget flag breaks on a program built one byte or block over it and
// holds at the limit; a baseline of the fixed version of a program fails its unfixed version and
// names the site that changed, and passes the other way; the JUnit file validates against a
// JUnit schema; the exit contract 0/1/2 with one-line errors; the files left for a failure.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BUDGET E2E_PROGS "/budget"

static bool one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == '\0' && strncmp(s, "heapprof: check: ", 17) == 0;
}

static bool exists(const char *path) {
    struct stat st;
    return stat(path, &st) == 0;
}

// `heapprof check ARGS...`: its status; stdout and stderr into *out and *err (caller frees).
static int check(const char *const *args, char **out, char **err) {
    const char *argv[64] = {"check"};
    size_t n = 1;
    for (; args[n - 1]; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    return e2e_heapprof(argv, out, err);
}

// The whole-process figures of `budget` with its switches at 0, from a summary.
static json_t *base_totals(const char *dir) {
    char summary[4096];
    snprintf(summary, sizeof summary, "%s/base.json", dir);
    const char *args[] = {"--summary-out", summary, "--", BUDGET, "0", "0", "0", "0", "0", NULL};
    char *out, *err;
    cr_assert_eq(check(args, &out, &err), 0, "stdout: %s\nstderr: %s", out, err);
    free(out);
    free(err);
    json_error_t je;
    json_t *j = json_load_file(summary, 0, &je);
    cr_assert(j, "%s: %s", summary, je.text);
    cr_expect_eq(e2e_int(j, "exit_status"), 0);
    json_t *t = json_incref(json_object_get(j, "totals"));
    json_decref(j);
    return t;
}

Test(check, every_budget_breaks_one_over_and_holds_at_the_limit, .timeout = 300) {
    char *dir = e2e_tmpdir("check-limits");
    json_t *totals = base_totals(dir);
    static const char *const metrics[] = {"peak", "total", "blocks", "leaked", "temporary"};
    for (int m = 0; m < 5; m++) {
        char flag[32], limit[32], summary[4096];
        snprintf(flag, sizeof flag, "--%s", metrics[m]);
        snprintf(limit, sizeof limit, "%lld", e2e_int(totals, metrics[m]));
        snprintf(summary, sizeof summary, "%s/%s.json", dir, metrics[m]);
        const char *sw[5] = {"0", "0", "0", "0", "0"};
        const char *held[] = {flag, limit, "--", BUDGET, sw[0], sw[1], sw[2], sw[3], sw[4], NULL};
        char *out, *err;
        cr_expect_eq(check(held, &out, &err), 0, "%s at the limit: %s%s", flag, out, err);
        cr_expect(strstr(out, "ok   ") == out, "%s", out);
        free(out);
        free(err);
        sw[m] = "1";
        const char *over[] = {flag,  limit, "--summary-out", summary, "--",  BUDGET,
                              sw[0], sw[1], sw[2],           sw[3],   sw[4], NULL};
        cr_expect_eq(check(over, &out, &err), 1, "%s one over: %s%s", flag, out, err);
        char want[128];
        snprintf(want, sizeof want, "FAIL %s <= %s: ", metrics[m], limit);
        cr_expect(strstr(out, want) == out, "%s one over printed: %s", flag, out);
        cr_expect(strstr(out, m == 2 || m == 4 ? "1 block over" : "1 byte over"), "%s", out);
        cr_expect(strstr(out, "most from: "), "no site named: %s", out);
        free(out);
        free(err);
    }
    json_decref(totals);
    free(dir);
}

Test(check, a_site_budget_names_its_function_and_exclude_takes_it_out, .timeout = 120) {
    char *dir = e2e_tmpdir("check-site");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *const argv[] = {BUDGET, "0", "0", "0", "0", "0", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *at[] = {"--site", "peak_work:peak<=150000", trace, NULL};
    cr_expect_eq(check(at, NULL, NULL), 0);
    const char *over[] = {"--site", "peak_*:peak<=149999", trace, NULL};
    char *out;
    cr_expect_eq(check(over, &out, NULL), 1);
    cr_expect(strstr(out, "FAIL site 'peak_*': peak <= 149999: 150,000 bytes") &&
                  strstr(out, "peak_work ("),
              "%s", out);
    free(out);
    // without peak_work the peak is what else was live then: the leak is not yet made
    const char *excl[] = {"--exclude", "peak_*", "--peak", "0", trace, NULL};
    cr_expect_eq(check(excl, &out, NULL), 0, "%s", out);
    free(out);
    free(dir);
}

// The unfixed and the fixed version of one program, checked against each other's figures.
Test(check, a_baseline_fails_the_unfixed_version_naming_the_site_and_passes_the_fix,
     .timeout = 120) {
    char *dir = e2e_tmpdir("check-baseline");
    char fixed[4096], grow_trace[4096], out_dir[4096], junit[4096];
    snprintf(fixed, sizeof fixed, "%s/fixed.json", dir);
    snprintf(grow_trace, sizeof grow_trace, "%s/grow.hpt", dir);
    snprintf(out_dir, sizeof out_dir, "%s/ci/summary.json", dir);
    snprintf(junit, sizeof junit, "%s/junit.xml", dir);
    const char *rec[] = {"--summary-out", fixed, "--", E2E_PROGS "/reserve_fixed", NULL};
    cr_assert_eq(check(rec, NULL, NULL), 0);

    char ci[4096];
    snprintf(ci, sizeof ci, "%s/ci", dir);
    cr_assert_eq(mkdir(ci, 0700), 0);
    const char *worse[] = {
        "--baseline", fixed, "--max-increase",          "5%", "--summary-out", out_dir, "--junit",
        junit,        "--",  E2E_PROGS "/reserve_grow", NULL};
    char *out, *err;
    cr_expect_eq(check(worse, &out, &err), 1, "%s%s", out, err);
    cr_expect(strstr(out, "FAIL total <= baseline + 5%: "), "%s", out);
    cr_expect(strstr(out, "FAIL blocks <= baseline + 5%: "), "%s", out);
    const char *fail = strstr(out, "FAIL total");
    cr_expect(fail && strstr(fail, "grew most: load_records (") && strstr(fail, "[growth: "),
              "the changed site with its growth advice: %s", out);
    // the files a person looks into, beside the summary
    const char *listed = strstr(out, "to look into: ");
    cr_assert(listed, "%s", out);
    char trace[4096], dhat[4096], html[4096];
    cr_assert_eq(sscanf(listed, "to look into: %4095s %4095s %4095s", trace, dhat, html), 3);
    cr_expect(strncmp(trace, ci, strlen(ci)) == 0 && exists(trace), "%s", trace);
    cr_expect(strstr(dhat, ".dhat.json") && exists(dhat), "%s", dhat);
    cr_expect(strstr(html, ".html") && exists(html), "%s", html);
    cr_expect(exists(out_dir));
    free(out);
    free(err);

    // the other way: the unfixed version's trace as the baseline, the fix passes
    char *const argv[] = {E2E_PROGS "/reserve_grow", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, grow_trace, NULL, NULL), 0);
    const char *better[] = {
        "--baseline", grow_trace, "--max-increase", "5%", "--", E2E_PROGS "/reserve_fixed", NULL};
    cr_expect_eq(check(better, &out, &err), 0, "%s%s", out, err);
    cr_expect(strstr(out, "heapprof check: all 5 budgets held"), "%s", out);
    free(out);
    free(err);
    free(dir);
}

Test(check, the_junit_file_validates_against_a_junit_schema, .timeout = 120) {
    char *dir = e2e_tmpdir("check-junit");
    char junit[4096], trace[4096];
    snprintf(junit, sizeof junit, "%s/junit.xml", dir);
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *const argv[] = {BUDGET, "0", "0", "0", "0", "0", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    // a held budget, broken ones, and names with characters XML must escape
    const char *args[] = {"--peak",  "1",
                          "--total", "1G",
                          "--site",  "*<&>\"'*:blocks<=0",
                          "--site",  "peak_work:total<=10",
                          "--junit", junit,
                          trace,     NULL};
    cr_expect_eq(check(args, NULL, NULL), 1);
    char *const lint[] = {E2E_XMLLINT, "--noout", "--schema", E2E_JUNIT_XSD, junit, NULL};
    e2e_run_opts_t o = {.no_preload = true};
    char *out, *err;
    cr_expect_eq(e2e_run(lint, &o, &out, &err, NULL), 0, "xmllint: %s%s", out, err);
    free(out);
    free(err);
    FILE *f = fopen(junit, "r");
    cr_assert(f);
    char doc[65536];
    size_t n = fread(doc, 1, sizeof doc - 1, f);
    doc[n] = '\0';
    fclose(f);
    cr_expect(strstr(doc, "tests=\"4\" failures=\"2\" errors=\"0\""), "%s", doc);
    cr_expect(strstr(doc, "<failure type=\"budget\" message=\"peak &lt;= 1: "), "%s", doc);
    free(dir);
}

Test(check, errors_are_one_line_with_status_2, .timeout = 120) {
    char *dir = e2e_tmpdir("check-errors");
    char trace[4096], cut[4096], notjson[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(cut, sizeof cut, "%s/cut.hpt", dir);
    snprintf(notjson, sizeof notjson, "%s/baseline.json", dir);
    char *const argv[] = {BUDGET, "0", "0", "0", "0", "0", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    // a damaged trace: the first part of a good one
    FILE *in = fopen(trace, "rb"), *o = fopen(cut, "wb");
    cr_assert(in && o);
    char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, in);
    fwrite(buf, 1, n * 2 / 3, o);
    fclose(in);
    fclose(o);
    o = fopen(notjson, "w");
    fputs("{\"totals\": {}}\n", o);
    fclose(o);
    const char *cases[][8] = {
        {"--peak", "lots", trace, NULL},
        {"--site", "f:bogus<=1", trace, NULL},
        {"--peak", NULL},
        {"--peak", "1M", NULL},
        {"--peak", "1M", trace, "--", BUDGET, NULL},
        {trace, NULL},
        {"--max-increase", "5%", "--peak", "1", trace, NULL},
        {"--baseline", "/nonexistent/baseline.json", trace, NULL},
        {"--baseline", notjson, trace, NULL},
        {"--peak", "1M", cut, NULL},
        {"--peak", "1M", "/nonexistent/t.hpt", NULL},
        {"--no-such-budget", "1", trace, NULL},
        {"--peak", "1M", "--", "/nonexistent/program", NULL},
        {"--peak", "1M", "--summary-out", "/nonexistent/dir/s.json", "--", BUDGET, NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out, *err;
        int st = check(cases[i], &out, &err);
        cr_expect_eq(st, 2, "case %zu: status %d, %s%s", i, st, out, err);
        cr_expect(one_line(err), "case %zu: stderr: %s", i, err);
        free(out);
        free(err);
    }
    free(dir);
}

// The command's own failure is an error (2), reported with its status, which the summary and the
// JUnit file keep; its budgets are still judged and printed.
Test(check, a_failing_command_is_status_2_with_its_status_kept, .timeout = 120) {
    char *dir = e2e_tmpdir("check-cmdfail");
    char summary[4096], junit[4096];
    snprintf(summary, sizeof summary, "%s/s.json", dir);
    snprintf(junit, sizeof junit, "%s/j.xml", dir);
    const char *args[] = {"--peak",  "1G", "--summary-out", summary, "--junit", junit, "--",
                          "/bin/sh", "-c", "exit 3",        NULL};
    char *out, *err;
    cr_expect_eq(check(args, &out, &err), 2);
    cr_expect(strstr(out, "ok   peak <= 1G"), "%s", out);
    cr_expect(strstr(err, "heapprof: check: the command exited with status 3\n"), "%s", err);
    json_error_t je;
    json_t *j = json_load_file(summary, 0, &je);
    cr_assert(j, "%s", je.text);
    cr_expect_eq(e2e_int(j, "exit_status"), 3);
    json_decref(j);
    char *const lint[] = {E2E_XMLLINT, "--noout", "--schema", E2E_JUNIT_XSD, junit, NULL};
    e2e_run_opts_t o = {.no_preload = true};
    cr_expect_eq(e2e_run(lint, &o, NULL, NULL, NULL), 0);
    free(out);
    free(err);
    free(dir);
}

Test(check, runs_take_the_median_or_minimum, .timeout = 120) {
    char *dir = e2e_tmpdir("check-runs");
    char summary[4096];
    snprintf(summary, sizeof summary, "%s/s.json", dir);
    json_t *totals = base_totals(dir);
    char limit[32];
    snprintf(limit, sizeof limit, "%lld", e2e_int(totals, "peak"));
    const char *args[] = {"--runs", "3",  "--take", "min", "--peak", limit, "--summary-out",
                          summary,  "--", BUDGET,   "0",   "0",      "0",   "0",
                          "0",      NULL};
    char *out;
    cr_expect_eq(check(args, &out, NULL), 0, "%s", out);
    free(out);
    // no trace is left behind when every budget held
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "ls %s/*.hpt >/dev/null 2>&1", dir);
    cr_expect_neq(WEXITSTATUS(system(cmd)), 0, "a trace was left in %s", dir);
    json_decref(totals);
    free(dir);
}

Test(check, a_budgets_file_is_judged_with_the_flags, .timeout = 120) {
    char *dir = e2e_tmpdir("check-file");
    json_t *totals = base_totals(dir);
    char yml[4096], bad[4096], trace[4096], text[512];
    snprintf(yml, sizeof yml, "%s/budgets.yml", dir);
    snprintf(bad, sizeof bad, "%s/bad.yml", dir);
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *const argv[] = {BUDGET, "0", "0", "0", "0", "0", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    snprintf(text, sizeof text, "peak: %lld\nblocks: %lld\nsites:\n  - 'leak:leaked<=100'\n",
             e2e_int(totals, "peak"), e2e_int(totals, "blocks"));
    FILE *f = fopen(yml, "w");
    fputs(text, f);
    fclose(f);
    f = fopen(bad, "w");
    fputs("peak: 1M\nleak: 0\n", f);
    fclose(f);
    const char *held[] = {"--budgets", yml, trace, NULL};
    char *out, *err;
    cr_expect_eq(check(held, &out, NULL), 0, "%s", out);
    cr_expect(strstr(out, "all 3 budgets held"), "%s", out);
    free(out);
    // the command line's budgets join the file's
    const char *more[] = {"--budgets", yml, "--leaked", "99", trace, NULL};
    cr_expect_eq(check(more, &out, NULL), 1);
    cr_expect(strstr(out, "FAIL leaked <= 99: 100 bytes, 1 byte over"), "%s", out);
    free(out);
    const char *wrong[] = {"--budgets", bad, trace, NULL};
    cr_expect_eq(check(wrong, NULL, &err), 2);
    cr_expect(one_line(err) && strstr(err, "bad.yml:2: unknown key 'leak'"), "%s", err);
    free(err);
    json_decref(totals);
    free(dir);
}

// --from-module counts what `stats --from-module` counts; a module that is not there is an error,
// not a run where every figure is 0 and every budget holds.
Test(check, from_module_figures_are_those_of_stats, .timeout = 120) {
    char *dir = e2e_tmpdir("check-module");
    char trace[4096], summary[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(summary, sizeof summary, "%s/s.json", dir);
    char *const argv[] = {E2E_PROGS "/growth", NULL}; // its printf buffer comes from libc
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *args[] = {"--from-module", "growth", "--summary-out", summary, trace, NULL};
    cr_assert_eq(check(args, NULL, NULL), 0);
    json_error_t je;
    json_t *j = json_load_file(summary, 0, &je);
    cr_assert(j, "%s", je.text);
    json_t *t = json_object_get(j, "totals");
    json_t *st = e2e_stats(trace, "growth"), *all = e2e_stats(trace, NULL);
    cr_expect_eq(e2e_int(t, "blocks"), e2e_int(st, "blocks"));
    cr_expect_eq(e2e_int(t, "total"), e2e_int(st, "bytes"));
    cr_expect_eq(e2e_int(t, "peak"), e2e_int(st, "peak_bytes"));
    cr_expect_eq(e2e_int(t, "leaked"), e2e_int(st, "end_bytes"));
    cr_expect_lt(e2e_int(t, "blocks"), e2e_int(all, "blocks"), "libc's own blocks still counted");
    json_decref(st);
    json_decref(all);
    json_decref(j);
    const char *nope[] = {"--from-module", "no-such-module.so", "--peak", "1G", trace, NULL};
    char *err;
    cr_expect_eq(check(nope, NULL, &err), 2);
    cr_expect(one_line(err) && strstr(err, "matches no module"), "%s", err);
    free(err);
    free(dir);
}

// A held budget leaves nothing behind: neither the trace nor the JIT perf map `heapprof run`
// copies beside it (no_cfi writes /tmp/perf-PID.map as a JIT does).
Test(check, a_held_budget_leaves_no_trace_or_perf_map_behind, .timeout = 120) {
    char *dir = e2e_tmpdir("check-perfmap");
    char summary[4096];
    snprintf(summary, sizeof summary, "%s/s.json", dir);
    const char *args[] = {"--peak", "1G", "--summary-out", summary, "--", E2E_PROGS "/no_cfi",
                          "tmp", NULL};
    char *out, *err;
    cr_expect_eq(check(args, &out, &err), 0, "%s%s", out, err);
    const char *at = strstr(err, "heapprof-check.");
    long pid = at ? strtol(at + strlen("heapprof-check."), NULL, 10) : 0;
    cr_expect_gt(pid, 0, "no trace named on stderr: %s", err);
    char tmp_map[64];
    snprintf(tmp_map, sizeof tmp_map, "/tmp/perf-%ld.map", pid);
    unlink(tmp_map);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "ls -A %s | grep -v '^s.json$' | grep -q .", dir);
    cr_expect_neq(WEXITSTATUS(system(cmd)), 0, "something was left in %s", dir);
    free(out);
    free(err);
    free(dir);
}
