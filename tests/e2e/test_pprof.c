// SPDX-License-Identifier: MIT
// `heapprof pprof` against Go's own reader: `go tool pprof` reads every profile we write; on a
// full trace of each sample its flat figures per function (-top, alloc_space and alloc_objects)
// are `heapprof report --json`'s bytes and blocks per naming function, exactly, and inuse_space
// at exit is the report's bytes still live at exit. A damaged or truncated trace gives a valid
// profile of what was read and the report's damage line as a warning, or one error line and
// status 2; never a crash, never a half-written file.
#include "format/hpt_format.h"
#include "spawn.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *sample(const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", E2E_SAMPLES, name);
    return p;
}

static char *trace_of(const char *prog, const char *dir) {
    char *trace = malloc(4200);
    snprintf(trace, 4200, "%s/t.hpt", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    return trace;
}

// `heapprof pprof TRACE -o OUT [extra]`: its status, stderr into *err (if not NULL).
static int pprof(const char *trace, const char *out, const char *extra, char **err) {
    const char *args[] = {"pprof", trace, "-o", out, extra, NULL};
    char *o = NULL;
    int st = e2e_heapprof(args, &o, err);
    cr_expect_str_eq(o, "", "pprof printed on stdout with -o");
    free(o);
    return st;
}

// `go tool pprof OPTS... FILE` (opts NULL-terminated, one of them an output format such as -top
// or -raw, or pprof goes interactive); asserts it succeeds and returns its stdout.
static char *go_pprof(const char *const *opts, const char *file) {
    char *argv[16] = {E2E_GO, "tool", "pprof"};
    size_t n = 3;
    for (; *opts && n < 14; opts++)
        argv[n++] = (char *)*opts;
    argv[n++] = (char *)file;
    argv[n] = NULL;
    e2e_run_opts_t o = {.no_preload = true, .timeout_s = 120};
    char *out = NULL, *err = NULL;
    int st = e2e_run(argv, &o, &out, &err, NULL);
    cr_assert_eq(st, 0, "go tool pprof %s: status %d: %s", file, st, err);
    free(err);
    return out;
}

static char *go_pprof_raw(const char *file) {
    static const char *const raw[] = {"-raw", NULL};
    return go_pprof(raw, file);
}

// -top's flat column per function name, as a JSON object name -> value (zeros left out). A row
// is "%10s %s %s %10s %s  NAME[ (inline)]" (pprof's internal/report printText).
static json_t *top_flat(const char *index, const char *file) {
    char si[64];
    snprintf(si, sizeof si, "-sample_index=%s", index);
    // -unit=B: bytes unscaled ("371126B", not "362.43kB"); no node is dropped as too small
    const char *const opts[] = {si, "-top", "-nodefraction=0", "-nodecount=1000000",
                                strstr(index, "space") ? "-unit=B" : NULL, NULL};
    char *out = go_pprof(opts, file);
    json_t *m = json_object();
    bool body = false;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        if (!body) {
            body = strncmp(line, "      flat  flat%", 17) == 0;
            continue;
        }
        char *p = line;
        char flat[64] = "";
        for (int field = 0; field < 5; field++) {
            while (*p == ' ')
                p++;
            char *end = strchr(p, ' ');
            cr_assert(end, "short -top row: %s", line);
            if (field == 0)
                snprintf(flat, sizeof flat, "%.*s", (int)(end - p), p);
            p = end;
        }
        cr_assert(strncmp(p, "  ", 2) == 0, "-top row: %s", line);
        char *name = p + 2;
        size_t n = strlen(name);
        if (n > 9 && strcmp(name + n - 9, " (inline)") == 0)
            name[n - 9] = '\0';
        long long v = strtoll(flat, NULL, 10); // "371126B", or "0"
        if (v == 0)
            continue;
        json_t *old = json_object_get(m, name);
        json_object_set_new(m, name, json_integer(v + (old ? json_integer_value(old) : 0)));
    }
    cr_assert(body, "no -top table in: %s", out);
    free(out);
    return m;
}

