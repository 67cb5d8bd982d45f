// SPDX-License-Identifier: MIT
// Growth chains and short-lived blocks in `heapprof report` (docs/growth.md): exact chain counts on
// progs/growth.c, no chain from its unrelated allocate/free pairs, and the Vec / String / HashMap /
// std::vector / std::unordered_map growth sites of the samples named by their functions with advice
// naming the right API.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static json_t *report_of(const char *prog, const char *tag) {
    char *dir = e2e_tmpdir(tag);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0, "%s failed", prog);
    free(dir);
    return e2e_report(trace);
}

static const char *str(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    cr_assert(s, "no string '%s'", key);
    return s;
}

// the growth entries of function fn, in *n; the first of them returned (NULL if none)
static json_t *growth_of(json_t *r, const char *fn, size_t *n) {
    json_t *first = NULL, *g;
    size_t i;
    *n = 0;
    json_array_foreach(json_object_get(r, "growth"), i, g) {
        if (strcmp(str(g, "function"), fn) == 0) {
            if (!first)
                first = g;
            ++*n;
        }
    }
    return first;
}

static json_t *growth_one(json_t *r, const char *fn) {
    size_t n;
    json_t *g = growth_of(r, fn, &n);
    cr_assert(g, "no growth site '%s'", fn);
    cr_assert_eq(n, 1, "%zu growth sites '%s'", n, fn);
    return g;
}

static long long final_size(json_t *g, const char *key) {
    return e2e_int(json_object_get(g, "final_size"), key);
}

static char *path_of(const char *dir, const char *name) {
    char *p = malloc(4096);
    snprintf(p, 4096, "%s/%s", dir, name);
    return p;
}

static void expect_exact_chains(const char *tag) {
    char *prog = path_of(E2E_PROGS, "growth");
    json_t *r = report_of(prog, tag);
    json_t *g = growth_one(r, "realloc_by_one");
    cr_expect_eq(e2e_int(g, "chains"), 10);
    cr_expect_eq(e2e_int(g, "steps"), 990);
    cr_expect_eq(e2e_int(g, "realloc_steps"), 990);
    cr_expect_eq(final_size(g, "max"), 100);
    cr_expect_eq(final_size(g, "median"), 100);
    cr_expect(strstr(str(g, "advice"), "grow geometrically, not by a constant"), "%s",
              str(g, "advice"));

    g = growth_one(r, "doubling");
    cr_expect_eq(e2e_int(g, "chains"), 5);
    cr_expect_eq(e2e_int(g, "steps"), 50);
    cr_expect_eq(e2e_int(g, "realloc_steps"), 50);
    cr_expect_eq(final_size(g, "max"), 16384);
    cr_expect(strstr(str(g, "advice"), "allocate 16.0 KiB up front"), "%s", str(g, "advice"));

    g = growth_one(r, "ivec_push");
    cr_expect_eq(e2e_int(g, "chains"), 4);
    cr_expect_eq(e2e_int(g, "steps"), 32);
    cr_expect_eq(e2e_int(g, "copy_steps"), 32);
    cr_expect_eq(e2e_int(g, "bytes_copied"), 4 * (4096 - 16));
    cr_expect_eq(final_size(g, "max"), 4096);

    // nothing else: the unrelated pairs are no chains
    cr_expect_eq(json_array_size(json_object_get(r, "growth")), 3, "%s",
                 json_dumps(json_object_get(r, "growth"), JSON_INDENT(1)));
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(r, "growth"), i, e) {
        cr_expect_null(strstr(str(e, "function"), "unrelated"), "%s", str(e, "function"));
        json_t *site = json_array_get(json_object_get(r, "sites"), e2e_int(e, "site"));
        cr_expect_eq(e2e_int(site, "stack_id"), e2e_int(e, "stack_id"));
    }
    json_decref(r);
    free(prog);
}

Test(growth, exact_chains_and_no_false_ones, .timeout = 120) {
    setenv("HEAPPROF_REPLAY_THREADS", "0", 1); // one replay thread, whatever the machine
    expect_exact_chains("growth_exact");
}

