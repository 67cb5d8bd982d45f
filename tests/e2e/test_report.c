// SPDX-License-Identifier: MIT
// `heapprof report` and `heapprof dhat` on real traces: the report's totals are stats' totals
// and its sites add up to them; sites are named by the sample's own functions and lines; a
// stripped binary, a binary rebuilt after the run, a damaged trace and bad input each give a
// useful report or one error line with exit status 2, never a crash.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char *trace_of(const char *prog, const char *dir) {
    char *trace = malloc(4200);
    snprintf(trace, 4200, "%s/t.hpt", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    return trace;
}

static char *sample(const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", E2E_SAMPLES, name);
    return p;
}

static char *report_text(const char *trace, int *status, char **err) {
    const char *args[] = {"report", trace, NULL};
    char *out = NULL;
    *status = e2e_heapprof(args, &out, err);
    return out;
}

// one line on stderr, starting "heapprof: "
static void assert_one_error_line(const char *err) {
    cr_assert(strncmp(err, "heapprof: ", 10) == 0, "stderr: %s", err);
    const char *nl = strchr(err, '\n');
    cr_assert(nl && nl[1] == '\0', "more than one line on stderr: %s", err);
}

static long long sum_sites(json_t *r, const char *key) {
    long long sum = 0;
    size_t i;
    json_t *s;
    json_array_foreach(json_object_get(r, "sites"), i, s) sum += e2e_int(s, key);
    return sum;
}

Test(report, totals_are_stats_totals_and_sites_add_up, .timeout = 120) {
    char *prog = sample("exact_counts"), *dir = e2e_tmpdir("report_totals");
    char *trace = trace_of(prog, dir);
    json_t *r = e2e_report(trace), *s = e2e_stats(trace, NULL);
    json_t *t = json_object_get(r, "totals");
    static const char *const keys[] = {"blocks", "bytes", "frees", "peak_bytes", "peak_blocks",
                                       "end_bytes", "end_blocks", "threads", "events"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++)
        cr_expect_eq(e2e_int(t, keys[i]), e2e_int(s, keys[i]), "totals.%s", keys[i]);
    cr_expect_eq(sum_sites(r, "bytes"), e2e_int(t, "bytes"));
    cr_expect_eq(sum_sites(r, "blocks"), e2e_int(t, "blocks"));
    cr_expect_eq(sum_sites(r, "peak_bytes"), e2e_int(t, "peak_bytes"));
    cr_expect_eq(sum_sites(r, "peak_blocks"), e2e_int(t, "peak_blocks"));
    cr_expect_eq(sum_sites(r, "end_bytes"), e2e_int(t, "end_bytes"));
    cr_expect_eq(sum_sites(r, "end_blocks"), e2e_int(t, "end_blocks"));
    cr_expect_eq(json_array_size(json_object_get(r, "sites")), (size_t)e2e_int(t, "sites"));
    // the worker loop: 4 x 1000 malloc/free pairs, each freed before the next allocation
    size_t i;
    json_t *site;
    bool found = false;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        if (strcmp(json_string_value(json_object_get(site, "function")), "worker") == 0 &&
            e2e_int(site, "blocks") == 4000) {
            found = true;
            cr_expect_eq(e2e_int(site, "bytes"), 368000);
            cr_expect_eq(e2e_int(site, "temporary_blocks"), 4000);
            cr_expect_eq(e2e_int(site, "end_blocks"), 0);
            cr_expect(strstr(json_string_value(json_object_get(site, "location")),
                             "exact_counts.c:"));
        }
    }
    cr_expect(found, "no site 'worker' with 4000 blocks");
    json_decref(r);
    json_decref(s);
    free(trace);
    free(dir);
    free(prog);
}

Test(report, text_names_functions_and_lines, .timeout = 120) {
    char *prog = sample("exact_counts"), *dir = e2e_tmpdir("report_text");
    char *trace = trace_of(prog, dir);
    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(out, "Top sites by bytes allocated"));
    cr_expect(strstr(out, "Top sites by bytes still live at exit"));
    cr_expect(strstr(out, "Top sites by short-lived blocks")); // temporary ones included
    cr_expect(strstr(out, "phase_peak  samples/c/exact_counts.c:"), "%s", out);
    cr_expect(strstr(out, "worker  samples/c/exact_counts.c:"));
    cr_expect(strstr(out, "474,555") || strstr(out, "KiB"), "%s", out);
    cr_expect_eq(strcmp(err, ""), 0, "stderr not empty (no terminal): %s", err);
    free(out);
    free(err);
    free(trace);
    free(dir);
    free(prog);
}