// The report's sites summed by naming function: key of each site, zeros left out.
static json_t *report_by_function(json_t *report, const char *key) {
    json_t *m = json_object();
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(report, "sites"), i, s) {
        long long v = e2e_int(s, key);
        const char *fn = json_string_value(json_object_get(s, "function"));
        json_t *old = json_object_get(m, fn);
        v += old ? json_integer_value(old) : 0;
        if (v)
            json_object_set_new(m, fn, json_integer(v));
    }
    return m;
}

static void expect_same(const char *what, json_t *pprof, json_t *report) {
    const char *k;
    json_t *v;
    json_object_foreach(report, k, v) {
        json_t *p = json_object_get(pprof, k);
        cr_expect(p && json_integer_value(p) == json_integer_value(v),
                  "%s of %s: report %lld, go tool pprof %lld", what, k,
                  (long long)json_integer_value(v), p ? (long long)json_integer_value(p) : -1);
    }
    json_object_foreach(pprof, k, v) {
        cr_expect(json_object_get(report, k), "%s: go tool pprof has %s (%lld), the report not",
                  what, k, (long long)json_integer_value(v));
    }
}

static void agree(const char *name) {
    char *prog = sample(name);
    if (access(prog, X_OK))
        cr_skip_test("%s was not built (no rustc?)", name);
    char *dir = e2e_tmpdir(name), *trace = trace_of(prog, dir);
    char prof[4300];
    snprintf(prof, sizeof prof, "%s/heap.pb.gz", dir);
    cr_assert_eq(pprof(trace, prof, NULL, NULL), 0);
    json_t *r = e2e_report(trace);
    static const struct {
        const char *index, *key;
    } pairs[] = {{"alloc_space", "bytes"},
                 {"alloc_objects", "blocks"},
                 {"inuse_space", "end_bytes"},
                 {"inuse_objects", "end_blocks"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        json_t *p = top_flat(pairs[i].index, prof), *want = report_by_function(r, pairs[i].key);
        cr_expect_gt(json_object_size(want), 0, "%s: the report has no %s", name, pairs[i].key);
        expect_same(pairs[i].index, p, want);
        json_decref(p);
        json_decref(want);
    }
    // --at peak: inuse_space is the report's bytes at the global peak
    cr_assert_eq(pprof(trace, prof, "--at=peak", NULL), 0);
    json_t *p = top_flat("inuse_space", prof), *want = report_by_function(r, "peak_bytes");
    expect_same("inuse_space --at peak", p, want);
    json_decref(p);
    json_decref(want);
    // full stacks are readable too, and keep every byte
    cr_assert_eq(pprof(trace, prof, "--full-stacks", NULL), 0);
    free(go_pprof_raw(prof));
    p = top_flat("alloc_space", prof);
    long long sum = 0;
    const char *k;
    json_t *v;
    json_object_foreach(p, k, v) sum += json_integer_value(v);
    cr_expect_eq(sum, e2e_int(json_object_get(r, "totals"), "bytes"));
    json_decref(p);
    json_decref(r);
    free(trace);
    free(dir);
    free(prog);
}

Test(pprof, c_sample_agrees_with_report, .timeout = 300) {
    agree("exact_counts");
}
Test(pprof, cpp_sample_agrees_with_report, .timeout = 300) {
    agree("vector_map");
}
Test(pprof, rust_vec_sample_agrees_with_report, .timeout = 300) {
    agree("vec_growth");
}
Test(pprof, rust_hashmap_sample_agrees_with_report, .timeout = 300) {
    agree("hashmap_words");
}
Test(pprof, deep_stacks_sample_agrees_with_report, .timeout = 300) {
    agree("small_stacks");
}

// one line on stderr, starting "heapprof: "
static void assert_one_error_line(const char *err) {
    cr_assert(strncmp(err, "heapprof: ", 10) == 0, "stderr: %s", err);
    const char *nl = strchr(err, '\n');
    cr_assert(nl && nl[1] == '\0', "more than one line on stderr: %s", err);
}

// Nothing in dir but the names given (no temporary file left behind).
static void expect_only(const char *dir, const char *const *names) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls -A %s", dir);
    FILE *ls = popen(cmd, "r");
    cr_assert(ls);
    char line[512];
    while (fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        bool known = false;
        for (const char *const *n = names; *n; n++)
            known |= strcmp(line, *n) == 0;
        cr_expect(known, "left in %s: %s", dir, line);
    }
    pclose(ls);
}