// The same chains with replay on 4 shard threads, growth in their ordered scan (replay_par.c).
Test(growth, exact_chains_on_replay_threads, .timeout = 120) {
    setenv("HEAPPROF_REPLAY_THREADS", "4", 1);
    expect_exact_chains("growth_exact_threads");
}

// The one-thread output, byte for byte, with replay on 4 shard threads, 4 rounds in flight
// (HEAPPROF_REPLAY_DEPTH) and rounds of 64 events (HEAPPROF_REPLAY_ROUND): many rounds open at
// once, so frees, realloc halves and copy steps meet blocks whose sites and chain words the
// shards do not know yet (vector_map's: chain words changed 2 and 3 rounds before a free,
// which only growth's lists of the last D rounds know). report (text and JSON) and dhat.
static void expect_same_in_flight(const char *prog, const char *tag) {
    char *dir = e2e_tmpdir(tag);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0, "%s failed", prog);
    const char *const cmds[][5] = {{"report", trace, NULL},
                                   {"report", "--json", "--short-ms", "0", trace},
                                   {"dhat", trace, NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        const char *args[6] = {0};
        memcpy(args, cmds[i], sizeof cmds[i]);
        setenv("HEAPPROF_REPLAY_THREADS", "0", 1);
        unsetenv("HEAPPROF_REPLAY_DEPTH");
        unsetenv("HEAPPROF_REPLAY_ROUND");
        char *want = e2e_heapprof_ok(args);
        setenv("HEAPPROF_REPLAY_THREADS", "4", 1);
        setenv("HEAPPROF_REPLAY_DEPTH", "4", 1);
        setenv("HEAPPROF_REPLAY_ROUND", "64", 1);
        char *got = e2e_heapprof_ok(args);
        cr_expect(strlen(want) > 1000, "%s %s: %zu bytes", tag, cmds[i][0], strlen(want));
        cr_expect_str_eq(got, want, "%s: %s %s", tag, cmds[i][0], cmds[i][1]);
        free(want);
        free(got);
    }
    unsetenv("HEAPPROF_REPLAY_DEPTH");
    unsetenv("HEAPPROF_REPLAY_ROUND");
    free(dir);
}

Test(growth, same_output_with_four_rounds_in_flight, .timeout = 120) {
    char *prog = path_of(E2E_PROGS, "growth");
    expect_same_in_flight(prog, "growth_depth");
    free(prog);
    prog = path_of(E2E_SAMPLES, "vector_map");
    expect_same_in_flight(prog, "growth_depth_vector_map");
    free(prog);
}

Test(growth, text_sections, .timeout = 120) {
    char *prog = path_of(E2E_PROGS, "growth"), *dir = e2e_tmpdir("growth_text");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *args[] = {"report", trace, "--short-ms", "5", NULL};
    char *out = NULL, *err = NULL;
    cr_assert_eq(e2e_heapprof(args, &out, &err), 0, "%s", err);
    cr_expect(strstr(out, "Growth hotspots"), "%s", out);
    cr_expect(strstr(out, "ivec_push  e2e/progs/growth.c:"), "%s", out);
    cr_expect(strstr(out, "Top sites by short-lived blocks"), "%s", out);
    cr_expect(strstr(out, "within 5.0 ms"), "%s", out);
    free(out);
    free(err);
    const char *bad[] = {"report", trace, "--short-ms", "-1", NULL};
    cr_expect_eq(e2e_heapprof(bad, NULL, &err), 2);
    cr_expect(strstr(err, "--short-ms"), "%s", err);
    free(err);
    free(dir);
    free(prog);
}

Test(growth, short_lived_extends_temporary, .timeout = 120) {
    char *prog = path_of(E2E_SAMPLES, "exact_counts");
    json_t *r = report_of(prog, "growth_short");
    json_t *t = json_object_get(r, "totals");
    cr_expect_geq(e2e_int(t, "short_lived_blocks"), e2e_int(t, "temporary_blocks"));
    cr_expect_eq(e2e_int(t, "short_lived_ns"), 1000000);
    size_t i;
    json_t *s;
    long long sum = 0;
    bool worker = false;
    json_array_foreach(json_object_get(r, "sites"), i, s) {
        cr_expect_geq(e2e_int(s, "short_lived_blocks"), e2e_int(s, "temporary_blocks"));
        cr_expect_leq(e2e_int(s, "short_lived_blocks"), e2e_int(s, "blocks"));
        sum += e2e_int(s, "short_lived_blocks");
        if (strcmp(str(s, "function"), "worker") == 0 && e2e_int(s, "blocks") == 4000) {
            worker = true;
            cr_expect_eq(e2e_int(s, "short_lived_blocks"), 4000);
        }
    }
    cr_expect(worker);
    cr_expect_eq(sum, e2e_int(t, "short_lived_blocks"));
    json_t *first = json_array_get(json_object_get(r, "short_lived"), 0);
    cr_assert(first);
    cr_expect_geq(e2e_int(first, "blocks"), 4000);
    json_decref(r);
    free(prog);
}