Test(report, stripped_binary_gives_module_offsets, .timeout = 120) {
    char *dir = e2e_tmpdir("report_stripped");
    char prog[4200], cmd[16384];
    snprintf(prog, sizeof prog, "%s/exact_counts_stripped", dir);
    snprintf(cmd, sizeof cmd, "strip -o %s %s/exact_counts", prog, E2E_SAMPLES);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    char *trace = trace_of(prog, dir);
    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(out, "exact_counts_stripped+0x"), "%s", out);
    free(out);
    free(err);
    json_t *r = e2e_report(trace);
    cr_expect_eq(sum_sites(r, "blocks"), e2e_int(json_object_get(r, "totals"), "blocks"));
    json_decref(r);
    const char *args[] = {"dhat", trace, NULL};
    char *dj = NULL;
    cr_assert_eq(e2e_heapprof(args, &dj, NULL), 0);
    json_error_t je;
    json_t *d = json_loads(dj, 0, &je);
    cr_assert(d, "dhat output is not JSON: %s", je.text);
    cr_expect_gt(json_array_size(json_object_get(d, "pps")), 10);
    json_decref(d);
    free(dj);
    free(trace);
    free(dir);
}

#define EVIL_NAME "\x1b]0;PWNED\x07\x1b[41mRED\x1b[0m"
#define EVIL_SHOWN "\\x1b]0;PWNED\\x07\\x1b[41mRED\\x1b[0m"

// a control byte other than the line ends
static const char *control_in(const char *s) {
    for (; *s; s++)
        if (((unsigned char)*s < 0x20 && *s != '\n') || *s == 0x7f)
            return s;
    return NULL;
}

// A function named with a terminal escape (progs/hostile_term.c), run from an executable whose
// name has one too: the text of report and stats shows both as \xNN escapes and sends no control
// byte to the terminal; the JSON keeps the exact name (issue 17, item 7).
Test(report, terminal_escapes_in_names_are_shown_escaped, .timeout = 120) {
    char *dir = e2e_tmpdir("report_escapes");
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/hostile\x1b[41mexe", dir);
    FILE *in = fopen(E2E_PROGS "/hostile_term", "rb"), *copy = fopen(prog, "wb");
    cr_assert(in && copy);
    char buf[65536];
    for (size_t n; (n = fread(buf, 1, sizeof buf, in)) > 0;)
        cr_assert_eq(fwrite(buf, 1, n, copy), n);
    fclose(in);
    cr_assert_eq(fclose(copy), 0);
    cr_assert_eq(chmod(prog, 0755), 0);
    char *trace = trace_of(prog, dir);

    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(out, EVIL_SHOWN), "the function's name is not shown escaped: %s", out);
    cr_expect(strstr(out, "hostile\\x1b[41mexe"), "the executable is not shown escaped: %s", out);
    const char *c = control_in(out);
    cr_expect(!c, "report printed control byte 0x%02x: ...%.40s", c ? (unsigned char)*c : 0, c);
    free(out);
    free(err);

    const char *args[] = {"stats", trace, NULL};
    out = NULL;
    cr_assert_eq(e2e_heapprof(args, &out, NULL), 0);
    cr_expect(strstr(out, "hostile\\x1b[41mexe"), "stats: %s", out);
    c = control_in(out);
    cr_expect(!c, "stats printed control byte 0x%02x: ...%.40s", c ? (unsigned char)*c : 0, c);
    free(out);

    json_t *r = e2e_report(trace), *site;
    long long blocks = 0;
    size_t i;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        const char *f = json_string_value(json_object_get(site, "function"));
        if (f && strcmp(f, EVIL_NAME) == 0)
            blocks += e2e_int(site, "blocks");
    }
    cr_expect_eq(blocks, 101, "the JSON does not keep the exact name");
    json_decref(r);
    free(trace);
    free(dir);
}

