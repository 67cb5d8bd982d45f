// SPDX-License-Identifier: MIT
// Allocators the loader does not route through the shim (issue #21): a Rust #[global_allocator]
// over jemalloc linked statically and over mimalloc imported from its shared library, a C
// program whose malloc is jemalloc's in the executable, threads that allocate at once, a
// program whose own malloc cannot be patched, an ordinary program (no word), a static binary.
// Each program counts what its workload asks of its allocator and prints the counts: the trace
// must hold exactly those (report --filter keeps the workload's allocations only).
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct counts {
    long long allocs, reallocs, frees, bytes; // bytes: -1 when the program does not print them
} counts_t;

static counts_t parse_counts(const char *out) {
    counts_t c = {-1, -1, -1, -1};
    const char *p = strstr(out, "allocs=");
    cr_assert(p, "no counts in the program's output: %s", out);
    sscanf(p, "allocs=%lld reallocs=%lld frees=%lld bytes=%lld", &c.allocs, &c.reallocs, &c.frees,
           &c.bytes);
    cr_assert(c.allocs >= 0 && c.reallocs >= 0 && c.frees >= 0, "bad counts: %s", out);
    return c;
}

typedef struct run {
    char *dir, trace[4096];
    char *out, *err; // under the shim
    int status;
    counts_t c;
} run_t;

// Runs argv without and with the shim (env: extra settings for both runs): its output and exit
// status must be the same both times.
static run_t run_both(char *const argv[], const char *const *env, int want_status) {
    run_t r = {0};
    r.dir = e2e_tmpdir("static_alloc");
    snprintf(r.trace, sizeof r.trace, "%s/t.hpt", r.dir);
    e2e_run_opts_t plain = {.no_preload = true, .env = env, .timeout_s = 120};
    char *ref_out, *ref_err;
    int ref = e2e_run(argv, &plain, &ref_out, &ref_err, NULL);
    cr_assert_eq(ref, want_status, "%s without the shim: status %d: %s", argv[0], ref, ref_err);
    e2e_run_opts_t o = {.out_template = r.trace, .env = env, .timeout_s = 120};
    r.status = e2e_run(argv, &o, &r.out, &r.err, NULL);
    cr_assert_eq(r.status, ref, "exit status %d under the shim, %d without: %s", r.status, ref,
                 r.err);
    cr_assert_str_eq(r.out, ref_out, "the program's output changed under the shim");
    free(ref_out);
    free(ref_err);
    r.c = parse_counts(r.out);
    return r;
}

static void run_free(run_t *r) {
    free(r->out);
    free(r->err);
    free(r->dir);
}

static json_t *report_of(const char *trace, const char *filter) {
    const char *args[] = {"report", "--json", "--filter", filter, trace, NULL};
    return e2e_heapprof_json(args);
}

// The ALLOCATOR finding of family fam with status st ("patched", "interposed", "unhooked").
static bool has_allocator(json_t *totals, const char *st, const char *fam) {
    json_t *a;
    size_t i;
    json_array_foreach(json_object_get(totals, "allocators"), i, a) {
        if (!strcmp(json_string_value(json_object_get(a, "status")), st) &&
            !strcmp(json_string_value(json_object_get(a, "family")), fam))
            return true;
    }
    return false;
}

static void expect_exact(json_t *rep, const counts_t *c) {
    json_t *t = json_object_get(rep, "totals");
    // a realloc is a new block (DHAT's counting)
    cr_expect_eq(e2e_int(t, "blocks"), c->allocs + c->reallocs, "blocks");
    cr_expect_eq(e2e_int(t, "frees"), c->frees, "frees");
    if (c->bytes >= 0)
        cr_expect_eq(e2e_int(t, "bytes"), c->bytes, "bytes");
}

static void expect_growth_advice(json_t *rep, const char *fn) {
    json_t *g;
    size_t i;
    bool found = false;
    json_array_foreach(json_object_get(rep, "growth"), i, g) {
        const char *f = json_string_value(json_object_get(g, "function"));
        const char *adv = json_string_value(json_object_get(g, "advice"));
        if (f && !strcmp(f, fn) && adv && strstr(adv, "with_capacity"))
            found = true;
    }
    cr_expect(found, "no with_capacity advice at %s", fn);
}

