// SPDX-License-Identifier: MIT
// Every DHAT file heapprof writes for the samples must load in Valgrind's own viewer: each one
// goes through shared/tools/dhat-view-check, which opens dh_view.html in headless Chromium,
// loads the file as a user would and fails on an error, NaN/undefined values or an empty tree.
// Skipped, with a message saying why, only when no Chromium is installed.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

static bool have_chromium(void) {
    const char *env = getenv("CHROMIUM");
    if (env && *env)
        return access(env, X_OK) == 0;
    return access("/usr/bin/chromium", X_OK) == 0 ||
           access("/usr/bin/chromium-browser", X_OK) == 0;
}

static void check_file(const char *json, const char *dir) {
    // The checker is the team's shared tool, outside this repository: where a checkout has no
    // shared/ beside it there is nothing to run. Where it exists, its verdict is binding.
    if (access(E2E_DHAT_VIEW_CHECK, X_OK) != 0)
        cr_skip_test("the DHAT viewer check %s is not beside this checkout", E2E_DHAT_VIEW_CHECK);
    char cmd[16384], log[4200];
    snprintf(log, sizeof log, "%s/view-check.log", dir);
    snprintf(cmd, sizeof cmd, "%s %s --timeout 240 </dev/null >%s 2>&1", E2E_DHAT_VIEW_CHECK, json,
             log);
    int st = system(cmd);
    char out[8192] = "";
    FILE *f = fopen(log, "r");
    if (f) {
        size_t n = fread(out, 1, sizeof out - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    cr_assert(WIFEXITED(st), "dhat-view-check did not exit: %s", out);
    cr_assert_neq(WEXITSTATUS(st), 2, "dhat-view-check could not run (setup problem):\n%s", out);
    cr_assert_eq(WEXITSTATUS(st), 0, "the DHAT viewer rejected %s:\n%s", json, out);
    cr_assert(strstr(out, "result:    PASS"), "no PASS line:\n%s", out);
}

// Profiles prog (a sample name, or a path) and checks the DHAT file written for it.
static void profile_and_check(const char *name, const char *prog) {
    char path[4096];
    if (!prog) {
        snprintf(path, sizeof path, "%s/%s", E2E_SAMPLES, name);
        prog = path;
    }
    if (access(prog, X_OK))
        cr_skip_test("%s was not built (no rustc?)", name);
    if (!have_chromium())
        cr_skip_test("Chromium is not installed (apt-get install chromium; scripts/deps.sh does "
                     "it): the DHAT viewer check cannot run");
    char *dir = e2e_tmpdir(name);
    char trace[4200], json[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(json, sizeof json, "%s/dhat.json", dir);
    char *argv[] = {(char *)prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *args[] = {"dhat", trace, "-o", json, NULL};
    char *err = NULL;
    int st = e2e_heapprof(args, NULL, &err);
    cr_assert_eq(st, 0, "heapprof dhat failed (%d): %s", st, err);
    free(err);
    check_file(json, dir);
    free(dir);
}

Test(dhat_view, c_sample_loads_in_the_viewer, .timeout = 600) {
    profile_and_check("exact_counts", NULL);
}
Test(dhat_view, cpp_sample_loads_in_the_viewer, .timeout = 600) {
    profile_and_check("vector_map", NULL);
}
Test(dhat_view, rust_vec_sample_loads_in_the_viewer, .timeout = 600) {
    profile_and_check("vec_growth", NULL);
}
Test(dhat_view, rust_hashmap_sample_loads_in_the_viewer, .timeout = 600) {
    profile_and_check("hashmap_words", NULL);
}

Test(dhat_view, stripped_binary_loads_in_the_viewer, .timeout = 600) {
    char *dir = e2e_tmpdir("stripped_view");
    char prog[4200], cmd[16384];
    snprintf(prog, sizeof prog, "%s/exact_counts_stripped", dir);
    snprintf(cmd, sizeof cmd, "strip -o %s %s/exact_counts", prog, E2E_SAMPLES);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    profile_and_check("exact_counts_stripped", prog);
    free(dir);
}