Test(report, rebuilt_binary_is_not_misnamed, .timeout = 120) {
    char *dir = e2e_tmpdir("report_rebuilt");
    char prog[4200], cmd[16384];
    snprintf(prog, sizeof prog, "%s/prog", dir);
    snprintf(cmd, sizeof cmd, "cp %s/exact_counts %s", E2E_SAMPLES, prog);
    cr_assert_eq(system(cmd), 0);
    char *trace = trace_of(prog, dir);
    // another program under the same name: its symbols must not name the trace's addresses
    snprintf(cmd, sizeof cmd, "cp %s/vector_map %s", E2E_SAMPLES, prog);
    cr_assert_eq(system(cmd), 0);
    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(out, "rebuilt since the trace was recorded"), "%s", out);
    cr_expect(strstr(out, "prog+0x"), "%s", out);
    cr_expect_null(strstr(out, "exact_counts.c"), "%s", out);
    free(out);
    free(err);
    free(trace);
    free(dir);
}

Test(report, damaged_trace_is_reported_not_fatal, .timeout = 120) {
    char *prog = sample("vec_growth");
    if (access(prog, X_OK))
        cr_skip_test("vec_growth was not built (no rustc?)");
    char *dir = e2e_tmpdir("report_damaged");
    char *trace = trace_of(prog, dir);
    // overwrite 4 KiB in the middle of the file, then cut its tail
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
    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    cr_expect(strstr(out, "damage"), "%s", out);
    cr_expect(strstr(out, "Top sites by bytes allocated"));
    free(out);
    free(err);
    const char *args[] = {"dhat", trace, NULL};
    char *dj = NULL;
    cr_assert_eq(e2e_heapprof(args, &dj, NULL), 0);
    json_t *d = json_loads(dj, 0, NULL);
    cr_expect(d, "dhat output of a damaged trace is not JSON");
    json_decref(d);
    free(dj);
    free(trace);
    free(dir);
    free(prog);
}

Test(report, bad_input_is_one_line_and_status_2, .timeout = 60) {
    char *dir = e2e_tmpdir("report_bad");
    char junk[4200], empty[4200];
    snprintf(junk, sizeof junk, "%s/junk.hpt", dir);
    snprintf(empty, sizeof empty, "%s/empty.hpt", dir);
    FILE *f = fopen(junk, "w");
    fputs("this is not a heapprof trace at all, just some text\n", f);
    fclose(f);
    f = fopen(empty, "w");
    fclose(f);
    const char *const cases[][6] = {
        {"report", junk, NULL},
        {"report", empty, NULL},
        {"report", "/nonexistent/trace.hpt", NULL},
        {"report", NULL},
        {"report", "--top", "0", junk, NULL},
        {"report", "--bogus", junk, NULL},
        {"dhat", junk, NULL},
        {"dhat", empty, "-o", "/nonexistent/dir/out.json", NULL},
        {"dhat", NULL},
        {"dhat", junk, "-o", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *out = NULL, *err = NULL;
        int st = e2e_heapprof(cases[i], &out, &err);
        cr_expect_eq(st, 2, "case %zu (%s %s): status %d", i, cases[i][0],
                     cases[i][1] ? cases[i][1] : "", st);
        assert_one_error_line(err);
        cr_expect_eq(strcmp(out, ""), 0, "case %zu printed on stdout: %s", i, out);
        free(out);
        free(err);
    }
    struct stat sb;
    cr_expect_neq(stat("/nonexistent/dir/out.json.tmp", &sb), 0);
    free(dir);
}

Test(report, help_for_the_new_commands, .timeout = 60) {
    static const char *const cmds[] = {"report", "dhat"};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {cmds[i], "--help", NULL};
        char *out = NULL;
        cr_expect_eq(e2e_heapprof(args, &out, NULL), 0);
        char want[64];
        snprintf(want, sizeof want, "usage: heapprof %s", cmds[i]);
        cr_expect(strncmp(out, want, strlen(want)) == 0, "%s", out);
        free(out);
    }
    const char *args[] = {"--help", NULL};
    char *out = NULL;
    cr_expect_eq(e2e_heapprof(args, &out, NULL), 0);
    cr_expect(strstr(out, "report TRACE") && strstr(out, "dhat TRACE"), "%s", out);
    free(out);
}

