// SPDX-License-Identifier: MIT
// cmd_run: argument parsing, trace path expansion, locating libheapprof.so beside the
// executable, exit status propagation, exec failures.
#include "cmd/cmd_run.h"

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

Test(cmd_run, parse_takes_output_and_command) {
    cmd_run_opts_t o;
    errmsg_t err;
    errmsg_init(&err);
    char *a[] = {"run", "-o", "t.%p.hpt", "--", "ls", "-l", NULL};
    cr_assert_eq(cmd_run_parse(6, a, &o, &err), 0);
    cr_assert_str_eq(o.out, "t.%p.hpt");
    cr_assert_str_eq(o.cmd[0], "ls");
    cr_assert_str_eq(o.cmd[1], "-l");
    cr_assert_null(o.cmd[2]);
    char *b[] = {"run", "ls", "-o", NULL}; // options after the command belong to it
    cr_assert_eq(cmd_run_parse(3, b, &o, &err), 0);
    cr_assert_null(o.out);
    cr_assert_str_eq(o.cmd[1], "-o");
    char *c[] = {"run", "-o", "x", NULL};
    cr_assert_eq(cmd_run_parse(3, c, &o, &err), -1);
    cr_assert_not_null(strstr(err.msg, "missing command"));
    errmsg_init(&err);
    char *d[] = {"run", "--bogus", "ls", NULL};
    cr_assert_eq(cmd_run_parse(3, d, &o, &err), -1);
    cr_assert_not_null(strstr(err.msg, "unknown option '--bogus'"));
}

Test(cmd_run, parse_takes_sample_bytes_with_suffixes) {
    cmd_run_opts_t o;
    errmsg_t err;
    errmsg_init(&err);
    char *a[] = {"run", "--sample-bytes", "524288", "ls", NULL};
    cr_assert_eq(cmd_run_parse(4, a, &o, &err), 0);
    cr_assert_str_eq(o.sample_bytes, "524288");
    cr_assert_str_eq(o.cmd[0], "ls");
    static const struct {
        const char *arg, *want;
    } ok[] = {{"--sample-bytes=512K", "524288"}, {"--sample-bytes=4MiB", "4194304"},
              {"--sample-bytes=1G", "1073741824"}, {"--sample-bytes=0", "0"},
              {"--sample-bytes=64kB", "65536"}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        char *b[] = {"run", (char *)ok[i].arg, "ls", NULL};
        cr_assert_eq(cmd_run_parse(3, b, &o, &err), 0, "%s: %s", ok[i].arg, err.msg);
        cr_expect_str_eq(o.sample_bytes, ok[i].want, "%s", ok[i].arg);
    }
    static const char *bad[] = {"--sample-bytes=", "--sample-bytes=-1", "--sample-bytes=12X",
                                "--sample-bytes=2G", "--sample-bytes=1073741825",
                                "--sample-bytes=99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        errmsg_init(&err);
        char *b[] = {"run", (char *)bad[i], "ls", NULL};
        cr_expect_eq(cmd_run_parse(3, b, &o, &err), -1, "%s accepted", bad[i]);
        cr_expect_not_null(strstr(err.msg, "--sample-bytes"), "%s: %s", bad[i], err.msg);
    }
    char *c[] = {"run", "ls", NULL};
    cr_assert_eq(cmd_run_parse(2, c, &o, &err), 0);
    cr_expect_str_eq(o.sample_bytes, "", "without the option the environment's stays");
}

Test(cmd_run, trace_path_replaces_every_pid_marker) {
    char out[64];
    cr_assert_eq(cmd_run_trace_path("heapprof.%p.hpt", 1234, out, sizeof out), 0);
    cr_assert_str_eq(out, "heapprof.1234.hpt");
    cr_assert_eq(cmd_run_trace_path("/t/%p/x%p%", 7, out, sizeof out), 0);
    cr_assert_str_eq(out, "/t/7/x7%");
    cr_assert_eq(cmd_run_trace_path("plain.hpt", 7, out, sizeof out), 0);
    cr_assert_str_eq(out, "plain.hpt");
    cr_assert_eq(cmd_run_trace_path("100%%.%p", 5, out, sizeof out), 0);
    cr_assert_str_eq(out, "100%.5");
    cr_assert_eq(cmd_run_trace_path("%p%p%p", 123456, out, 10), -1);
}

static void touch(const char *p) {
    int fd = open(p, O_CREAT | O_WRONLY, 0644);
    cr_assert_geq(fd, 0);
    close(fd);
}

Test(cmd_run, finds_the_module_beside_the_executable) {
    char root[] = "/tmp/hpt-run-XXXXXX";
    cr_assert_not_null(mkdtemp(root));
    char p[256], exe[256], out[4096], want[4096];
    snprintf(p, sizeof p, "%s/bin", root);
    mkdir(p, 0755);
    snprintf(exe, sizeof exe, "%s/bin/heapprof", root);
    // nothing there: the bare name, for the loader's search path
    cr_assert_eq(cmd_run_find_preload(exe, out, sizeof out), 0);
    cr_assert_str_eq(out, "libheapprof.so");
    // install layout
    snprintf(p, sizeof p, "%s/lib", root);
    mkdir(p, 0755);
    snprintf(p, sizeof p, "%s/lib/libheapprof.so", root);
    touch(p);
    cr_assert_eq(cmd_run_find_preload(exe, out, sizeof out), 0);
    cr_assert_not_null(realpath(p, want));
    cr_assert_str_eq(out, want);
    // the build tree wins
    char q[256];
    snprintf(q, sizeof q, "%s/preload", root);
    mkdir(q, 0755);
    snprintf(q, sizeof q, "%s/preload/libheapprof.so", root);
    touch(q);
    cr_assert_eq(cmd_run_find_preload(exe, out, sizeof out), 0);
    cr_assert_not_null(realpath(q, want));
    cr_assert_str_eq(out, want);
    unlink(q);
    unlink(p);
    snprintf(p, sizeof p, "%s/preload", root);
    rmdir(p);
    snprintf(p, sizeof p, "%s/lib", root);
    rmdir(p);
    snprintf(p, sizeof p, "%s/bin", root);
    rmdir(p);
    rmdir(root);
}

