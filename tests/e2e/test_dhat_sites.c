// SPDX-License-Identifier: MIT
// Per-site agreement with Valgrind DHAT: a sample runs under `valgrind --tool=dhat` and under
// libheapprof.so, and every site of the user's code must have the same tb, tbk, gb, gbk, eb and
// ebk in DHAT's JSON and in `heapprof dhat`'s. Sites are matched by their user frames: the
// frames whose source file is the sample's, as (function, file name, line), with function names
// reduced to their last path segment (DHAT names inlined frames by their short DWARF name,
// heapprof by the demangled linkage name) and with GCC's clone suffixes dropped. Several program
// points with the same user frames are summed on each side. Excluded: sites whose allocation
// call did not come from the sample's own module (libc's DTVs from pthread_create, made by
// ld.so, differ in size and are freed by Valgrind's freeres), decided from `heapprof report
// --json`'s stacks, which name each frame's module and kind: the first frame that is not the
// allocator's must lie in the sample.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#define N_FIGS 6
static const char *const figs[N_FIGS] = {"tb", "tbk", "gb", "gbk", "eb", "ebk"};

typedef struct site_sum {
    char *key;
    long long v[N_FIGS];
    bool excluded;
} site_sum_t;

typedef struct table {
    site_sum_t *s;
    size_t n;
} table_t;

static site_sum_t *find(table_t *t, const char *key, bool add) {
    for (size_t i = 0; i < t->n; i++)
        if (strcmp(t->s[i].key, key) == 0)
            return &t->s[i];
    if (!add)
        return NULL;
    t->s = realloc(t->s, (t->n + 1) * sizeof *t->s);
    t->s[t->n] = (site_sum_t){.key = strdup(key)};
    return &t->s[t->n++];
}

static void table_free(table_t *t) {
    for (size_t i = 0; i < t->n; i++)
        free(t->s[i].key);
    free(t->s);
}

// "std::vector<int>::push_back(int&&)" -> "push_back"; "main [clone .cold]" -> "main"
static void norm_function(const char *fn, char *out, size_t cap) {
    char flat[512];
    size_t n = 0;
    int depth = 0;
    for (const char *p = fn; *p && n + 1 < sizeof flat; p++) {
        if (*p == '<' || *p == '(' || *p == '[')
            depth++;
        else if ((*p == '>' || *p == ')' || *p == ']') && depth > 0)
            depth--;
        else if (depth == 0)
            flat[n++] = *p;
    }
    flat[n] = '\0';
    const char *last = flat;
    for (const char *p = flat; (p = strstr(p, "::")); p += 2)
        last = p + 2;
    snprintf(out, cap, "%s", last);
    out[strcspn(out, ". ")] = '\0';
}