// The function of the unstripped twin (nm -S) whose code holds offset, or "" (name: 64 bytes).
static void function_at(const char *prog, uint64_t offset, char *name) {
    char cmd[4300], line[512];
    snprintf(cmd, sizeof cmd, "nm -S --defined-only '%s'", prog);
    FILE *p = popen(cmd, "r");
    cr_assert_not_null(p);
    name[0] = '\0';
    while (fgets(line, sizeof line, p)) {
        unsigned long long at, size;
        char type, fn[64];
        if (sscanf(line, "%llx %llx %c %63s", &at, &size, &type, fn) == 4 &&
            (type == 'T' || type == 't') && offset >= at && offset < at + size)
            snprintf(name, 64, "%s", fn);
    }
    pclose(p);
}

// A stack frame of a site: i frames from the one that names it (0: that one, -1: its callee).
static json_t *site_frame(json_t *site, int i) {
    json_t *stack = json_object_get(site, "stack");
    long long at = e2e_int(site, "name_frame") + i;
    cr_assert(at >= 0 && (size_t)at < json_array_size(stack));
    return json_array_get(stack, (size_t)at);
}

// Blocks of the sites named fn (name_of: a site's name, NULL for its "function"), and how many.
typedef const char *(*site_name_fn)(json_t *site, char *buf);

static long long blocks_named(json_t *r, const char *fn, site_name_fn name_of, size_t *n_sites) {
    size_t i;
    json_t *site;
    long long blocks = 0;
    *n_sites = 0;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        char buf[64];
        const char *name = name_of(site, buf);
        if (strcmp(name, fn) == 0) {
            blocks += e2e_int(site, "blocks");
            ++*n_sites;
        }
    }
    return blocks;
}

static const char *site_function(json_t *site, char *buf) {
    (void)buf;
    return json_string_value(json_object_get(site, "function"));
}

// The wrapper program's sites past its wrappers (issue 22), whatever names them: count_a..d
// through counted_malloc (1-4 blocks), new_tracked (3 blocks from two callers), make_node's
// two sites; and no site named by a wrapper or by new_tracked's and make_node's callers.
static void expect_wrapper_sites(json_t *r, site_name_fn name_of) {
    static const char *const counted[] = {"count_a", "count_b", "count_c", "count_d"};
    static const char *const loads[] = {"load_alpha", "load_beta", "load_gamma"};
    size_t n;
    for (int i = 0; i < 3; i++)
        cr_expect_eq(blocks_named(r, loads[i], name_of, &n), 10 * (i + 1), "%s", loads[i]);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(blocks_named(r, counted[i], name_of, &n), i + 1, "%s", counted[i]);
    cr_expect_eq(blocks_named(r, "new_tracked", name_of, &n), 3);
    cr_expect_geq(n, 2, "new_tracked's callers' sites");
    cr_expect_eq(blocks_named(r, "make_node", name_of, &n), 9);
    cr_expect_eq(n, 2);
    cr_expect_eq(blocks_named(r, "new_config", name_of, &n), 1, "a forwarder with one caller");
    cr_expect_eq(n, 1);
    static const char *const never[] = {"xmalloc", "counted_malloc", "track_a", "track_b",
                                        "push_evens", "push_odds", "read_config"};
    for (size_t i = 0; i < sizeof never / sizeof *never; i++) {
        blocks_named(r, never[i], name_of, &n);
        cr_expect_eq(n, 0, "a site named %s", never[i]);
    }
}

static const char *stripped_site_function(json_t *site, char *buf) {
    json_t *f = site_frame(site, 0);
    // named by module and offset: nothing in the stripped file names a function
    const char *shown = json_string_value(json_object_get(f, "function"));
    if (strcmp(json_string_value(json_object_get(f, "module")), E2E_PROGS "/wrapper_stripped") == 0)
        cr_expect(strncmp(shown, "wrapper_stripped+0x", 19) == 0, "%s", shown);
    function_at(E2E_PROGS "/wrapper", (uint64_t)e2e_int(f, "module_offset"), buf);
    return buf;
}