Test(pprof, damaged_trace_gives_a_profile_and_the_damage_warning, .timeout = 300) {
    char *prog = sample("vec_growth");
    if (access(prog, X_OK))
        cr_skip_test("vec_growth was not built (no rustc?)");
    char *dir = e2e_tmpdir("pprof_damaged"), *trace = trace_of(prog, dir);
    FILE *f = fopen(trace, "r+");
    cr_assert(f);
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    cr_assert_gt(size, 64 * 1024);
    fseek(f, size / 2, SEEK_SET);
    for (int i = 0; i < 4096; i++)
        fputc(0x5a, f);
    fclose(f);
    cr_assert_eq(truncate(trace, size - 1000), 0);
    char prof[4300], *err = NULL;
    snprintf(prof, sizeof prof, "%s/heap.pb.gz", dir);
    cr_assert_eq(pprof(trace, prof, NULL, &err), 0, "%s", err);
    cr_expect(strstr(err, "heapprof: warning: damage: "), "%s", err);
    cr_expect(strstr(err, "figures cover what could be read"), "%s", err);
    free(err);
    char *raw = go_pprof_raw(prof);
    cr_expect(strstr(raw, "damage: "), "the damage line is a comment of the profile: %s", raw);
    free(raw);
    free(trace);
    free(dir);
    free(prog);
}

Test(pprof, truncated_traces_give_a_profile_or_one_error_line, .timeout = 600) {
    char *prog = sample("exact_counts");
    char *dir = e2e_tmpdir("pprof_truncated"), *trace = trace_of(prog, dir);
    struct stat st;
    cr_assert_eq(stat(trace, &st), 0);
    char *whole = malloc((size_t)st.st_size);
    FILE *f = fopen(trace, "rb");
    cr_assert_eq(fread(whole, 1, (size_t)st.st_size, f), (size_t)st.st_size);
    fclose(f);
    char cut[4300], prof[4300];
    snprintf(cut, sizeof cut, "%s/cut.hpt", dir);
    snprintf(prof, sizeof prof, "%s/heap.pb.gz", dir);
    int profiles = 0, errors = 0;
    for (long len = 0; len < st.st_size; len += 1 + st.st_size / 23) {
        unlink(prof);
        f = fopen(cut, "wb");
        cr_assert_eq(fwrite(whole, 1, (size_t)len, f), (size_t)len);
        fclose(f);
        char *err = NULL;
        int s = pprof(cut, prof, NULL, &err);
        cr_assert(s == 0 || s == 2, "length %ld: status %d: %s", len, s, err);
        if (s == 0) {
            profiles++;
            free(go_pprof_raw(prof));
        } else {
            errors++;
            assert_one_error_line(err);
            cr_expect_neq(access(prof, F_OK), 0, "length %ld: a profile despite the error", len);
        }
        free(err);
    }
    cr_expect_gt(profiles, 0);
    cr_expect_gt(errors, 0, "an empty or header-only file is an error");
    static const char *const left[] = {"t.hpt", "cut.hpt", "heap.pb.gz", NULL};
    expect_only(dir, left);
    free(whole);
    free(trace);
    free(dir);
    free(prog);
}

