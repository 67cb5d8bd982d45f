// SPDX-License-Identifier: MIT
// The command line and the shim's file handling: clear errors with status 2, --help, trace
// files that never overwrite or follow what is already there, bad settings that do no harm.
#include "spawn.h"

#include <criterion/criterion.h>
#include <dirent.h>
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

// An error line can quote a path or a string from the trace: its control bytes are escaped too.
Test(cli, error_line_escapes_control_bytes) {
    const char *args[] = {"stats", "/nonexistent/\x1b]0;PWNED\x07.hpt", NULL};
    char *err;
    cr_expect_eq(e2e_heapprof(args, NULL, &err), 2);
    cr_expect(one_line(err) && strstr(err, "/nonexistent/\\x1b]0;PWNED\\x07.hpt"), "stderr was: %s",
              err);
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

// Lines of s that contain needle.
static size_t count_lines_with(const char *s, const char *needle) {
    size_t n = 0;
    for (const char *l = s; l && *l;) {
        const char *nl = strchr(l, '\n');
        size_t len = nl ? (size_t)(nl - l) : strlen(l);
        const char *hit = strstr(l, needle);
        n += hit && hit < l + len;
        l = nl ? nl + 1 : NULL;
    }
    return n;
}

// Entries of dir whose names start with prefix.
static size_t count_entries(const char *dir, const char *prefix) {
    size_t n = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d, "%s", dir);
    for (struct dirent *e; (e = readdir(d));)
        n += strncmp(e->d_name, prefix, strlen(prefix)) == 0;
    closedir(d);
    return n;
}

// Runs execer (stage 2 only: 6 blocks, one process) with HEAPPROF_OUT=out and the extra env;
// asserts it exits 0 (the host is never broken) and returns its stderr.
static char *run_execer_to(const char *out, const char *const *env) {
    char *argv[] = {E2E_PROGS "/execer", "stage2", NULL};
    e2e_run_opts_t o = {.out_template = out, .env = env, .timeout_s = 120};
    char *err = NULL;
    cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "HEAPPROF_OUT=%s: stderr: %s", out, err);
    return err;
}

// HEAPPROF_OUT naming a character device: the trace goes into it, never into a regular file
// created beside it (it was /dev/null.1, issue 17 item 10). /dev/null swallows it; /dev/full
// fails the first write, and the shim says so once.
Test(cli, trace_to_a_device_goes_into_it_and_no_file_is_made_beside_it) {
    const char *env[] = {"HEAPPROF_CPU=0", NULL};
    size_t null_before = count_entries("/dev", "null.");
    size_t full_before = count_entries("/dev", "full.");
    char *err = run_execer_to("/dev/null", env);
    cr_expect_eq(count_lines_with(err, "heapprof: "), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "writing trace to /dev/null"), 1, "stderr: %s", err);
    free(err);
    err = run_execer_to("/dev/full", env);
    cr_expect_eq(count_lines_with(err, "heapprof: "), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "disk full"), 1, "stderr: %s", err);
    free(err);
    // heapprof run -o /dev/null: no "no trace was written (was the shim loaded?)" after it
    const char *run[] = {"run", "-o", "/dev/null", "--", E2E_PROGS "/execer", "stage2", NULL};
    cr_expect_eq(e2e_heapprof(run, NULL, &err), 0);
    cr_expect_eq(count_lines_with(err, "writing trace to /dev/null"), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "no trace"), 0, "stderr: %s", err);
    free(err);
    cr_expect_eq(count_entries("/dev", "null."), null_before, "a file was made beside /dev/null");
    cr_expect_eq(count_entries("/dev", "full."), full_before, "a file was made beside /dev/full");
}