// A program whose allocations go through an xmalloc-style wrapper from three functions, through
// make_node, a real site that fills its block, from two, and through two functions that hand the
// block to bookkeeping, one called by four functions, one by two (issue 22): by default xmalloc
// is found in the machine code, counted_malloc in it and in the trace's four callers, so the
// functions calling them name their sites, with exact counts; make_node and new_tracked stay
// sites. The same in the stripped binary, where each site's naming frame lies in those
// functions (told by the unstripped twin's symbols). --keep-wrappers names the sites by xmalloc
// again; --alloc-fn xmalloc does as detection does.
Test(report, allocator_wrappers_are_found_in_machine_code, .timeout = 120) {
    const char *fns[] = {"load_alpha", "load_beta", "load_gamma"};
    char *dir = e2e_tmpdir("report_wrapper");
    char *trace = trace_of(E2E_PROGS "/wrapper", dir);
    const char *plain[] = {"report", "--json", trace, NULL};
    const char *named[] = {"report", "--json", "--alloc-fn", "xmalloc", trace, NULL};
    const char *const *runs[] = {plain, named};
    for (int k = 0; k < 2; k++) {
        json_t *r = e2e_heapprof_json(runs[k]);
        for (int i = 0; i < 3; i++) {
            json_t *site = e2e_site(r, fns[i]);
            cr_expect_eq(e2e_int(site, "blocks"), 10 * (i + 1), "%s", fns[i]);
            cr_expect_eq(e2e_int(site, "bytes"), 1000 * (i + 1) * (i + 1), "%s", fns[i]);
            json_t *callee = site_frame(site, -1);
            cr_expect_str_eq(json_string_value(json_object_get(callee, "function")), "xmalloc");
            cr_expect_str_eq(json_string_value(json_object_get(callee, "kind")), "allocator");
        }
        expect_wrapper_sites(r, site_function);
        json_decref(r);
    }
    const char *kept[] = {"report", "--json", "--keep-wrappers", trace, NULL};
    json_t *r = e2e_heapprof_json(kept);
    size_t i_s, n_xmalloc = 0;
    json_t *site;
    json_array_foreach(json_object_get(r, "sites"), i_s, site) {
        n_xmalloc += strcmp(json_string_value(json_object_get(site, "function")), "xmalloc") == 0;
    }
    cr_expect_eq(n_xmalloc, 3);
    json_decref(r);

    // report --sizes: the three functions' sizes in their power-of-two buckets, and every
    // block in some bucket
    const char *sz[] = {"report", "--json", "--sizes", trace, NULL};
    r = e2e_heapprof_json(sz);
    json_t *buckets = json_object_get(r, "sizes"), *b;
    size_t i_b;
    long long all = 0, want_bytes[] = {1000, 4000, 9000}, want_min[] = {64, 128, 256};
    json_array_foreach(buckets, i_b, b) {
        all += e2e_int(b, "blocks");
        for (int i = 0; i < 3; i++)
            if (e2e_int(b, "min") == want_min[i]) {
                cr_expect_eq(e2e_int(b, "max"), 2 * want_min[i] - 1);
                cr_expect_eq(e2e_int(b, "blocks"), 10 * (i + 1));
                cr_expect_eq(e2e_int(b, "bytes"), want_bytes[i]);
                want_min[i] = -1;
            }
    }
    for (int i = 0; i < 3; i++)
        cr_expect_eq(want_min[i], -1, "no bucket for %s's blocks", fns[i]);
    cr_expect_eq(all, e2e_int(json_object_get(r, "totals"), "blocks"));
    json_decref(r);
    int st;
    char *err = NULL, *out = report_text(trace, &st, &err);
    cr_assert_eq(st, 0, "%s", err);
    for (int i = 0; i < 3; i++)
        cr_expect(strstr(out, fns[i]), "no '%s' in:\n%s", fns[i], out);
    cr_expect(strstr(out, "calls xmalloc"), "%s", out);
    free(out);
    free(err);

    // stripped (tests/e2e/CMakeLists.txt): no symbols at all, the same code at the same offsets
    char *sdir = e2e_tmpdir("report_wrapper_stripped"); // trace_of's name is per directory
    char *stripped = trace_of(E2E_PROGS "/wrapper_stripped", sdir);
    const char *sargs[] = {"report", "--json", stripped, NULL};
    r = e2e_heapprof_json(sargs);
    expect_wrapper_sites(r, stripped_site_function);
    json_array_foreach(json_object_get(r, "sites"), i_s, site) {
        char fn[64], callee_fn[64] = "";
        stripped_site_function(site, fn);
        if (e2e_int(site, "name_frame") > 0)
            function_at(E2E_PROGS "/wrapper",
                        (uint64_t)e2e_int(site_frame(site, -1), "module_offset"), callee_fn);
        for (int i = 0; i < 3; i++)
            if (strcmp(fn, fns[i]) == 0) {
                cr_expect_str_eq(callee_fn, "xmalloc");
                cr_expect_eq(e2e_int(site, "blocks"), 10 * (i + 1), "%s stripped", fns[i]);
            }
    }
    json_decref(r);
    free(stripped);
    free(sdir);
    free(trace);
    free(dir);
}

