// SPDX-License-Identifier: MIT
// The shim's own CFI walker (with reuse of the previous walk's outer frames) must give exactly
// the stacks libunwind gives, event by event, on C (frame pointers), C++ and Rust (release, no
// frame pointers) and with threads. HEAPPROF_UNWIND=check runs both and counts differences;
// a stack the recorder took from a known step (record.c: the previous stack plus the same new
// frames as before) is checked too, and programs that change call sites must take that path.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static void check(const char *prog, bool expect_steps) {
    if (access(prog, X_OK))
        cr_skip_test("%s was not built", prog);
    char *dir = e2e_tmpdir("unwind");
    char cmd[16384], log[4096];
    snprintf(log, sizeof log, "%s/stderr", dir);
    snprintf(cmd, sizeof cmd,
             "env HEAPPROF_UNWIND=check HEAPPROF_QUIET=1 HEAPPROF_OUT=%s/t.hpt LD_PRELOAD=%s %s "
             ">/dev/null 2>%s",
             dir, E2E_LIB, prog, log);
    int st = system(cmd);
    // the program's stderr goes into every failure message (a rare failure seen once under
    // load in session 7 left nothing to go on)
    static char err[4096];
    FILE *f = fopen(log, "r");
    cr_assert(f);
    err[fread(err, 1, sizeof err - 1, f)] = 0;
    rewind(f);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "%s failed (status %d): %s", cmd, st, err);
    char line[512];
    unsigned long stacks = 0, differ = ~0ul, unchanged = 0, steps = 0, snaps = 0;
    while (fgets(line, sizeof line, f))
        sscanf(line,
               "heapprof: unwinder check: %lu stacks, %lu differ from libunwind (%lu found "
               "unchanged, %lu by a known step, %lu by a snapshot)",
               &stacks, &differ, &unchanged, &steps, &snaps);
    fclose(f);
    cr_expect_gt(stacks, 1000, "%s: no check report (or too few stacks) on stderr: %s", prog, err);
    cr_expect_eq(differ, 0, "%s: %lu of %lu stacks differ from libunwind's: %s", prog, differ,
                 stacks, err);
    // the shortcuts a program that allocates from a few call sites in turn takes: a known step
    // from the last stack, or a snapshot of an earlier one (both checked above)
    if (expect_steps)
        cr_expect_gt(steps + snaps, 1000,
                     "%s: only %lu stacks came from a known step, %lu from a snapshot: %s", prog,
                     steps, snaps, err);
    free(dir);
}

Test(unwind, c_sample_matches_libunwind) {
    check(E2E_SAMPLES "/exact_counts", false);
}
Test(unwind, cpp_sample_matches_libunwind) {
    check(E2E_SAMPLES "/vector_map", true);
}
Test(unwind, rust_samples_without_frame_pointers_match_libunwind) {
    check(E2E_SAMPLES "/vec_growth", true);
    check(E2E_SAMPLES "/hashmap_words", true);
}
Test(unwind, sixteen_threads_match_libunwind, .timeout = 300) {
    check(E2E_PROGS "/threads16", false);
}

Test(unwind, recursion_longjmp_exceptions_and_threads_match_libunwind, .timeout = 300) {
    check(E2E_PROGS "/unwind_torture", true);
}

// Code without CFI that keeps a frame pointer (V8's builtins, JIT code, assembly): the walk
// guesses the caller's frame from rbp, as libunwind does, instead of ending there; CPython's
// perf trampoline, which keeps none, is known by its code. Every stack of progs/no_cfi.c
// reaches main, and all agree with libunwind's as far as libunwind goes.
Test(unwind, frames_without_cfi_are_walked_by_their_frame_pointer) {
    check(E2E_PROGS "/no_cfi", false);
    char *dir = e2e_tmpdir("no_cfi");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/no_cfi", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    json_t *rep = e2e_report(trace), *s;
    size_t i;
    long long blocks = 0, reach_main = 0;
    json_array_foreach(json_object_get(rep, "sites"), i, s) {
        const char *fn = json_string_value(json_object_get(s, "function"));
        if (!fn || strcmp(fn, "alloc_blocks"))
            continue;
        blocks += e2e_int(s, "blocks");
        json_t *f;
        size_t k;
        json_array_foreach(json_object_get(s, "stack"), k, f) {
            const char *name = json_string_value(json_object_get(f, "function"));
            if (name && !strcmp(name, "main")) {
                reach_main += e2e_int(s, "blocks");
                break;
            }
        }
    }
    cr_expect_eq(blocks, 4000);
    cr_expect_eq(reach_main, 4000, "%lld of 4000 blocks have stacks that reach main", reach_main);
    json_decref(rep);
    free(dir);
}

// Code in no module is named by the process's perf map, as a JIT writes it for perf
// (HEAPPROF_PERF_MAP here; /tmp/perf-PID.map by default): the JIT copy of no_cfi's trampoline
// shows as "jit_trampoline" between alloc_blocks and main, and the report says where the name
// came from.
Test(unwind, jit_code_is_named_from_the_perf_map) {
    char *dir = e2e_tmpdir("perf_map");
    char trace[4200], map[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(map, sizeof map, "%s/jit.map", dir);
    char *argv[] = {E2E_PROGS "/no_cfi", map, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    setenv("HEAPPROF_PERF_MAP", map, 1);
    json_t *rep = e2e_report(trace), *s;
    const char *args[] = {"report", trace, NULL};
    char *text = e2e_heapprof_ok(args);
    unsetenv("HEAPPROF_PERF_MAP");
    size_t i;
    long long named = 0, py_named = 0;
    json_array_foreach(json_object_get(rep, "sites"), i, s) {
        json_t *stack = json_object_get(s, "stack"), *f;
        const char *f0 = json_string_value(json_object_get(json_array_get(stack, 0), "function"));
        const char *f1 = json_string_value(json_object_get(json_array_get(stack, 1), "function"));
        bool reaches_main = false;
        size_t k;
        json_array_foreach(stack, k, f) {
            const char *name = json_string_value(json_object_get(f, "function"));
            reaches_main |= name && !strcmp(name, "main");
        }
        // via_jit, a tail call at -O2, may be a frame of its own between the copy and main
        if (f0 && f1 && !strcmp(f0, "alloc_blocks") && !strcmp(f1, "jit_trampoline") &&
            reaches_main)
            named += e2e_int(s, "blocks");
        if (f0 && f1 && !strcmp(f0, "alloc_blocks") && !strcmp(f1, "py_trampoline") &&
            reaches_main)
            py_named += e2e_int(s, "blocks");
    }
    cr_expect_eq(named, 1000, "%lld of the JIT copy's 1000 blocks named", named);
    cr_expect_eq(py_named, 1000, "%lld of the CPython trampoline's 1000 blocks named", py_named);
    cr_expect(strstr(text, "JIT code: 2 of 2 addresses outside every module named from"),
              "report: %s", text);
    free(text);
    json_decref(rep);
    free(dir);
}