// Runs cmd with traces going to /tmp/hpt-run-none.%p.hpt; removes whatever trace was written
// (a libheapprof.so may be installed where the loader finds it, or may not).
static int run(char **cmd, cmd_run_result_t *res, errmsg_t *err) {
    cmd_run_opts_t o = {.out = "/tmp/hpt-run-none.%p.hpt", .cmd = cmd};
    int rc = cmd_run_exec(&o, res, err);
    for (size_t i = 0; i < res->n_traces; i++)
        unlink(res->traces[i]);
    return rc;
}

Test(cmd_run, passes_on_the_exit_status) {
    cmd_run_result_t res;
    errmsg_t err;
    errmsg_init(&err);
    char *a[] = {"sh", "-c", "exit 7", NULL};
    cr_assert_eq(run(a, &res, &err), 0, "%s", err.msg);
    cr_assert_eq(res.exit_status, 7);
    cr_assert_gt(res.pid, 0);
    char want[64];
    snprintf(want, sizeof want, "/tmp/hpt-run-none.%d.hpt", (int)res.pid);
    cr_assert_str_eq(res.expected, want);
    cmd_run_result_fini(&res);
    char *b[] = {"sh", "-c", "kill -9 $$", NULL};
    cr_assert_eq(run(b, &res, &err), 0);
    cr_assert_eq(res.exit_status, 128 + 9);
    cmd_run_result_fini(&res);
}

Test(cmd_run, sets_the_environment_of_the_command) {
    cmd_run_result_t res;
    errmsg_t err;
    errmsg_init(&err);
    setenv("LD_PRELOAD", "", 1);
    char *a[] = {"sh", "-c",
                 "case \"$LD_PRELOAD\" in *libheapprof.so*) ;; *) exit 3;; esac; "
                 "[ \"$HEAPPROF_OUT\" = /tmp/hpt-run-none.%p.hpt ] || exit 4",
                 NULL};
    cr_assert_eq(run(a, &res, &err), 0);
    cr_assert_eq(res.exit_status, 0);
    cmd_run_result_fini(&res);
}

Test(cmd_run, missing_command_is_an_exec_failure) {
    cmd_run_result_t res;
    errmsg_t err;
    errmsg_init(&err);
    char *a[] = {"/nonexistent/program", NULL};
    cr_assert_eq(run(a, &res, &err), -1);
    cr_assert(res.exec_failed);
    cr_assert_eq(res.exit_status, 127);
    cr_assert_not_null(strstr(err.msg, "cannot run '/nonexistent/program'"), "%s", err.msg);
    cmd_run_result_fini(&res);
}

// The shim names a second trace of the same pid (after exec, or when the name exists)
// NAME.1.hpt, and a forked child's trace carries the child's pid. A file that fits the pattern
// but is no trace of the command's process tree (t.7.hpt here is not a trace at all: another
// run's would name another pid in its header) is not listed (test_cli.c checks real traces).
Test(cmd_run, lists_own_traces_first_then_descendants) {
    char dir[] = "/tmp/hpt-run-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char pattern[128], script[512];
    snprintf(pattern, sizeof pattern, "%s/t.%%p.hpt", dir);
    snprintf(script, sizeof script,
             "cd %s && : > t.$$.hpt && : > t.$$.1.hpt && : > t.7.hpt && : > other.hpt && "
             ": > t.x.hpt",
             dir);
    char *cmd[] = {"sh", "-c", script, NULL};
    cmd_run_opts_t o = {.out = pattern, .cmd = cmd};
    cmd_run_result_t res;
    errmsg_t err;
    errmsg_init(&err);
    cr_assert_eq(cmd_run_exec(&o, &res, &err), 0, "%s", err.msg);
    cr_assert_eq(res.exit_status, 0);
    cr_assert_eq(res.n_traces, 2);
    char want[256];
    snprintf(want, sizeof want, "%s/t.%d.hpt", dir, (int)res.pid);
    cr_assert_str_eq(res.traces[0], want);
    snprintf(want, sizeof want, "%s/t.%d.1.hpt", dir, (int)res.pid);
    cr_assert_str_eq(res.traces[1], want);
    const char *names[] = {"t.7.hpt", "other.hpt", "t.x.hpt"};
    for (size_t i = 0; i < 3; i++) {
        snprintf(want, sizeof want, "%s/%s", dir, names[i]);
        unlink(want);
    }
    for (size_t i = 0; i < 2; i++)
        unlink(res.traces[i]);
    cmd_run_result_fini(&res);
    rmdir(dir);
}