// heapprof massif writes Valgrind Massif's format: Valgrind's own ms_print reads it, and the
// peak it finds is heapprof's (the global peak, bytes as `stats` counts them) (issue 22).
Test(report, massif_output_reads_in_ms_print_with_our_peak, .timeout = 120) {
    if (system("command -v ms_print >/dev/null 2>&1") != 0)
        cr_skip_test("ms_print (valgrind) is not installed");
    char *dir = e2e_tmpdir("massif");
    char *trace = trace_of(E2E_PROGS "/wrapper", dir);
    char massif[4200], printed[4200], cmd[9000];
    snprintf(massif, sizeof massif, "%s/massif.out", dir);
    snprintf(printed, sizeof printed, "%s/ms_print.txt", dir);
    const char *args[] = {"massif", trace, "-o", massif, NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(args, NULL, &err), 0, "%s", err);
    free(err);
    snprintf(cmd, sizeof cmd, "ms_print '%s' > '%s' 2>&1", massif, printed);
    cr_assert_eq(system(cmd), 0, "ms_print refused %s", massif);
    FILE *f = fopen(printed, "r");
    cr_assert_not_null(f);
    char line[4096];
    long peak_num = -1;
    unsigned long long peak_total = 0;
    bool found = false;
    while (fgets(line, sizeof line, f)) {
        const char *d = strstr(line, "Detailed snapshots: [");
        if (d) {
            // "[99 (peak)]" or "[5, 10, 32 (peak), 51]": the number before " (peak)"
            const char *p = strstr(d, " (peak)");
            cr_assert_not_null(p, "%s", line);
            while (p > d && p[-1] >= '0' && p[-1] <= '9')
                p--;
            peak_num = strtol(p, NULL, 10);
            continue;
        }
        long num;
        char time[64], total[64];
        if (peak_num >= 0 && sscanf(line, " %ld %63s %63s", &num, time, total) == 3 &&
            num == peak_num) {
            for (char *s = total, *o = total;; s++)
                if (*s != ',' && !(*o++ = *s))
                    break;
            peak_total = strtoull(total, NULL, 10);
            found = true;
            break;
        }
    }
    fclose(f);
    cr_assert(found, "no peak snapshot row in ms_print's output (%s)", printed);
    json_t *s = e2e_stats(trace, NULL);
    cr_expect_eq((long long)peak_total, e2e_int(s, "peak_bytes"));
    json_decref(s);
    free(trace);
    free(dir);
}