// A FIFO or a directory at HEAPPROF_OUT cannot hold a trace: one line saying so, the program
// runs unprofiled (never blocked opening a FIFO without a reader), and no NAME.1.hpt appears.
Test(cli, trace_path_that_is_a_fifo_or_directory_runs_unprofiled_with_one_line) {
    char *dir = e2e_tmpdir("out_special");
    char fifo[4200], sub[4200];
    snprintf(fifo, sizeof fifo, "%s/fifo.hpt", dir);
    snprintf(sub, sizeof sub, "%s/sub.hpt", dir);
    cr_assert_eq(mkfifo(fifo, 0600), 0);
    cr_assert_eq(mkdir(sub, 0700), 0);
    const char *env[] = {"HEAPPROF_CPU=0", NULL};
    const char *paths[] = {fifo, sub}, *kinds[] = {"is a FIFO", "is a directory"};
    for (size_t i = 0; i < 2; i++) {
        char *err = run_execer_to(paths[i], env);
        cr_expect_eq(count_lines_with(err, "heapprof: "), 1, "stderr: %s", err);
        cr_expect_eq(count_lines_with(err, kinds[i]), 1, "stderr: %s", err);
        free(err);
    }
    cr_expect_eq(count_entries(dir, "fifo."), 1, "a file was created beside the FIFO");
    cr_expect_eq(count_entries(dir, "sub."), 1, "a file was created beside the directory");
    free(dir);
}

// HEAPPROF_QUIET=1 also quiets "writing trace to NAME.1.hpt (NAME exists)".
Test(cli, quiet_also_silences_the_next_free_name_line) {
    char *dir = e2e_tmpdir("quiet_exists");
    char trace[4200], next[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(next, sizeof next, "%s/t.1.hpt", dir);
    FILE *f = fopen(trace, "w");
    cr_assert_not_null(f);
    fclose(f);
    const char *env[] = {"HEAPPROF_CPU=0", "HEAPPROF_QUIET=1", NULL};
    char *err = run_execer_to(trace, env);
    cr_expect_eq(count_lines_with(err, "heapprof: "), 0, "stderr: %s", err);
    free(err);
    json_t *s = e2e_stats(next, "execer");
    cr_expect_eq(e2e_int(s, "blocks"), 6);
    json_decref(s);
    free(dir);
}

// Where the name is taken (an earlier image of the same pid: an exec chain), one line says
// both: "writing trace to NAME.1.hpt (NAME exists)".
Test(cli, a_taken_trace_name_is_said_in_the_one_line) {
    char *dir = e2e_tmpdir("taken_name");
    char trace[4200], want[8600];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(want, sizeof want, "writing trace to %s/t.1.hpt (%s exists)", dir, trace);
    FILE *f = fopen(trace, "w");
    cr_assert_not_null(f);
    fclose(f);
    const char *env[] = {"HEAPPROF_CPU=0", NULL};
    char *err = run_execer_to(trace, env);
    cr_expect_eq(count_lines_with(err, "heapprof: "), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, want), 1, "stderr: %s", err);
    free(err);
    free(dir);
}

// Where the traces go is checked before the command runs: a directory that is not there is
// one line and status 2, the command not started (each of its processes said it could not
// create its trace: a make -j2, 278 lines, and then "was the shim loaded?"); -o naming a
// directory puts heapprof.PID.hpt in it.
Test(cli, run_checks_where_the_traces_go_before_it_starts) {
    char *dir = e2e_tmpdir("run_out");
    char missing[4200], marker[4200], script[8600];
    snprintf(missing, sizeof missing, "%s/no/such/dir/t.%%p.hpt", dir);
    snprintf(marker, sizeof marker, "%s/ran", dir);
    snprintf(script, sizeof script, "touch %s", marker);
    const char *run[] = {"run", "-o", missing, "--", "/bin/sh", "-c", script, NULL};
    char *err = NULL;
    cr_expect_eq(e2e_heapprof(run, NULL, &err), 2);
    cr_expect_eq(count_lines_with(err, "heapprof: "), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "No such file or directory"), 1, "stderr: %s", err);
    cr_expect_neq(access(marker, F_OK), 0, "the command ran");
    free(err);
    const char *into_dir[] = {"run", "-o", dir, "--", E2E_PROGS "/execer", "stage2", NULL};
    cr_assert_eq(e2e_heapprof(into_dir, NULL, &err), 0, "stderr: %s", err);
    free(err);
    char files[2][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 2), 1);
    cr_expect(strstr(files[0], "/heapprof.") != NULL, "%s", files[0]);
    json_t *st = e2e_stats(files[0], "execer");
    cr_expect_eq(e2e_int(st, "blocks"), 6);
    json_decref(st);
    free(dir);
}

