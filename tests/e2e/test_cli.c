// SPDX-License-Identifier: MIT
// The command line and the shim's file handling: clear errors with status 2, --help, trace
// files that never overwrite or follow what is already there, bad settings that do no harm.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static int one_line(const char *s) {
    const char *nl = strchr(s, '\n');
    return nl && nl[1] == 0;
}

Test(cli, missing_trace_is_one_line_and_status_2) {
    const char *args[] = {"stats", "/nonexistent/trace.hpt", NULL};
    char *out, *err;
    cr_expect_eq(e2e_heapprof(args, &out, &err), 2);
    cr_expect(one_line(err) && !strncmp(err, "heapprof: ", 10), "stderr was: %s", err);
    free(out);
    free(err);
}

Test(cli, not_a_trace_is_rejected) {
    const char *args[] = {"stats", E2E_PROGS "/forker", NULL};
    char *err;
    cr_expect_eq(e2e_heapprof(args, NULL, &err), 2);
    cr_expect(one_line(err), "stderr was: %s", err);
    free(err);
}

Test(cli, unknown_option_is_status_2) {
    const char *args[] = {"stats", "--no-such-option", "x.hpt", NULL};
    char *err;
    cr_expect_eq(e2e_heapprof(args, NULL, &err), 2);
    free(err);
    const char *args2[] = {"no-such-command", NULL};
    cr_expect_eq(e2e_heapprof(args2, NULL, NULL), 2);
}

Test(cli, help_on_every_subcommand) {
    const char *sub[] = {"run", "stats"};
    for (size_t i = 0; i < 2; i++) {
        const char *args[] = {sub[i], "--help", NULL};
        char *out;
        cr_expect_eq(e2e_heapprof(args, &out, NULL), 0, "%s --help", sub[i]);
        cr_expect(strstr(out, sub[i]), "%s --help printed: %s", sub[i], out);
        free(out);
    }
    const char *top[] = {"--help", NULL};
    cr_expect_eq(e2e_heapprof(top, NULL, NULL), 0);
}

Test(cli, existing_trace_is_never_overwritten_nor_a_symlink_followed) {
    char *dir = e2e_tmpdir("excl");
    char trace[4096], target[4096], next[4096], trace2[4096], next2[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(next, sizeof next, "%s/t.1.hpt", dir);
    snprintf(target, sizeof target, "%s/victim", dir);
    snprintf(trace2, sizeof trace2, "%s/s.hpt", dir);
    snprintf(next2, sizeof next2, "%s/s.1.hpt", dir);
    FILE *f = fopen(trace, "w");
    fputs("precious", f);
    fclose(f);
    cr_assert_eq(symlink(target, trace2), 0);

    char *argv[] = {E2E_PROGS "/forker", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    struct stat st;
    cr_expect_eq(stat(trace, &st), 0);
    cr_expect_eq(st.st_size, 8, "the existing file was overwritten");
    cr_expect_eq(stat(next, &st), 0, "no trace under the next free name");
    cr_expect_eq(st.st_mode & 0777, 0600);

    cr_assert_eq(e2e_run_preloaded(argv, trace2, NULL, NULL), 0);
    cr_expect_neq(access(target, F_OK), 0, "the symlink was followed");
    cr_expect_eq(stat(next2, &st), 0);
    free(dir);
}

Test(cli, bad_settings_fall_back_to_defaults) {
    char *dir = e2e_tmpdir("env");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    const char *env[] = {"HEAPPROF_FLUSH_MS=soon", "HEAPPROF_MAX_FRAMES=100000",
                         "HEAPPROF_BUFFER_KB=-1", NULL};
    char *argv[] = {E2E_PROGS "/execer", "stage2", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    json_t *s = e2e_stats(trace, "execer");
    cr_expect_eq(e2e_int(s, "blocks"), 6);
    json_decref(s);
    free(dir);
}