static void expect_rust_sites(json_t *rep) {
    cr_expect_eq(e2e_int(e2e_site(rep, "alloc_counting::small_boxes"), "blocks"), 1000);
    cr_expect_eq(e2e_int(e2e_site(rep, "alloc_counting::zeroed_pages"), "blocks"), 20);
    cr_expect_eq(e2e_int(e2e_site(rep, "alloc_counting::aligned_lines"), "blocks"), 30);
    expect_growth_advice(rep, "alloc_counting::grow_vec");
}

Test(static_alloc, rust_global_allocator_over_static_jemalloc_is_counted_exactly) {
    char *argv[] = {E2E_PROGS "/rust_je_counting", NULL};
    run_t r = run_both(argv, NULL, 0);
    cr_expect_null(strstr(r.err, "warning"), "%s", r.err);
    json_t *rep = report_of(r.trace, "alloc_counting::workload");
    expect_exact(rep, &r.c);
    expect_rust_sites(rep);
    json_t *t = json_object_get(rep, "totals");
    cr_expect(has_allocator(t, "patched", "Rust #[global_allocator]"));
    cr_expect(has_allocator(t, "patched", "jemalloc"));
    json_decref(rep);
    run_free(&r);
}

Test(static_alloc, rust_global_allocator_over_shared_mimalloc_is_counted_exactly) {
    char *argv[] = {E2E_PROGS "/rust_mi_counting", NULL};
    run_t r = run_both(argv, NULL, 0);
    cr_expect_null(strstr(r.err, "warning"), "%s", r.err);
    json_t *rep = report_of(r.trace, "alloc_counting::workload");
    expect_exact(rep, &r.c);
    expect_rust_sites(rep);
    cr_expect(has_allocator(json_object_get(rep, "totals"), "interposed", "mimalloc"));
    json_decref(rep);
    run_free(&r);
}

Test(static_alloc, unwinder_check_finds_no_difference_in_hooked_allocators) {
    char *argv[] = {E2E_PROGS "/rust_je_counting", NULL};
    const char *env[] = {"HEAPPROF_UNWIND=check", NULL};
    run_t r = run_both(argv, env, 0);
    cr_expect(strstr(r.err, "stacks, 0 differ from libunwind"), "%s", r.err);
    run_free(&r);
}

// je_static's workload, counted exactly, through jemalloc's patched entries; the run for more
// checks (run_free).
static run_t je_workload_counted_exactly(const char *prog) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", E2E_PROGS, prog);
    char *argv[] = {path, NULL};
    run_t r = run_both(argv, NULL, 3);
    json_t *rep = report_of(r.trace, "workload");
    expect_exact(rep, &r.c);
    cr_expect_eq(e2e_int(e2e_site(rep, "plain_blocks"), "blocks"), 1000, "%s", prog);
    cr_expect_eq(e2e_int(e2e_site(rep, "zeroed_arrays"), "blocks"), 100, "%s", prog);
    cr_expect_eq(e2e_int(e2e_site(rep, "grown_buffer"), "blocks"), 50, "%s", prog);
    // mallocx + rallocx
    cr_expect_eq(e2e_int(e2e_site(rep, "extended_api"), "blocks"), 20, "%s", prog);
    cr_expect(has_allocator(json_object_get(rep, "totals"), "patched", "jemalloc"), "%s", prog);
    json_decref(rep);
    return r;
}

Test(static_alloc, c_program_with_jemalloc_linked_in_is_counted_exactly) {
    run_t r = je_workload_counted_exactly("je_static");
    run_free(&r);
}

// The same program with its allocator exported, as rustc's is: the shim arms the entries while
// the loader relocates it (early_hook.c), and here no library calls them before the shim's
// constructor, whose set-up puts them back before allocscan patches them. (Set-up's own first
// allocation through the executable's malloc puts them back too, so this run would pass without
// that step; it guards the path where nothing else does.)
Test(static_alloc, exported_jemalloc_first_called_after_the_constructor_is_counted_exactly) {
    run_t r = je_workload_counted_exactly("je_static_exported");
    // jemalloc's blocks are not filled, so not measured: stats says so instead of "0 freed"
    const char *args[] = {"stats", r.trace, NULL};
    char *text = e2e_heapprof_ok(args);
    cr_expect(strstr(text, "freed blocks not measured (heapprof fills only"), "%s", text);
    free(text);
    run_free(&r);
}