// the growth entry of function fn whose api is api; asserts there is one
static json_t *growth_api(json_t *r, const char *fn, const char *api) {
    json_t *g;
    size_t i;
    json_array_foreach(json_object_get(r, "growth"), i, g) {
        if (strcmp(str(g, "function"), fn) == 0 && strcmp(str(g, "api"), api) == 0)
            return g;
    }
    cr_assert_fail("no growth site %s with api %s in %s", fn, api,
                   json_dumps(json_object_get(r, "growth"), JSON_INDENT(1)));
    return NULL;
}

static void expect_advice(json_t *g, const char *want) {
    cr_expect(strstr(str(g, "advice"), want), "advice '%s' lacks '%s'", str(g, "advice"), want);
}

Test(growth, rust_vec_and_string, .timeout = 120) {
    char *prog = path_of(E2E_SAMPLES, "vec_growth");
    if (access(prog, X_OK))
        cr_skip_test("vec_growth was not built (no rustc?)");
    json_t *r = report_of(prog, "growth_vec");
    // 2000 Vec<u64> of 1..=1000 elements: RawVec grows from 4 elements by doubling, so every vector
    // of more than 4 elements is a realloc chain ending at 1024 x 8 bytes at most
    json_t *g = growth_api(r, "vec_growth::grow_u64_vecs", "Vec::with_capacity");
    cr_expect_geq(e2e_int(g, "chains"), 1900);
    cr_expect_eq(e2e_int(g, "steps"), e2e_int(g, "realloc_steps"));
    cr_expect_eq(final_size(g, "max"), 8192);
    expect_advice(g, "`Vec::with_capacity(1024)`");
    g = growth_api(r, "vec_growth::grow_strings", "String::with_capacity");
    expect_advice(g, "`String::with_capacity(");
    cr_expect_geq(e2e_int(g, "chains"), 900);
    // the outer Vec<Vec<u8>> of 20000 rows (24-byte elements): one chain to 32768 x 24 bytes
    g = growth_api(r, "vec_growth::grow_rows", "Vec::with_capacity");
    json_t *e;
    size_t i;
    bool outer = false;
    json_array_foreach(json_object_get(r, "growth"), i, e) {
        if (strcmp(str(e, "function"), "vec_growth::grow_rows") == 0 && e2e_int(e, "chains") == 1) {
            outer = true;
            cr_expect_eq(final_size(e, "max"), 32768 * 24);
            expect_advice(e, "`Vec::with_capacity(32768)`");
        }
    }
    cr_expect(outer, "no single-chain growth site in grow_rows");
    // a Vec<u8> made with_capacity(128) and pushed to 1 MiB: the capacity in its elements (the
    // T of Vec<T> from DWARF), not 1 MiB / 32 from an assumed start of 4 elements (issue 22)
    g = growth_api(r, "vec_growth::grow_from_capacity", "Vec::with_capacity");
    cr_expect_eq(final_size(g, "max"), 1 << 20);
    expect_advice(g, "`Vec::with_capacity(1048576)`");
    // Path::join grows a PathBuf of its own: nothing the program could reserve, so no advice
    size_t n_join = 0;
    json_array_foreach(json_object_get(r, "growth"), i, e) {
        if (strcmp(str(e, "function"), "vec_growth::join_paths") == 0) {
            n_join++;
            cr_expect(strncmp(str(e, "advice"), "no advice: the buffer grows inside ", 35) == 0,
                      "advice at join_paths: %s", str(e, "advice"));
        }
    }
    cr_expect_gt(n_join, 0, "no growth site in join_paths");
    // CPU time in growth: each site's samples are part of the run's allocator samples
    long long in_growth = 0;
    json_array_foreach(json_object_get(r, "growth"), i, e) in_growth += e2e_int(e, "cpu_samples");
    json_t *cpu = json_object_get(r, "cpu");
    if (cpu && json_object_get(cpu, "allocator_samples"))
        cr_expect_leq(in_growth, e2e_int(cpu, "allocator_samples"));
    json_decref(r);
    free(prog);
}