// The traces of a command's processes go where `heapprof run` was started (or -o), also for a
// process that changed its working directory before it ran the next program or forked: the
// shell's `cd` here put forker's trace and its child's in that directory, where the summary
// never looked.
// forker's traces in dir: how many are its parent's (15 blocks) and how many its child's or
// grandchild's (7 blocks).
static void count_forker_traces(const char *dir, int *parent, int *child) {
    char files[8][4096];
    int n = e2e_traces_in(dir, files, 8);
    *parent = *child = 0;
    for (int i = 0; i < n; i++) {
        json_t *st = e2e_stats(files[i], "forker");
        long long blocks = e2e_int(st, "blocks");
        *parent += blocks == 15;
        *child += blocks == 7;
        json_decref(st);
    }
}

Test(cli, run_keeps_every_trace_where_it_was_started) {
    char *top = e2e_tmpdir("run_cd");
    char dir[4200], sub[4300], script[8600];
    snprintf(dir, sizeof dir, "%s/at 100%%p", top); // the directory's '%' is not the template's
    free(top);
    cr_assert_eq(mkdir(dir, 0700), 0);
    snprintf(sub, sizeof sub, "%s/elsewhere", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    snprintf(script, sizeof script, "cd '%s' && exec %s", sub, E2E_PROGS "/forker");
    char *argv[] = {E2E_HEAPPROF, "run", "--", "/bin/sh", "-c", script, NULL};
    e2e_run_opts_t o = {.no_preload = true, .cwd = dir, .timeout_s = 60};
    char *err = NULL;
    cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "stderr: %s", err);
    free(err);
    char files[8][4096];
    cr_expect_eq(e2e_traces_in(sub, files, 8), 0, "a trace went where the shell moved to");
    int parent, child;
    count_forker_traces(dir, &parent, &child);
    cr_expect(parent == 1 && child == 1, "forker's traces: %d of the parent, %d of the child",
              parent, child);
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

// Runs execer (stage 2 only: 6 blocks) in a fresh directory with the given HEAPPROF_OUT (NULL:
// unset) and returns the path of the single trace it left there under the default name.
static char *default_named_trace(const char *tag, const char *out_template, char **err) {
    char *dir = e2e_tmpdir(tag);
    char *argv[] = {E2E_PROGS "/execer", "stage2", NULL};
    e2e_run_opts_t o = {.out_template = out_template, .cwd = dir, .timeout_s = 120};
    int pid;
    cr_assert_eq(e2e_run(argv, &o, NULL, err, &pid), 0, "stderr: %s", *err);
    char *path = malloc(4096);
    snprintf(path, 4096, "%s/heapprof.%d.hpt", dir, pid);
    free(dir);
    return path;
}

Test(cli, default_trace_name_is_created_private) {
    char *err;
    char *trace = default_named_trace("default", NULL, &err);
    struct stat st;
    cr_assert_eq(lstat(trace, &st), 0, "no trace under the default name %s; stderr: %s", trace,
                 err);
    cr_expect(S_ISREG(st.st_mode));
    cr_expect_eq(st.st_mode & 07777, 0600, "mode %o", (unsigned)(st.st_mode & 07777));
    json_t *s = e2e_stats(trace, "execer");
    cr_expect_eq(e2e_int(s, "blocks"), 6);
    json_decref(s);
    free(trace);
    free(err);
}

Test(cli, too_long_or_empty_output_path_is_rejected_and_the_default_used) {
    size_t n = 5000;
    char *long_out = malloc(n + 1);
    memset(long_out, 'x', n);
    long_out[n] = 0;
    const char *bad[] = {long_out, ""};
    for (size_t i = 0; i < 2; i++) {
        char *err;
        char *trace = default_named_trace("longout", bad[i], &err);
        cr_expect(strstr(err, "HEAPPROF_OUT"), "no message about HEAPPROF_OUT: %s", err);
        const char *line = strstr(err, "HEAPPROF_OUT");
        cr_expect(line && !strstr(line + 1, "HEAPPROF_OUT"), "more than one message: %s", err);
        cr_expect(!strstr(err, long_out), "the whole value was echoed back");
        struct stat st;
        cr_assert_eq(lstat(trace, &st), 0, "the default name %s was not used; stderr: %s", trace,
                     err);
        cr_expect_eq(st.st_mode & 07777, 0600);
        json_t *s = e2e_stats(trace, "execer");
        cr_expect_eq(e2e_int(s, "blocks"), 6);
        json_decref(s);
        free(trace);
        free(err);
    }
    free(long_out);
}

// -o FILE is written to a temporary file renamed over FILE, and only over a regular file: a
// symlink at FILE (planted in a shared directory, aimed at someone's file) is refused with one
// line and status 2, and neither the link nor its target is touched (issue 17, item 6).
Test(cli, output_at_a_symlink_is_refused_and_its_target_untouched) {
    char *dir = e2e_tmpdir("out_link");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_SAMPLES "/exact_counts", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    const char *cmds[][3] = {{"dhat", NULL, NULL},
                             {"flame", NULL, NULL},
                             {"flame", "--folded", NULL},
                             {"view", NULL, NULL}};
    for (size_t i = 0; i < sizeof cmds / sizeof cmds[0]; i++) {
        char target[4200], link[4200];
        snprintf(target, sizeof target, "%s/target%zu", dir, i);
        snprintf(link, sizeof link, "%s/link%zu", dir, i);
        FILE *f = fopen(target, "w");
        cr_assert_not_null(f);
        fputs("precious", f);
        fclose(f);
        cr_assert_eq(symlink(target, link), 0);
        const char *args[8] = {cmds[i][0], trace, "-o", link, cmds[i][1], NULL};
        char *err = NULL;
        cr_expect_eq(e2e_heapprof(args, NULL, &err), 2, "%s -o LINK: %s", cmds[i][0], err);
        cr_expect(one_line(err) && strstr(err, "symbolic link"), "%s: stderr was: %s", cmds[i][0],
                  err);
        free(err);
        struct stat st;
        cr_assert_eq(lstat(link, &st), 0);
        cr_expect(S_ISLNK(st.st_mode), "%s -o replaced the symlink", cmds[i][0]);
        cr_expect(stat(target, &st) == 0 && st.st_size == 8, "%s wrote through the link",
                  cmds[i][0]);
    }
    // nothing else was left in the directory: the trace, and per command a link and its target
    size_t n = 0;
    DIR *d = opendir(dir);
    cr_assert_not_null(d);
    for (struct dirent *e; (e = readdir(d));)
        n += e->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(n, 1 + 2 * sizeof cmds / sizeof cmds[0], "a temporary file was left behind");
    free(dir);
}

// heapprof run names the traces of the process it started and of its children, each with its
// program, and not a trace another run left in the same directory meanwhile (issue 22).
Test(cli, run_lists_its_own_process_tree_only) {
    char *dir = e2e_tmpdir("run_tree");
    char pattern[4200], decoy[4200];
    snprintf(pattern, sizeof pattern, "%s/t.%%p.hpt", dir);
    snprintf(decoy, sizeof decoy, "%s/t.999999.hpt", dir);
    const char *run[] = {"run", "-o", pattern, "--", E2E_PROGS "/run_decoy", decoy, NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(run, NULL, &err), 0, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "written to"), 2, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "trace of run_decoy (pid "), 2, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "t.999999.hpt"), 0, "stderr: %s", err);
    cr_expect_eq(count_entries(dir, "t."), 3, "the program, its child and the decoy");
    free(err);
    free(dir);
}