Test(static_alloc, prefixed_jemalloc_beside_libc_malloc_lands_in_one_trace) {
    char *argv[] = {E2E_PROGS "/je_prefixed", NULL};
    run_t r = run_both(argv, NULL, 0);
    json_t *rep = report_of(r.trace, "both");
    expect_exact(rep, &r.c);
    // the libc blocks keep their bytes-touched measure; jemalloc's are not libc's to measure
    const char *lb = strstr(r.out, "libc_blocks=");
    cr_assert(lb);
    json_t *touch = json_object_get(json_object_get(rep, "totals"), "touch");
    cr_expect_eq(e2e_int(touch, "blocks"), atoll(lb + 12));
    cr_expect(has_allocator(json_object_get(rep, "totals"), "patched", "jemalloc"));
    json_decref(rep);
    run_free(&r);
}

// The bytes of every site of report whose function is fn.
static long long site_bytes(json_t *report, const char *fn) {
    json_t *s;
    size_t i;
    long long bytes = 0;
    json_array_foreach(json_object_get(report, "sites"), i, s) {
        const char *f = json_string_value(json_object_get(s, "function"));
        if (f && strcmp(f, fn) == 0)
            bytes += e2e_int(s, "bytes");
    }
    return bytes;
}

// tc_static.cpp's workload under prog, counted exactly: its sites of each form of new, C's
// malloc, the allocator found (family, "patched" or "interposed"), and nothing freed that was
// not seen made (libtcmalloc's constructor frees two blocks of its own malloc through the
// function that is also its operator delete: 2 before its malloc family was hooked along with
// its C++ names). The run, for more checks (run_free).
static run_t cxx_workload_counted_exactly(const char *prog, const char *family, const char *how) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", E2E_PROGS, prog);
    char *argv[] = {path, NULL};
    run_t r = run_both(argv, NULL, 0);
    json_t *rep = report_of(r.trace, "workload");
    expect_exact(rep, &r.c);
    cr_expect_eq(e2e_int(e2e_site(rep, "nodes"), "blocks"), 1000, "%s", prog); // operator new
    cr_expect_eq(e2e_int(e2e_site(rep, "arrays"), "blocks"), 100, "%s", prog); // operator new[]
    cr_expect_eq(e2e_sites_blocks(rep, "aligned"), 600, "%s", prog); // new(align_val_t)
    cr_expect_eq(e2e_sites_blocks(rep, "nothrow"), 800, "%s", prog); // new(nothrow), aligned too
    cr_expect_eq(e2e_int(e2e_site(rep, "c_blocks"), "blocks"), 200, "%s", prog); // malloc
    // valloc, and pvalloc where the allocator has one (tc_static.cpp), at the size asked for:
    // not through the allocator's inner memalign (tcmalloc's pvalloc, rounded to pages)
    cr_expect_geq(e2e_sites_blocks(rep, "page_blocks"), 50, "%s", prog);
    const char *pb = strstr(r.out, "page_bytes=");
    cr_assert(pb, "%s: %s", prog, r.out);
    cr_expect_eq(site_bytes(rep, "page_blocks"), atoll(pb + 11), "%s", prog);
    cr_expect(has_allocator(json_object_get(rep, "totals"), how, family), "%s", prog);
    json_decref(rep);
    json_t *s = e2e_stats(r.trace, NULL);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "unknown_frees"), 0, "%s", prog);
    json_decref(s);
    return r;
}

Test(static_alloc, cpp_program_with_tcmalloc_linked_in_is_counted_exactly) {
    run_t r = cxx_workload_counted_exactly("tc_static", "tcmalloc", "patched");
    run_free(&r);
}