static const char *base_name(const char *path) {
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

static void key_add(char *key, size_t cap, const char *fn, const char *file, long line) {
    char nf[512];
    norm_function(fn, nf, sizeof nf);
    size_t n = strlen(key);
    snprintf(key + n, cap - n, "%s@%s:%ld|", nf, base_name(file), line);
}

// Key of a DHAT program point: its frames "0xADDR: FUNCTION (FILE:LINE)" in the source file.
static void pp_key(json_t *ftbl, json_t *pp, const char *src, char *key, size_t cap) {
    key[0] = '\0';
    size_t i;
    json_t *fi;
    json_array_foreach(json_object_get(pp, "fs"), i, fi) {
        const char *s = json_string_value(json_array_get(ftbl, (size_t)json_integer_value(fi)));
        if (!s)
            continue;
        const char *colon = strstr(s, ": ");
        const char *open = strrchr(s, '(');
        size_t len = strlen(s);
        if (!colon || !open || open < colon || len < 2 || s[len - 1] != ')' ||
            strncmp(open, "(in ", 4) == 0)
            continue;
        char fn[2048], loc[2048];
        snprintf(fn, sizeof fn, "%.*s", (int)(open - 1 - (colon + 2)), colon + 2);
        snprintf(loc, sizeof loc, "%.*s", (int)(s + len - 1 - (open + 1)), open + 1);
        char *lc = strrchr(loc, ':');
        if (!lc)
            continue;
        *lc = '\0';
        if (strcmp(base_name(loc), src) == 0)
            key_add(key, cap, fn, loc, atol(lc + 1));
    }
}

static json_t *load(const char *path) {
    json_error_t je;
    json_t *j = json_load_file(path, 0, &je);
    cr_assert(j, "%s: %s (line %d)", path, je.text, je.line);
    return j;
}

static void sum_pps(json_t *j, const char *src, table_t *t) {
    json_t *ftbl = json_object_get(j, "ftbl"), *pp;
    size_t i;
    char key[16384];
    json_array_foreach(json_object_get(j, "pps"), i, pp) {
        pp_key(ftbl, pp, src, key, sizeof key);
        if (!key[0])
            continue; // no frame in the user's source: the runtime's own
        site_sum_t *s = find(t, key, true);
        for (int k = 0; k < N_FIGS; k++)
            s->v[k] += json_integer_value(json_object_get(pp, figs[k]));
    }
}

// Marks keys with a site whose allocation call came from another module than the sample.
static void mark_indirect(json_t *report, const char *src, const char *prog_name, table_t *t) {
    json_t *site;
    size_t i;
    char key[16384];
    json_array_foreach(json_object_get(report, "sites"), i, site) {
        json_t *stack = json_object_get(site, "stack"), *fr;
        size_t k;
        key[0] = '\0';
        json_array_foreach(stack, k, fr) {
            const char *file = json_string_value(json_object_get(fr, "file"));
            const char *fn = json_string_value(json_object_get(fr, "function"));
            if (file && fn && strcmp(base_name(file), src) == 0)
                key_add(key, sizeof key, fn, file,
                        (long)json_integer_value(json_object_get(fr, "line")));
        }
        // the first frame past the allocator's own (operator new lives in libstdc++)
        const char *mod = NULL;
        json_array_foreach(stack, k, fr) {
            const char *kind = json_string_value(json_object_get(fr, "kind"));
            if (kind && strcmp(kind, "allocator") != 0) {
                mod = json_string_value(json_object_get(fr, "module"));
                break;
            }
        }
        if (key[0] && (!mod || strcmp(base_name(mod), prog_name) != 0))
            find(t, key, true)->excluded = true;
    }
}

static char *run_heapprof_to_file(const char *const args[], const char *path) {
    char *out = NULL, *err = NULL;
    int st = e2e_heapprof(args, &out, &err);
    cr_assert_eq(st, 0, "heapprof %s %s failed (%d): %s", args[0], args[1], st, err);
    if (path) {
        FILE *f = fopen(path, "w");
        cr_assert(f);
        fputs(out, f);
        fclose(f);
    }
    free(err);
    return out;
}

// Runs prog both ways; returns heapprof's report JSON and fills the two tables.
static json_t *compare(const char *name, const char *src, size_t min_sites) {
    char prog[4096];
    snprintf(prog, sizeof prog, "%s/%s", E2E_SAMPLES, name);
    if (access(prog, X_OK))
        cr_skip_test("%s was not built (no rustc?)", name);
    char *dir = e2e_tmpdir(name);
    char trace[4200], mine[4200], theirs[4200], report[4200], cmd[16384];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(mine, sizeof mine, "%s/heapprof.dhat.json", dir);
    snprintf(theirs, sizeof theirs, "%s/valgrind.dhat.json", dir);
    snprintf(report, sizeof report, "%s/report.json", dir);
    char *argv[] = {prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    snprintf(cmd, sizeof cmd,
             "valgrind --tool=dhat --num-callers=64 --dhat-out-file=%s %s >/dev/null "
             "2>%s/valgrind.log",
             theirs, prog, dir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "valgrind failed: %s", cmd);

    const char *dhat_args[] = {"dhat", trace, "-o", mine, NULL};
    free(run_heapprof_to_file(dhat_args, NULL));
    const char *report_args[] = {"report", "--json", trace, NULL};
    free(run_heapprof_to_file(report_args, report));

    table_t a = {0}, b = {0};
    json_t *ja = load(theirs), *jb = load(mine), *jr = load(report);
    sum_pps(ja, src, &a);
    sum_pps(jb, src, &b);
    table_t excl = {0};
    mark_indirect(jr, src, name, &excl);

    size_t compared = 0;
    for (int side = 0; side < 2; side++) {
        table_t *x = side ? &b : &a, *y = side ? &a : &b;
        for (size_t i = 0; i < x->n; i++) {
            site_sum_t *e = find(&excl, x->s[i].key, false);
            if (e && e->excluded)
                continue;
            site_sum_t *o = find(y, x->s[i].key, false);
            cr_expect(o != NULL, "site %s is only in %s's output", x->s[i].key,
                      side ? "heapprof" : "DHAT");
            if (!o || side)
                continue;
            compared++;
            for (int k = 0; k < N_FIGS; k++)
                cr_expect_eq(x->s[i].v[k], o->v[k], "site %s: %s is %lld in DHAT, %lld in heapprof",
                             x->s[i].key, figs[k], x->s[i].v[k], o->v[k]);
        }
    }
    cr_expect_geq(compared, min_sites, "only %zu user sites compared (expected >= %zu)", compared,
                  min_sites);
    json_decref(ja);
    json_decref(jb);
    table_free(&a);
    table_free(&b);
    table_free(&excl);
    free(dir);
    return jr;
}

static const char *str(json_t *o, const char *k) {
    const char *s = json_string_value(json_object_get(o, k));
    return s ? s : "";
}

// The report's site named fn at src:line whose stack has a frame whose function starts with
// through (the collection's growth code), or NULL.
static json_t *named_site(json_t *report, const char *fn, const char *src, long line,
                          const char *through) {
    json_t *site;
    size_t i;
    json_array_foreach(json_object_get(report, "sites"), i, site) {
        if (strcmp(str(site, "function"), fn) != 0 ||
            strcmp(base_name(str(site, "file")), src) != 0 ||
            json_integer_value(json_object_get(site, "line")) != line)
            continue;
        json_t *fr;
        size_t k;
        json_array_foreach(json_object_get(site, "stack"), k, fr) {
            if (strncmp(str(fr, "function"), through, strlen(through)) == 0)
                return site;
        }
    }
    return NULL;
}

Test(dhat_sites, c_sample_every_site_agrees, .timeout = 600) {
    json_t *r = compare("exact_counts", "exact_counts.c", 15);
    json_decref(r);
}

Test(dhat_sites, rust_vec_sample_every_site_agrees, .timeout = 600) {
    json_t *r = compare("vec_growth", "vec_growth.rs", 5);
    // the Vec<u64> growth site: push in grow_u64_vecs, through RawVec's growth
    json_t *s = named_site(r, "vec_growth::grow_u64_vecs", "vec_growth.rs", 37, "alloc::raw_vec::");
    cr_expect(s, "no site vec_growth::grow_u64_vecs at vec_growth.rs:37 through alloc::raw_vec");
    if (s)
        cr_expect_gt(json_integer_value(json_object_get(s, "blocks")), 2000);
    json_decref(r);
}

Test(dhat_sites, rust_hashmap_sample_every_site_agrees, .timeout = 600) {
    json_t *r = compare("hashmap_words", "hashmap_words.rs", 5);
    // the HashMap<String, usize> table growth: counts.entry(word), through hashbrown's resize
    json_t *s = named_site(r, "hashmap_words::main", "hashmap_words.rs", 55, "hashbrown::raw::");
    cr_expect(s, "no site hashmap_words::main at hashmap_words.rs:55 through hashbrown::raw");
    json_decref(r);
}

Test(dhat_sites, cpp_sample_every_site_agrees, .timeout = 600) {
    json_t *r = compare("vector_map", "vector_map.cpp", 8);
    json_decref(r);
}