// A daemon's grandchild whose parent, the middle process, never allocated (and so left no trace
// to link it to the command's) is still the command's: the run's id in its header says so.
Test(cli, run_finds_a_daemons_grandchild_whose_parent_left_no_trace) {
    char *dir = e2e_tmpdir("run_daemon");
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/t.%%p.hpt", dir);
    const char *run[] = {"run", "-o", pattern, "--", E2E_PROGS "/forker", "daemon", NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(run, NULL, &err), 0, "stderr: %s", err);
    cr_expect_eq(count_entries(dir, "t."), 2, "the parent and the grandchild, not the middle");
    cr_expect_eq(count_lines_with(err, "trace of forker (pid "), 2, "stderr: %s", err);
    int parent, grandchild;
    count_forker_traces(dir, &parent, &grandchild);
    cr_expect(parent == 1 && grandchild == 1, "forker's traces: %d of the parent, %d of the "
              "grandchild", parent, grandchild);
    free(err);
    free(dir);
}

// A JIT's perf map lives in /tmp apart from the trace: heapprof run keeps a copy beside it
// (TRACE.perf.map), which the analyzer reads first, so the names stay with the trace after
// /tmp's copy is gone.
Test(cli, run_keeps_the_perf_map_beside_the_trace) {
    char *dir = e2e_tmpdir("run_perfmap");
    char pattern[4200];
    snprintf(pattern, sizeof pattern, "%s/t.%%p.hpt", dir);
    const char *run[] = {"run", "-o", pattern, "--", E2E_PROGS "/no_cfi", "tmp", NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(run, NULL, &err), 0, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "1 perf map of JIT code names kept beside its trace"), 1,
                 "stderr: %s", err);
    char files[2][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 2), 1);
    json_t *st = e2e_stats(files[0], NULL);
    char tmp_map[64];
    snprintf(tmp_map, sizeof tmp_map, "/tmp/perf-%lld.map", e2e_int(st, "pid"));
    json_decref(st);
    cr_expect_eq(unlink(tmp_map), 0, "%s: the program's own map", tmp_map);
    unsetenv("HEAPPROF_PERF_MAP");
    const char *report[] = {"report", files[0], NULL};
    char *text = e2e_heapprof_ok(report);
    cr_expect(strstr(text, "JIT code: 2 of 2 addresses outside every module named from"),
              "report: %s", text);
    cr_expect(strstr(text, "jit_trampoline") && strstr(text, "py_trampoline"), "report: %s",
              text);
    free(text);
    free(err);
    free(dir);
}