// The same program with libjemalloc.a: its sized operator delete, C++'s `delete` of every
// complete type, starts with a conditional branch (test, je); before the trampoline moved such
// branches it was refused, and every block a sized delete freed stayed live in the trace.
Test(static_alloc, cpp_program_with_jemalloc_linked_in_is_counted_exactly) {
    run_t r = cxx_workload_counted_exactly("cxx_je_static", "jemalloc", "patched");
    cr_expect(!strstr(r.err, "warning"), "%s", r.err);
    json_t *s = e2e_stats(r.trace, NULL);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "sized_free_mismatches"), 0);
    json_decref(s);
    run_free(&r);
}

// The same program with no allocator of its own, and a library with a malloc preloaded ahead of
// the shim (LD_PRELOAD="LIB libheapprof.so"): the loader binds every malloc to the library's,
// never to the shim's. Before the library's malloc family was hooked, the C blocks were missing
// without a word (a C program so run: 0 blocks of 100,002).
static void preloaded_ahead(const char *lib, const char *family) {
    char *argv[] = {E2E_PROGS "/cxx_plain", NULL};
    char trace[4096], ref_preload[4096], preload[8192];
    char *dir = e2e_tmpdir("static_alloc");
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(ref_preload, sizeof ref_preload, "LD_PRELOAD=%s", lib);
    snprintf(preload, sizeof preload, "LD_PRELOAD=%s %s", lib, E2E_LIB);
    const char *ref_env[] = {ref_preload, NULL}, *env[] = {preload, NULL};
    e2e_run_opts_t ref = {.no_preload = true, .env = ref_env, .timeout_s = 120};
    e2e_run_opts_t o = {.no_preload = true, .env = env, .out_template = trace, .timeout_s = 120};
    char *ref_out, *out, *err;
    cr_assert_eq(e2e_run(argv, &ref, &ref_out, NULL, NULL), 0, "%s", lib);
    cr_assert_eq(e2e_run(argv, &o, &out, &err, NULL), 0, "%s: %s", lib, err);
    cr_assert_str_eq(out, ref_out);
    counts_t c = parse_counts(out);
    json_t *rep = report_of(trace, "workload");
    expect_exact(rep, &c);
    cr_expect_eq(e2e_int(e2e_site(rep, "c_blocks"), "blocks"), 200, "%s", lib); // malloc
    cr_expect(has_allocator(json_object_get(rep, "totals"), "patched", family), "%s", lib);
    json_decref(rep);
    json_t *s = e2e_stats(trace, NULL);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "unknown_frees"), 0, "%s", lib);
    // and all of the process's, as under the shim alone: the library's entries are armed before
    // any constructor runs (early_hook.c), so libstdc++'s first block (its 72 KB emergency
    // pool, made in its constructor) is there too
    char alone[4096];
    snprintf(alone, sizeof alone, "%s/alone.hpt", dir);
    e2e_run_opts_t a = {.out_template = alone, .timeout_s = 120};
    cr_assert_eq(e2e_run(argv, &a, NULL, NULL, NULL), 0);
    json_t *sa = e2e_stats(alone, NULL);
    cr_expect_eq(e2e_int(s, "blocks"), e2e_int(sa, "blocks"), "%s", lib);
    cr_expect_eq(e2e_int(s, "bytes"), e2e_int(sa, "bytes"), "%s", lib);
    json_decref(sa);
    json_decref(s);
    free(ref_out);
    free(out);
    free(err);
    free(dir);
}

Test(static_alloc, an_allocator_preloaded_ahead_of_the_shim_is_counted_exactly) {
    preloaded_ahead(E2E_JEMALLOC_SO, "jemalloc");
}

// glibc's libc_malloc_debug.so defines malloc@GLIBC_2.2.5 only, not as the default version:
// programs bind to it, an unversioned dlsym does not find it (allocscan.c's program_malloc).
Test(static_alloc, glibcs_malloc_debug_preloaded_ahead_of_the_shim_is_counted_exactly) {
    preloaded_ahead(E2E_MALLOC_DEBUG_SO, "malloc of a library loaded ahead of heapprof");
}

// The same C++ program with tcmalloc or mimalloc as a shared library linked ahead of libstdc++:
// the loader binds its `new` and `delete` to the library's, which never pass through a malloc,
// so the shim saw none of those blocks (2 of 2,002 in a program of 1,000 vectors) until it
// hooked them in the library.
static void cxx_with_shared_allocator(const char *prog, const char *family, const char *how) {
    run_t r = cxx_workload_counted_exactly(prog, family, how);
    run_free(&r);
}