// report --suppress FILE takes LeakSanitizer's suppressions: a rule matching a function of the
// stack (libc's stdio buffer here) takes that leak out of the ranking and counts it apart;
// the program's own leak stays; a line that is not a rule is one error line (issue 22).
Test(report, suppressed_leaks_are_counted_apart, .timeout = 120) {
    char *dir = e2e_tmpdir("suppress");
    char *trace = trace_of(E2E_PROGS "/wrapper", dir);
    char rules[4200], bad[4200];
    snprintf(rules, sizeof rules, "%s/lsan.supp", dir);
    snprintf(bad, sizeof bad, "%s/bad.supp", dir);
    FILE *f = fopen(rules, "w");
    // (a module rule for libc would take every leak: every stack has __libc_start_main)
    cr_assert(f && fputs("# known: stdio's buffer\n\nleak:_IO_file_doallocate\nleak:^no_such_fn$\n",
                         f) >= 0 &&
              fclose(f) == 0);
    f = fopen(bad, "w");
    cr_assert(f && fputs("leak:ok\nrace:nope\n", f) >= 0 && fclose(f) == 0);
    const char *args[] = {"report", "--json", "--suppress", rules, trace, NULL};
    json_t *r = e2e_heapprof_json(args);
    json_t *sup = json_object_get(r, "suppressions");
    cr_assert_not_null(sup);
    cr_expect_eq(e2e_int(sup, "rules"), 2);
    long long end = e2e_int(json_object_get(r, "totals"), "end_bytes");
    cr_expect_eq(e2e_int(sup, "end_bytes"), end - 777, "all but leak_me's 777 bytes suppressed");
    json_t *top = json_object_get(json_object_get(r, "top"), "end_bytes");
    cr_assert_eq(json_array_size(top), 1);
    json_t *site = json_array_get(json_object_get(r, "sites"), json_integer_value(json_array_get(top, 0)));
    cr_expect_str_eq(json_string_value(json_object_get(site, "function")), "leak_me");
    cr_expect_eq(e2e_int(site, "end_bytes"), 777);
    json_decref(r);
    const char *bad_args[] = {"report", "--suppress", bad, trace, NULL};
    char *err = NULL;
    cr_expect_eq(e2e_heapprof(bad_args, NULL, &err), 2);
    cr_expect(err && strstr(err, "bad.supp:2: not a suppression"), "%s", err);
    free(err);
    free(trace);
    free(dir);
}

// Source paths are absolute (the unit's DW_AT_comp_dir joined to a relative name, "." and ".."
// resolved): Rust's standard library names its files relative to its build directory, and two
// crates' src/lib.rs must not read the same (issue 22). Checked on the program's own module.
Test(report, source_paths_are_absolute, .timeout = 120) {
    char *prog = sample("vec_growth");
    FILE *probe = fopen(prog, "rb");
    if (!probe) {
        free(prog);
        cr_skip_test("no Rust sample (rustc not found at configure time)");
    }
    fclose(probe);
    char *dir = e2e_tmpdir("abs_paths");
    char *trace = trace_of(prog, dir);
    json_t *r = e2e_report(trace);
    size_t i, k, n_files = 0;
    json_t *site, *frame;
    json_array_foreach(json_object_get(r, "sites"), i, site) {
        json_array_foreach(json_object_get(site, "stack"), k, frame) {
            const char *file = json_string_value(json_object_get(frame, "file"));
            const char *mod = json_string_value(json_object_get(frame, "module"));
            // the program's own code and the standard library built into it; a system library's
            // debug info may name its build directory relatively itself (glibc's "./csu"):
            // nothing there to make absolute
            if (!file || !mod || strcmp(mod, prog) != 0)
                continue;
            n_files++;
            cr_expect(file[0] == '/' && !strstr(file, "/./") && !strstr(file, "/../"),
                      "site %zu frame %zu: %s", i, k, file);
        }
    }
    cr_expect_gt(n_files, 0);
    json_decref(r);
    free(trace);
    free(dir);
    free(prog);
}

// report --filter FUNC counts only the allocations with FUNC on their stack: totals, peak and
// sites alike; a shell pattern takes several functions (issue 22).
Test(report, filter_keeps_allocations_through_a_function, .timeout = 120) {
    char *dir = e2e_tmpdir("filter_fn");
    char *trace = trace_of(E2E_PROGS "/wrapper", dir);
    const char *beta[] = {"report", "--json", "--filter", "load_beta", trace, NULL};
    json_t *r = e2e_heapprof_json(beta);
    json_t *t = json_object_get(r, "totals");
    cr_expect_eq(e2e_int(t, "blocks"), 20);
    cr_expect_eq(e2e_int(t, "bytes"), 4000);
    cr_expect_eq(e2e_int(t, "peak_bytes"), 4000);
    cr_expect_eq(json_array_size(json_object_get(r, "sites")), 1);
    cr_expect_str_eq(json_string_value(json_object_get(r, "filter_function")), "load_beta");
    json_decref(r);
    const char *all[] = {"report", "--json", "--filter", "load_*", trace, NULL};
    r = e2e_heapprof_json(all);
    t = json_object_get(r, "totals");
    cr_expect_eq(e2e_int(t, "blocks"), 60);
    cr_expect_eq(e2e_int(t, "bytes"), 14000);
    json_decref(r);
    free(trace);
    free(dir);
}