// A script's processes: the command says where its trace goes, the others do not (they wrote a
// line each, amid the script's output), and the end lists them as counts by program.
Test(cli, run_sums_up_the_traces_of_many_processes) {
    char *dir = e2e_tmpdir("run_many");
    char pattern[4200], script[8192];
    snprintf(pattern, sizeof pattern, "%s/t.%%p.hpt", dir);
    snprintf(script, sizeof script,
             "for i in 1 2 3 4 5 6 7 8 9 10 11 12; do %s/forker || exit 1; done", E2E_PROGS);
    const char *run[] = {"run", "-o", pattern, "--", "/bin/sh", "-c", script, NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(run, NULL, &err), 0, "stderr: %s", err);
    // forker: a parent and a forked child, a trace each
    cr_expect_geq(count_entries(dir, "t."), 24, "stderr: %s", err);
    cr_expect_leq(count_lines_with(err, "writing trace to"), 1, "stderr: %s", err);
    cr_expect_eq(count_lines_with(err, "more traces, of the processes it started, in "), 1,
                 "stderr: %s", err);
    cr_expect(strstr(err, "24 of forker"), "stderr: %s", err);
    cr_expect_leq(count_lines_with(err, "heapprof: "), 3, "stderr: %s", err);
    free(err);
    free(dir);
}