Test(static_alloc, cpp_program_with_shared_tcmalloc_is_counted_exactly) {
    cxx_with_shared_allocator("cxx_tcmalloc_shared", "tcmalloc", "patched");
}

Test(static_alloc, cpp_program_with_shared_mimalloc_is_counted_exactly) {
    cxx_with_shared_allocator("cxx_mimalloc_shared", "mimalloc", "patched");
}

// libjemalloc's sized operator delete starts with a conditional branch, which the trampoline
// moves (it was refused before session 25, and the GOT slots below were the way in).
Test(static_alloc, cpp_program_with_shared_jemalloc_is_counted_exactly) {
    cxx_with_shared_allocator("cxx_jemalloc_shared", "jemalloc", "patched");
}

// got_alloc's sized delete starts with a jrcxz, which patching refuses: all six are reached
// through their callers' GOT slots instead (its blocks come from __libc_malloc, which the shim
// does not see: only the hooks can count them).
Test(static_alloc, cpp_program_whose_allocator_library_cannot_be_patched_is_counted_exactly) {
    cxx_with_shared_allocator("cxx_got_alloc_shared", "tcmalloc", "interposed");
}

Test(static_alloc, threads_allocating_at_once_after_the_patch_are_counted_exactly) {
    char *argv[] = {E2E_PROGS "/je_static", "threads", NULL};
    run_t r = run_both(argv, NULL, 3);
    json_t *rep = report_of(r.trace, "thread_churn");
    expect_exact(rep, &r.c);
    json_decref(rep);
    run_free(&r);
}

// sdallocx names the block's size: the 7 of 35 frees built to name a wrong one are counted
// (the program counts them itself), and every other hooked sized free (the Rust dealloc's
// Layout, jemalloc's own use) names the size the block was allocated with.
Test(static_alloc, sized_frees_naming_another_size_are_counted_exactly) {
    char *argv[] = {E2E_PROGS "/je_static", "sized", NULL};
    run_t r = run_both(argv, NULL, 3);
    long long sized = -1, mismatched = -1;
    const char *p = strstr(r.out, "sized=");
    cr_assert(p && sscanf(p, "sized=%lld mismatched=%lld", &sized, &mismatched) == 2, "%s",
              r.out);
    cr_assert_eq(sized, 35);
    cr_assert_eq(mismatched, 7);
    json_t *s = e2e_stats(r.trace, NULL);
    json_t *an = json_object_get(s, "anomalies");
    cr_expect_eq(e2e_int(an, "sized_frees"), sized);
    cr_expect_eq(e2e_int(an, "sized_free_mismatches"), mismatched);
    cr_expect_eq(e2e_int(an, "sized_unknown_frees"), 0);
    json_decref(s);
    const char *args[] = {"stats", r.trace, NULL};
    char *text = e2e_heapprof_ok(args);
    cr_expect(strstr(text, "7 of 35 sized frees named a size other than their block's (the "
                           "first: a 48-byte block freed as 40 bytes)"),
              "%s", text);
    free(text);
    run_free(&r);
}

Test(static_alloc, rust_deallocs_name_the_size_they_were_allocated_with) {
    char *argv[] = {E2E_PROGS "/rust_je_counting", NULL};
    run_t r = run_both(argv, NULL, 0);
    json_t *s = e2e_stats(r.trace, NULL);
    json_t *an = json_object_get(s, "anomalies");
    // every workload free is a Rust dealloc (or the realloc's), each with its Layout
    cr_expect_geq(e2e_int(an, "sized_frees"), r.c.frees);
    cr_expect_eq(e2e_int(an, "sized_free_mismatches"), 0);
    json_decref(s);
    run_free(&r);
}