Test(growth, rust_hashmap, .timeout = 120) {
    char *prog = path_of(E2E_SAMPLES, "hashmap_words");
    if (access(prog, X_OK))
        cr_skip_test("hashmap_words was not built (no rustc?)");
    json_t *r = report_of(prog, "growth_hashmap");
    // counts: HashMap<String, usize> grown by entry() from 4 buckets, rehash by allocate-copy-free
    // (hashbrown): one chain, every step a copy
    json_t *g = growth_api(r, "hashmap_words::main", "HashMap::with_capacity");
    cr_expect_eq(e2e_int(g, "chains"), 1);
    cr_expect_eq(e2e_int(g, "realloc_steps"), 0);
    cr_expect_geq(e2e_int(g, "steps"), 10);
    expect_advice(g, "`HashMap::with_capacity(");
    expect_advice(g, "rehashes");
    g = growth_api(r, "hashmap_words::main", "HashSet::with_capacity");
    expect_advice(g, "`HashSet::with_capacity(");
    json_decref(r);
    free(prog);
}

Test(growth, cpp_vector_and_unordered_map, .timeout = 120) {
    char *prog = path_of(E2E_SAMPLES, "vector_map");
    json_t *r = report_of(prog, "growth_cpp");
    json_t *g = growth_api(r, "grow_vectors", "std::vector::reserve");
    expect_advice(g, "`reserve(");
    expect_advice(g, "std::vector::reserve");
    cr_expect_eq(e2e_int(g, "realloc_steps"), 0);
    // the three big vectors of 50000, 100000, 150000 ints: doubling from 1 to 262144 ints
    json_t *e;
    size_t i;
    bool big = false;
    json_array_foreach(json_object_get(r, "growth"), i, e) {
        if (strcmp(str(e, "function"), "grow_vectors") == 0 && e2e_int(e, "chains") == 3) {
            big = true;
            cr_expect_eq(final_size(e, "max"), 262144 * 4);
            cr_expect_eq(e2e_int(e, "steps"), 16 + 17 + 18);
            expect_advice(e, "`reserve(262144)`");
        }
    }
    cr_expect(big, "no growth site of the three big vectors");
    g = growth_api(r, "count_words", "std::unordered_map::reserve");
    expect_advice(g, "std::unordered_map::reserve");
    g = growth_api(r, "build_strings", "std::string::reserve");
    json_decref(r);
    free(prog);
}

// 263 buffers at one site, 240 ending at 576 bytes and 23 at 36 KiB: the advice names the size
// that covers 90% of the chains and what reserving it for all of them costs, and saves only
// what those chains copied; not the largest size, 36 KiB for each of 263 (issue 22).
Test(growth, advice_covers_most_chains_not_the_largest, .timeout = 120) {
    char *prog = path_of(E2E_PROGS, "buffers");
    json_t *r = report_of(prog, "growth_cover");
    json_t *g = growth_one(r, "make_buffer");
    cr_expect_eq(e2e_int(g, "chains"), 263);
    cr_expect_eq(final_size(g, "max"), 36864);
    cr_expect_eq(final_size(g, "median"), 576);
    cr_expect_eq(final_size(g, "cover"), 576);
    cr_expect_eq(final_size(g, "cover_percent"), 90);
    cr_expect_eq(e2e_int(g, "advised_size"), 576);
    // 240 chains of 3 reallocations each, copying 72 + 144 + 288 bytes when they moved
    expect_advice(g, "allocate 576 B up front here: would save 720 reallocations");
    expect_advice(g, "(covers 90% of its 263 chains; 147.9 KiB reserved in all)");
    json_decref(r);
    free(prog);
}