Test(pprof, bad_input_is_one_line_and_status_2, .timeout = 60) {
    char *dir = e2e_tmpdir("pprof_bad");
    char junk[4200], prof[4200], nodir[4200];
    snprintf(junk, sizeof junk, "%s/junk.hpt", dir);
    snprintf(prof, sizeof prof, "%s/out.pb.gz", dir);
    snprintf(nodir, sizeof nodir, "%s/nonexistent/out.pb.gz", dir);
    FILE *f = fopen(junk, "w");
    fputs("this is not a heapprof trace at all, just some text\n", f);
    fclose(f);
    const char *const cases[][9] = {
        {"pprof", junk, "-o", prof, NULL},
        {"pprof", "/nonexistent/trace.hpt", "-o", prof, NULL},
        {"pprof", NULL},
        {"pprof", junk, "-o", NULL},
        {"pprof", junk, "--at", "middle", NULL},
        {"pprof", junk, "--bogus", NULL},
        {"pprof", E2E_SAMPLES "/exact_counts", "-o", nodir, NULL},
        {"pprof", "--follow", junk, NULL},
        {"pprof", "--follow", junk, "--out-dir", nodir, NULL},
        {"pprof", "--follow", junk, "--out-dir", dir, "--every", "0", NULL},
        {"pprof", "--follow", junk, "--out-dir", dir, "--every", "10ms", NULL},
        {"pprof", junk, "--every", "1s", NULL},
        {"pprof", "--follow", junk, "--out-dir", dir, "--at", "peak", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL, *err = NULL;
        int st = e2e_heapprof(cases[i], &out, &err);
        cr_expect_eq(st, 2, "case %zu: status %d", i, st);
        assert_one_error_line(err);
        cr_expect_str_eq(out, "", "case %zu printed on stdout", i);
        free(out);
        free(err);
    }
    static const char *const left[] = {"junk.hpt", NULL};
    expect_only(dir, left);
    free(dir);
}

// Sums value index of every profile in dir (name -> value, as top_flat).
static json_t *sum_profiles(const char *dir, const char *index, size_t *n) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s/*.pb.gz", dir);
    FILE *ls = popen(cmd, "r");
    cr_assert(ls);
    json_t *sum = json_object();
    char line[4400];
    *n = 0;
    while (fgets(line, sizeof line, ls)) {
        line[strcspn(line, "\n")] = '\0';
        json_t *p = top_flat(index, line);
        const char *k;
        json_t *v;
        json_object_foreach(p, k, v) {
            json_t *old = json_object_get(sum, k);
            json_object_set_new(sum, k, json_integer(json_integer_value(v) +
                                                     (old ? json_integer_value(old) : 0)));
        }
        json_decref(p);
        (*n)++;
    }
    pclose(ls);
    return sum;
}

// The newest profile of dir (names sort by sequence number), malloc'd.
static char *last_profile(const char *dir) {
    char cmd[4400];
    snprintf(cmd, sizeof cmd, "ls %s/*.pb.gz | tail -n 1", dir);
    FILE *ls = popen(cmd, "r");
    char *line = calloc(1, 4400);
    cr_assert(ls && fgets(line, 4400, ls));
    line[strcspn(line, "\n")] = '\0';
    pclose(ls);
    return line;
}

// env: extra VAR=VALUE words for the program ("" for none).
static void follow_adds_up(const char *tag, const char *env) {
    char *dir = e2e_tmpdir(tag);
    char trace[4300], out[4300], script[16384];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(out, sizeof out, "%s/profiles", dir);
    cr_assert_eq(mkdir(out, 0700), 0);
    // the follower starts first and waits for the trace; the program allocates for 2 s
    snprintf(script, sizeof script,
             "'%s' pprof --follow '%s' --every 300ms --out-dir '%s' 2>'%s/follow.err' & f=$!\n"
             "LD_PRELOAD='%s' HEAPPROF_OUT='%s' %s '%s/slow_alloc' 2000 || exit 90\n"
             "wait $f",
             E2E_HEAPPROF, trace, out, dir, E2E_LIB, trace, env, E2E_PROGS);
    char *argv[] = {"/bin/sh", "-c", script, NULL};
    e2e_run_opts_t o = {.no_preload = true, .timeout_s = 120};
    char *err = NULL;
    int st = e2e_run(argv, &o, NULL, &err, NULL);
    cr_assert_eq(st, 0, "status %d: %s", st, err);
    free(err);
    json_t *r = e2e_report(trace);
    static const struct {
        const char *index, *key;
    } pairs[] = {{"alloc_space", "bytes"}, {"alloc_objects", "blocks"}};
    for (size_t i = 0; i < 2; i++) {
        size_t n = 0;
        json_t *sum = sum_profiles(out, pairs[i].index, &n);
        cr_expect_geq(n, 2, "%zu profiles", n);
        json_t *want = report_by_function(r, pairs[i].key);
        expect_same(pairs[i].index, sum, want);
        json_decref(sum);
        json_decref(want);
    }
    // the last profile read the whole trace: its inuse_* are the leaks at exit
    char *last = last_profile(out);
    json_t *p = top_flat("inuse_space", last), *want = report_by_function(r, "end_bytes");
    expect_same("inuse_space of the last profile", p, want);
    json_decref(p);
    json_decref(want);
    free(last);
    json_decref(r);
    static const char *const left[] = {"t.hpt", "profiles", "follow.err", NULL};
    expect_only(dir, left);
    free(dir);
}

Test(pprof, follow_writes_profiles_whose_alloc_adds_up_to_the_run, .timeout = 300) {
    follow_adds_up("pprof_follow", "");
}

// Sampled: each profile's alloc_* is the difference of the rounded running estimates, so they
// add up exactly to the estimates of the whole run (the report's, per function).
Test(pprof, follow_on_a_sampled_trace_adds_up_to_the_run_estimates, .timeout = 300) {
    follow_adds_up("pprof_follow_sampled", "HEAPPROF_SAMPLE_BYTES=4096 HEAPPROF_SAMPLE_SEED=3");
}

// value of one -top table summed over its rows
static double flat_total(json_t *m) {
    double t = 0;
    const char *k;
    json_t *v;
    json_object_foreach(m, k, v) t += (double)json_integer_value(v);
    return t;
}

// Sampled recording (docs/sampling.md): the same deterministic run, recorded in full and sampled
// at N = 512 KiB with a fixed seed; go tool pprof reads both profiles. Every function holding at
// least 5% of the exact figure is estimated within 10%, the total within 3% (the spread over 20
// seeds is measured by bench/sampled_accuracy.sh, not here).
Test(pprof, sampled_estimates_agree_with_the_full_trace, .timeout = 300) {
    char *dir = e2e_tmpdir("pprof_sampled");
    char prog[4300], full[4300], sampled[4300], full_pb[4300], sampled_pb[4300];
    snprintf(prog, sizeof prog, "%s/sampled_mix", E2E_PROGS);
    snprintf(full, sizeof full, "%s/full.hpt", dir);
    snprintf(sampled, sizeof sampled, "%s/sampled.hpt", dir);
    snprintf(full_pb, sizeof full_pb, "%s/full.pb.gz", dir);
    snprintf(sampled_pb, sizeof sampled_pb, "%s/sampled.pb.gz", dir);
    char *argv[] = {prog, NULL};
    // no bytes-touched fill: 8 GB of pattern would only slow the full run down
    static const char *const full_env[] = {"HEAPPROF_TOUCH=0", NULL};
    static const char *const sampled_env[] = {"HEAPPROF_TOUCH=0", "HEAPPROF_SAMPLE_BYTES=524288",
                                              "HEAPPROF_SAMPLE_SEED=1", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, full, full_env, NULL), 0);
    cr_assert_eq(e2e_run_preloaded(argv, sampled, sampled_env, NULL), 0);
    cr_assert_eq(pprof(full, full_pb, NULL, NULL), 0);
    cr_assert_eq(pprof(sampled, sampled_pb, NULL, NULL), 0);
    struct stat fs, ss;
    cr_assert(stat(full, &fs) == 0 && stat(sampled, &ss) == 0);
    cr_expect_lt(ss.st_size * 4, fs.st_size, "sampled trace %lld bytes, full %lld",
                 (long long)ss.st_size, (long long)fs.st_size);
    static const char *const indexes[] = {"alloc_space", "alloc_objects"};
    static const size_t want_big[] = {5, 3}; // sampled_mix.c: functions with 5% or more
    for (size_t i = 0; i < 2; i++) {
        json_t *exact = top_flat(indexes[i], full_pb), *est = top_flat(indexes[i], sampled_pb);
        double te = flat_total(exact), ts = flat_total(est);
        cr_expect(te > 0 && ts >= te * 0.97 && ts <= te * 1.03, "%s total: exact %.0f, estimate %.0f",
                  indexes[i], te, ts);
        size_t n_big = 0;
        const char *k;
        json_t *v;
        json_object_foreach(exact, k, v) {
            double x = (double)json_integer_value(v);
            if (x < te * 0.05)
                continue;
            n_big++;
            json_t *e = json_object_get(est, k);
            double y = e ? (double)json_integer_value(e) : 0;
            cr_expect(y >= x * 0.9 && y <= x * 1.1, "%s of %s: exact %.0f, estimate %.0f (%+.1f%%)",
                      indexes[i], k, x, y, (y / x - 1) * 100);
        }
        cr_expect_eq(n_big, want_big[i], "%s: %zu functions with 5%% or more", indexes[i], n_big);
        json_decref(exact);
        json_decref(est);
    }
    char *raw = go_pprof_raw(sampled_pb);
    cr_expect(strstr(raw, "every value is an estimate"), "no estimate comment: %.400s", raw);
    free(raw);
    free(dir);
}

// A sampled trace says so wherever its figures are shown, and the commands whose figures must be
// `heapprof run --sample-bytes N` records a sampled trace of interval N, as the variable does.
Test(pprof, run_sample_bytes_option_records_sampled, .timeout = 300) {
    char *dir = e2e_tmpdir("pprof_run_sample_bytes");
    char prog[4300], trace[4300];
    snprintf(prog, sizeof prog, "%s/sampled_mix", E2E_PROGS);
    snprintf(trace, sizeof trace, "%s/s.hpt", dir);
    const char *args[] = {"run", "-o", trace, "--sample-bytes", "64K", "--", prog, "500", NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(args, NULL, &err), 0, "%s", err ? err : "");
    free(err);
    json_t *st = e2e_stats(trace, NULL);
    cr_expect_eq(e2e_int(st, "sample_bytes"), 65536);
    json_decref(st);
    free(dir);
}

// exact refuse it with one line; a header that says "sampled" without an interval is damage.
Test(pprof, sampled_trace_is_marked_as_estimates_or_refused, .timeout = 300) {
    char *dir = e2e_tmpdir("pprof_sampled_marked");
    char prog[4300], trace[4300], out[4300];
    snprintf(prog, sizeof prog, "%s/sampled_mix", E2E_PROGS);
    snprintf(trace, sizeof trace, "%s/s.hpt", dir);
    snprintf(out, sizeof out, "%s/out", dir);
    char *argv[] = {prog, "500", NULL};
    static const char *const env[] = {"HEAPPROF_SAMPLE_BYTES=65536", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    static const char *const shown[][3] = {{"report", NULL}, {"stats", NULL}};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {shown[i][0], trace, NULL};
        char *o = e2e_heapprof_ok(args);
        cr_expect(strstr(o, "\nsampled    ESTIMATES: "), "%s: %.600s", shown[i][0], o);
        free(o);
    }
    json_t *st = e2e_stats(trace, NULL);
    cr_expect_eq(e2e_int(st, "sample_bytes"), 65536);
    json_decref(st);
    static const char *const refused[] = {"dhat", "massif", "view"};
    for (size_t i = 0; i < 3; i++) {
        const char *args[] = {refused[i], trace, "-o", out, NULL};
        char *err = NULL;
        cr_expect_eq(e2e_heapprof(args, NULL, &err), 2, "%s", refused[i]);
        assert_one_error_line(err);
        cr_expect(strstr(err, "is a sampled trace"), "%s: %s", refused[i], err);
        free(err);
    }
    // the flag without an interval: no weight can be computed
    FILE *f = fopen(trace, "r+b");
    cr_assert(f);
    static const uint8_t zero[4];
    cr_assert_eq(fseek(f, (long)offsetof(hpt_file_hdr_t, sample_bytes), SEEK_SET), 0);
    cr_assert_eq(fwrite(zero, 1, 4, f), 4);
    fclose(f);
    char *err = NULL;
    cr_expect_eq(pprof(trace, out, NULL, &err), 2);
    assert_one_error_line(err);
    cr_expect(strstr(err, "sampling interval of 0"), "%s", err);
    free(err);
    static const char *const left[] = {"s.hpt", NULL};
    expect_only(dir, left);
    free(dir);
}

Test(pprof, help, .timeout = 60) {
    const char *args[] = {"pprof", "--help", NULL};
    char *out = NULL;
    cr_expect_eq(e2e_heapprof(args, &out, NULL), 0);
    cr_expect(strncmp(out, "usage: heapprof pprof TRACE", 27) == 0, "%s", out);
    free(out);
}