// jemalloc linked into a plugin loaded by dlopen after start: hooked before dlopen returned, so
// two threads calling it at once are counted exactly.
Test(static_alloc, an_allocator_in_a_dlopened_library_is_hooked_and_counted_exactly) {
    char *argv[] = {E2E_PROGS "/dlopen_je_host", E2E_PROGS "/libje_plugin.so", NULL};
    // jemalloc's thread-locals are initial-exec: a library loaded later needs room for them in
    // the static TLS block, more than glibc keeps by default (with or without heapprof)
    const char *env[] = {"GLIBC_TUNABLES=glibc.rtld.optional_static_tls=16384", NULL};
    run_t r = run_both(argv, env, 0);
    cr_expect_null(strstr(r.err, "warning"), "%s", r.err);
    cr_expect(strstr(r.err, "jemalloc: mallocx, rallocx, sdallocx, dallocx in ") &&
                  strstr(r.err, "libje_plugin.so, patched at their entry"),
              "%s", r.err);
    json_t *rep = report_of(r.trace, "je_plugin_churn");
    expect_exact(rep, &r.c);
    cr_expect_eq(e2e_int(e2e_site(rep, "je_plugin_churn"), "blocks"), r.c.allocs + r.c.reallocs);
    cr_expect(has_allocator(json_object_get(rep, "totals"), "patched", "jemalloc"));
    json_decref(rep);
    // the plugin's constructor ran inside dlopen, after the hook: its 10 blocks are there
    rep = report_of(r.trace, "je_plugin_init");
    cr_expect_eq(e2e_int(json_object_get(rep, "totals"), "blocks"), 10);
    json_decref(rep);
    json_t *s = e2e_stats(r.trace, NULL);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "sized_frees"), r.c.frees);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "sized_free_mismatches"), 0);
    json_decref(s);
    run_free(&r);
}

Test(static_alloc, an_allocator_that_cannot_be_hooked_is_reported) {
    char *argv[] = {E2E_PROGS "/own_malloc", NULL};
    run_t r = run_both(argv, NULL, 0);
    cr_expect(strstr(r.err, "heapprof: warning: malloc defined by the program: ") &&
                  strstr(r.err, "malloc: a conditional branch among its first instructions") &&
                  strstr(r.err, "missing from the trace"),
              "%s", r.err);
    cr_expect(strstr(r.err, "_ZdlPvm: the same function under another name that "
                            "takes other arguments"),
              "%s", r.err);
    const char *args[] = {"stats", r.trace, NULL};
    char *stats = e2e_heapprof_ok(args);
    cr_expect(strstr(stats, "allocator  NOT HOOKED malloc defined by the program"), "%s", stats);
    cr_expect(strstr(stats, "allocator  hooked malloc defined by the program: calloc"), "%s",
              stats);
    free(stats);
    // calloc's entry could be patched: its 100 blocks are there
    json_t *rep = report_of(r.trace, "main");
    cr_expect_eq(e2e_int(json_object_get(rep, "totals"), "blocks"), 100);
    json_decref(rep);
    run_free(&r);
}

Test(static_alloc, an_ordinary_program_gets_no_word) {
    char *dir = e2e_tmpdir("static_alloc");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_SAMPLES "/exact_counts", NULL};
    e2e_run_opts_t o = {.out_template = trace, .timeout_s = 120};
    char *out, *err;
    cr_assert_eq(e2e_run(argv, &o, &out, &err, NULL), 0, "%s", err);
    cr_expect_null(strstr(err, "warning"), "%s", err);
    cr_expect_null(strstr(err, "patched"), "%s", err);
    json_t *s = e2e_stats(trace, NULL);
    json_t *al = json_object_get(s, "allocators");
    cr_expect(json_is_array(al) && json_array_size(al) == 0, "the scan ran and found nothing");
    const char *args[] = {"stats", trace, NULL};
    char *text = e2e_heapprof_ok(args);
    cr_expect_null(strstr(text, "allocator "), "%s", text);
    free(text);
    json_decref(s);
    free(out);
    free(err);
    free(dir);
}

Test(static_alloc, heapprof_run_refuses_a_static_binary_in_one_line) {
    const char *args[] = {"run", "--", E2E_PROGS "/static_hello", NULL};
    char *out, *err;
    cr_expect_eq(e2e_heapprof(args, &out, &err), 2);
    cr_expect(strstr(err, "is statically linked"), "%s", err);
    cr_expect_eq(strchr(err, '\n'), strrchr(err, '\n'), "one line: %s", err);
    cr_expect_null(strstr(out, "hello"), "the program must not have run");
    free(out);
    free(err);
}
