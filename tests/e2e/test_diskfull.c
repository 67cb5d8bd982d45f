// SPDX-License-Identifier: MIT
// Output that cannot be written: the trace directory is a 2 MiB tmpfs that fills up mid-run,
// or HEAPPROF_OUT names a place where no file can be created. The program must run to the
// end with its own output and status, the shim must say once what happened, and `heapprof
// stats` must read whatever made it to disk. Mounting needs root (CI runs as root); without
// it the tmpfs cases are skipped.
#include "spawn.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char mnt[1024];
static bool mounted;

static void unmount(void) {
    if (mounted && umount2(mnt, MNT_DETACH) != 0)
        fprintf(stderr, "test_diskfull: umount %s: %s\n", mnt, strerror(errno));
    mounted = false;
}

// A fresh tmpfs of size_opt ("size=2m") with extra mount flags, or the test is skipped.
static void mount_tmpfs(const char *tag, unsigned long flags, const char *size_opt) {
    char *d = e2e_tmpdir(tag);
    snprintf(mnt, sizeof mnt, "%s", d);
    free(d);
    if (mount("tmpfs", mnt, "tmpfs", flags, size_opt) != 0)
        cr_skip_test("cannot mount a tmpfs on %s (%s): these cases need root", mnt,
                     strerror(errno));
    mounted = true;
}

static int count_lines(const char *s, const char *needle) {
    int n = 0;
    for (const char *l = s; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        char *line = strndup(l, len);
        n += strstr(line, needle) != NULL;
        free(line);
        l = nl ? nl + 1 : NULL;
    }
    return n;
}

// The program's stdout without the shim: what every profiled run must print too.
static char *reference_output(char *const argv[]) {
    e2e_run_opts_t o = {.no_preload = true, .timeout_s = 120};
    char *out;
    cr_assert_eq(e2e_run(argv, &o, &out, NULL, NULL), 0, "%s fails on its own", argv[0]);
    cr_assert(out[0], "%s printed nothing", argv[0]);
    return out;
}

static int files_in(const char *dir) {
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

Test(diskfull, a_full_disk_stops_the_trace_not_the_program, .fini = unmount, .timeout = 300) {
    mount_tmpfs("tmpfs", 0, "size=2m,mode=0700");
    char *argv[] = {E2E_PROGS "/churn", NULL};
    char *want = reference_output(argv);
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", mnt);

    e2e_run_opts_t o = {.out_template = trace, .timeout_s = 120};
    char *out, *err;
    int st = e2e_run(argv, &o, &out, &err, NULL);
    cr_expect_eq(st, 0, "the program failed under a full disk (status %d); stderr: %s", st, err);
    cr_expect_str_eq(out, want, "the program's output changed");
    cr_expect_eq(count_lines(err, "incomplete"), 1,
                 "the shim must say once that the trace is incomplete; stderr: %s", err);
    cr_expect(strstr(err, "disk full"), "stderr does not name the cause: %s", err);

    // the reader takes what is on disk: whole chunks, then at most one partial one
    json_t *s = e2e_stats(trace, NULL);
    json_t *d = json_object_get(s, "damage");
    cr_expect_not(json_is_true(json_object_get(d, "clean_exit")), "a cut trace claims a trailer");
    cr_expect_gt(e2e_int(d, "chunks_ok"), 0, "nothing of the trace was readable");
    cr_expect_gt(e2e_int(s, "blocks"), 0);
    cr_expect_lt(e2e_int(s, "blocks"), 2000000, "more blocks than fit in 2 MiB of trace");
    cr_expect_eq(e2e_int(d, "chunks_damaged"), 0, "a full disk leaves a cut, not damage");
    json_decref(s);
    free(out);
    free(err);
    free(want);
}

// Runs prog with HEAPPROF_OUT=out_template: status 0, the same output as without the shim,
// exactly one line from the shim, and that line says why.
static void runs_unprofiled(const char *out_template, const char *why) {
    char *argv[] = {E2E_PROGS "/churn", NULL};
    char *want = reference_output(argv);
    e2e_run_opts_t o = {.out_template = out_template, .timeout_s = 120};
    char *out, *err;
    int st = e2e_run(argv, &o, &out, &err, NULL);
    cr_expect_eq(st, 0, "HEAPPROF_OUT=%s: status %d; stderr: %s", out_template, st, err);
    cr_expect_str_eq(out, want, "HEAPPROF_OUT=%s: the program's output changed", out_template);
    cr_expect_eq(count_lines(err, "heapprof:"), 1, "HEAPPROF_OUT=%s: one line expected: %s",
                 out_template, err);
    cr_expect(strstr(err, "unprofiled"), "HEAPPROF_OUT=%s: %s", out_template, err);
    cr_expect(strstr(err, why), "HEAPPROF_OUT=%s: the line should say '%s': %s", out_template, why,
              err);
    free(out);
    free(err);
    free(want);
}

Test(diskfull, unwritable_trace_path_runs_the_program_unprofiled, .timeout = 300) {
    char *dir = e2e_tmpdir("unwritable");
    char path[4096];
    snprintf(path, sizeof path, "%s/no/such/dir/t.%%p.hpt", dir);
    runs_unprofiled(path, "No such file or directory");
    // a regular file used as a directory
    char file[2048];
    snprintf(file, sizeof file, "%s/plain-file", dir);
    FILE *f = fopen(file, "w");
    cr_assert(f);
    fclose(f);
    snprintf(path, sizeof path, "%s/t.hpt", file);
    runs_unprofiled(path, "Not a directory");
    free(dir);
}

Test(diskfull, read_only_trace_directory_runs_the_program_unprofiled, .fini = unmount,
     .timeout = 300) {
    char path[4096];
    if (geteuid() != 0) {
        // without root, a directory without write permission does it
        char *dir = e2e_tmpdir("readonly");
        cr_assert_eq(chmod(dir, 0500), 0);
        snprintf(path, sizeof path, "%s/t.hpt", dir);
        runs_unprofiled(path, "Permission denied");
        chmod(dir, 0700);
        free(dir);
        return;
    }
    // root writes through permission bits: a read-only mount stops it
    mount_tmpfs("rofs", MS_RDONLY, "size=1m");
    snprintf(path, sizeof path, "%s/t.hpt", mnt);
    runs_unprofiled(path, "Read-only file system");
    cr_expect_eq(files_in(mnt), 0);
}
