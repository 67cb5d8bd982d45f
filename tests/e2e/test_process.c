// SPDX-License-Identifier: MIT
// Process lifecycle: a forked child writes its own trace without the parent's events, an exec'd
// image starts a new trace after the old one was flushed, a SIGKILLed app leaves a readable trace.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>


Test(process, forked_child_writes_its_own_trace) {
    char *dir = e2e_tmpdir("fork");
    char tmpl[4096], parent[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    char *argv[] = {E2E_PROGS "/forker", NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, NULL, &pid), 0);
    snprintf(parent, sizeof parent, "%s/t.%d.hpt", dir, pid);
    char files[4][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 4), 2, "expected one trace for the parent, one for the child");
    const char *child = strcmp(files[0], parent) ? files[0] : files[1];

    json_t *p = e2e_stats(parent, "forker");
    cr_expect_eq(e2e_int(p, "blocks"), 15);
    cr_expect_eq(e2e_int(p, "bytes"), 1250);
    cr_expect_eq(e2e_int(p, "end_blocks"), 15);
    cr_expect(json_is_false(json_object_get(p, "forked")));
    json_decref(p);

    json_t *c = e2e_stats(child, "forker");
    cr_expect_eq(e2e_int(c, "blocks"), 7, "the child's trace must not repeat the parent's events");
    cr_expect_eq(e2e_int(c, "bytes"), 7000);
    cr_expect_eq(e2e_int(json_object_get(c, "anomalies"), "unknown_frees"), 3);
    cr_expect(json_is_true(json_object_get(c, "forked")), "the child's trace must say it is one");
    cr_expect_eq(e2e_int(c, "ppid"), pid);
    json_decref(c);

    // The parent's blocks the child frees are expected there: counted apart, not anomalies.
    const char *stats[] = {"stats", child, NULL};
    char *out = e2e_heapprof_ok(stats);
    char want[128];
    snprintf(want, sizeof want, "forked     the trace of a fork child of pid %d: 3 frees", pid);
    cr_expect(strstr(out, want), "stats of the child:\n%s", out);
    cr_expect(!strstr(out, "anomalies"), "stats of the child:\n%s", out);
    free(out);
    free(dir);
}

// A relative HEAPPROF_OUT names a file in the directory the process started in, for its fork
// children too: a child that changed its working directory first (a daemon's chdir("/")) put its
// trace there, where nobody looked for it (and where it may not be allowed to write).
Test(process, a_relative_trace_name_is_taken_from_where_the_process_started) {
    char *top = e2e_tmpdir("forkchdir");
    char *dir = malloc(4096), sub[4200];
    snprintf(dir, 4096, "%s/at 100%%p", top); // the directory's '%' is not the template's
    cr_assert_eq(mkdir(dir, 0700), 0);
    free(top);
    snprintf(sub, sizeof sub, "%s/elsewhere", dir);
    cr_assert_eq(mkdir(sub, 0700), 0);
    char *argv[] = {E2E_PROGS "/forker", "chdir", sub, NULL};
    int pid;
    e2e_run_opts_t o = {.out_template = "t.%p.hpt", .cwd = dir, .timeout_s = 60};
    cr_assert_eq(e2e_run(argv, &o, NULL, NULL, &pid), 0);
    char files[4][4096];
    cr_expect_eq(e2e_traces_in(sub, files, 4), 0, "a trace went where the child moved to");
    cr_assert_eq(e2e_traces_in(dir, files, 4), 2, "expected one trace for the parent, one for the child");
    char parent[4096];
    snprintf(parent, sizeof parent, "%s/t.%d.hpt", dir, pid);
    const char *child = strcmp(files[0], parent) ? files[0] : files[1];
    json_t *c = e2e_stats(child, "forker");
    cr_expect_eq(e2e_int(c, "blocks"), 7);
    cr_expect_eq(e2e_int(c, "bytes"), 7000);
    json_decref(c);
    free(dir);
}

// A fork child that execs is a new image: its trace after the exec is nobody's fork child.
Test(process, a_fork_child_that_execs_starts_a_trace_of_its_own) {
    char *dir = e2e_tmpdir("forkexec");
    char tmpl[4096], parent[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    char *argv[] = {E2E_PROGS "/forker", "exec", NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, NULL, &pid), 0);
    snprintf(parent, sizeof parent, "%s/t.%d.hpt", dir, pid);
    char files[4][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 4), 3, "the parent's, the child's and its new image's");
    int seen = 0;
    for (int i = 0; i < 3; i++) {
        json_t *s = e2e_stats(files[i], NULL);
        bool forked = json_is_true(json_object_get(s, "forked"));
        long long blocks = e2e_int(s, "blocks"), unknown =
            e2e_int(json_object_get(s, "anomalies"), "unknown_frees");
        if (!strcmp(files[i], parent)) {
            cr_expect(!forked);
            cr_expect_eq(blocks, 15);
            seen |= 1;
        } else if (blocks == 7) {
            cr_expect(forked, "%s: the child before its exec", files[i]);
            cr_expect_eq(unknown, 3);
            seen |= 2;
        } else {
            cr_expect(!forked, "%s: the image the child exec'd", files[i]);
            cr_expect_eq(blocks, 2);
            cr_expect_eq(unknown, 0);
            seen |= 4;
        }
        json_decref(s);
    }
    cr_expect_eq(seen, 7);
    free(dir);
}

Test(process, exec_flushes_and_the_new_image_starts_a_new_trace) {
    char *dir = e2e_tmpdir("exec");
    char tmpl[4096], first[4096], second[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    char *argv[] = {E2E_PROGS "/execer", NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, NULL, &pid), 0);
    snprintf(first, sizeof first, "%s/t.%d.hpt", dir, pid);
    snprintf(second, sizeof second, "%s/t.%d.1.hpt", dir, pid);
    json_t *a = e2e_stats(first, "execer");
    cr_expect_eq(e2e_int(a, "blocks"), 4, "events before exec were not flushed");
    cr_expect_eq(e2e_int(a, "bytes"), 256);
    json_decref(a);
    json_t *b = e2e_stats(second, "execer");
    cr_expect_eq(e2e_int(b, "blocks"), 6);
    cr_expect_eq(e2e_int(b, "bytes"), 192);
    json_decref(b);
    free(dir);
}

static void crash_leaves_trace(const char *how, int status) {
    char *dir = e2e_tmpdir("crash");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/crasher", (char *)how, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), status);
    json_t *s = e2e_stats(trace, "crasher");
    cr_expect_eq(e2e_int(s, "blocks"), 1000, "%s: events older than the flush interval were lost",
                 how);
    cr_expect(json_is_false(json_object_get(json_object_get(s, "damage"), "clean_exit")));
    json_decref(s);
    free(dir);
}

Test(process, sigkilled_app_leaves_a_readable_trace) {
    crash_leaves_trace("kill", 128 + 9);
}
Test(process, aborting_app_leaves_a_readable_trace) {
    crash_leaves_trace("abort", 128 + 6);
}
Test(process, segfaulting_app_leaves_a_readable_trace) {
    crash_leaves_trace("segv", 128 + 11);
}

Test(process, dup2_over_or_closing_the_trace_fd_never_writes_into_the_programs_files) {
    char *dir = e2e_tmpdir("fds");
    char trace[4096], own[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(own, sizeof own, "%s/own-file", dir);
    FILE *f = fopen(own, "w");
    fclose(f);
    char *argv[] = {E2E_PROGS "/fdcloser", own, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    struct stat st;
    cr_assert_eq(stat(own, &st), 0);
    cr_expect_eq(st.st_size, 0, "trace bytes were written into the program's own file");
    json_t *s = e2e_stats(trace, "fdcloser");
    cr_expect_eq(e2e_int(s, "blocks"), 250, "events after dup2 or close were lost");
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
    json_decref(s);
    free(dir);
}

// Issue #17: _exit and _Exit skip the destructor that writes the last flush interval and the
// trailer; for a short process that was the whole trace. In vfork mode a child calls _exit
// between the two halves: it shares the parent's memory and must not stop the parent's writer.
static void exit_now_keeps_every_block(const char *mode) {
    char *dir = e2e_tmpdir("exit_now");
    char tmpl[4096], trace[4096], expect[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    snprintf(expect, sizeof expect, "%s/exit_now.expect", E2E_SAMPLES);
    char *argv[] = {E2E_SAMPLES "/exit_now", (char *)mode, NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, NULL, &pid), 0, "%s", mode);
    char files[4][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 4), 1, "%s: one trace (a vfork child writes none)", mode);
    snprintf(trace, sizeof trace, "%s/t.%d.hpt", dir, pid);
    json_t *s = e2e_stats(trace, "exit_now");
    const char *keys[] = {"blocks", "bytes", "frees", "peak_blocks", "peak_bytes", "end_blocks",
                          "end_bytes"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        long long want = e2e_expect(expect, keys[i]);
        cr_assert_neq(want, -1, "%s missing from %s", keys[i], expect);
        cr_expect_eq(e2e_int(s, keys[i]), want, "%s: %s: heapprof says %lld, the sample makes %lld",
                     mode, keys[i], e2e_int(s, keys[i]), want);
    }
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")),
              "%s: no trailer", mode);
    json_decref(s);
    free(dir);
}

Test(process, underscore_exit_right_after_100000_allocations_keeps_them_all) {
    exit_now_keeps_every_block("_exit");
}
Test(process, underscore_Exit_right_after_100000_allocations_keeps_them_all) {
    exit_now_keeps_every_block("_Exit");
}
Test(process, a_vfork_child_calling_underscore_exit_leaves_the_parents_trace_alone) {
    exit_now_keeps_every_block("vfork");
}

// The same child calling exit(): our destructor ran in it, in the parent's memory, and ended the
// parent's recording (its state, its writer) halfway.
Test(process, a_vfork_child_calling_exit_leaves_the_parents_trace_alone) {
    exit_now_keeps_every_block("vfork_exit");
}

// Runs prog, which links early_lib.c, and checks that every one of its constructor's 20,000
// blocks is in the trace, freed, and that nothing was lost or freed unseen.
static void early_blocks_all_recorded(const char *prog) {
    char *dir = e2e_tmpdir("early");
    char trace[4200], path[4200];
    snprintf(trace, sizeof trace, "%s/early.hpt", dir);
    snprintf(path, sizeof path, "%s/%s", E2E_PROGS, prog);
    char *argv[] = {path, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0, "%s", prog);
    long long bytes = 0; // what early_lib.c asks for
    for (long long i = 0; i < 20000; i++)
        bytes += i % 4 < 2 ? 16 + i % 64 : 200 + i % 300;
    json_t *s = e2e_stats(trace, "libhp_early.so");
    cr_expect_eq(e2e_int(s, "blocks"), 20000, "%s", prog);
    cr_expect_eq(e2e_int(s, "bytes"), bytes, "%s", prog);
    cr_expect_eq(e2e_int(s, "frees"), 20000, "%s", prog);
    cr_expect_eq(e2e_int(s, "end_blocks"), 0, "%s", prog);
    json_decref(s);
    s = e2e_stats(trace, NULL);
    cr_expect_eq(e2e_int(json_object_get(s, "shim"), "events_lost"), 0, "%s", prog);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "unknown_frees"), 0, "%s", prog);
    json_decref(s);
    free(dir);
}

// A library the program links allocates 20,000 blocks in its static constructor, which the
// loader runs before the preloaded shim's: recording starts at the first of them, and until our
// constructor opens the trace nothing drains the thread's ring, which used to drop what did not
// fit its first 64 KiB (clang lost ~5,600 events so). Now it grows with its records kept, up
// to the largest ring: every block is in the trace, from its library, and the shim lost none.
Test(process, allocations_before_the_shims_constructor_are_all_recorded) {
    early_blocks_all_recorded("early_init");
}

// The same library in a program that has jemalloc linked in and exported (rustc does): the
// loader binds the library's calls to the executable's malloc, which the shim sees only once its
// entry is hooked. That used to happen at set-up, after the library's constructor: its 20,000
// blocks were missing and the 10,000 freed later were "frees of unknown addresses". The entry is
// now armed while the loader relocates the shim, and its first call starts set-up.
Test(process, allocations_before_the_shims_constructor_through_the_programs_own_malloc) {
    early_blocks_all_recorded("je_early");
}

// A linked library frees 2,000 blocks as the process is torn down, in its destructor and in
// an exit handler it registered (as C++ statics are): the loader runs those after the shim's
// destructor, which used to end the trace there and call the blocks live at exit. The shim now
// ends it in an exit handler that runs after every library's destructors: all are freed.
Test(process, frees_in_libraries_destructors_after_the_shims_are_recorded) {
    char *dir = e2e_tmpdir("exitlib");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/exit.hpt", dir);
    char *argv[] = {E2E_PROGS "/exit_main", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    json_t *s = e2e_stats(trace, "libhp_exit.so");
    cr_expect_eq(e2e_int(s, "blocks"), 2000);
    cr_expect_eq(e2e_int(s, "frees"), 2000);
    cr_expect_eq(e2e_int(s, "end_blocks"), 0, "blocks freed by the library's destructors are "
                                               "reported live at exit");
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
    json_decref(s);
    free(dir);
}

// A library registers 200 exit handlers in its constructor, before the program's start
// registers the loader's _dl_fini: glibc allocated blocks for them (calloc, 32 handlers each)
// and frees those only after _dl_fini has run, after the shim's destructor and the exit handler
// it adds there. They were live at exit (clang's and rustc's LLVM: 87 blocks); the trace now
// ends at stdio's flush, the last thing exit() does: every block is freed, as DHAT sees it.
Test(process, exit_handler_lists_freed_after_the_loaders_finalisation_are_recorded) {
    char *dir = e2e_tmpdir("atexit");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/atexit.hpt", dir);
    char *argv[] = {E2E_PROGS "/atexit_main", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    json_t *s = e2e_stats(trace, NULL); // the program allocates nothing else
    cr_expect_geq(e2e_int(s, "blocks"), 5, "200 handlers take at least 5 blocks of 32");
    cr_expect_eq(e2e_int(s, "frees"), e2e_int(s, "blocks"));
    cr_expect_eq(e2e_int(s, "end_blocks"), 0, "glibc's exit-handler lists reported live at exit");
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
    json_decref(s);
    free(dir);
}

// The shim samples the process's resident set at each flush (the SYNC chunks): stats' peak RSS
// is within 5% of the peak the kernel counted for the process itself (getrusage), on a program
// whose peak, 64 MiB written and kept, lasts to its exit (issue 22).
Test(process, peak_rss_agrees_with_the_kernels) {
    char *dir = e2e_tmpdir("rss");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/rss.hpt", dir);
    char *argv[] = {E2E_PROGS "/rss", NULL};
    e2e_run_opts_t o = {.out_template = trace};
    char *out = NULL;
    cr_assert_eq(e2e_run(argv, &o, &out, NULL, NULL), 0);
    const char *m = strstr(out, "maxrss_kb=");
    cr_assert_not_null(m, "%s", out);
    long long kernel = atoll(m + 10) * 1024;
    json_t *s = e2e_stats(trace, NULL);
    cr_assert_gt(e2e_int(s, "rss_samples"), 0);
    long long ours = e2e_int(s, "peak_rss_bytes");
    cr_expect(ours >= kernel * 95 / 100 && ours <= kernel * 105 / 100,
              "peak RSS %lld bytes, the kernel's %lld", ours, kernel);
    cr_expect_geq(ours, 64ll << 20);
    json_decref(s);
    free(out);
    free(dir);
}

// `heapprof run --no-children` (HEAPPROF_ONLY_PID): the command's process is recorded, through
// its exec too, and the processes it starts pass through with no trace and no thread of ours.
Test(process, no_children_records_the_command_alone) {
    char *dir = e2e_tmpdir("nochildren");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    const char *fork_exec[] = {"run", "-o", tmpl, "--no-children", "--", E2E_PROGS "/forker",
                               "exec", NULL};
    char *err = NULL;
    cr_assert_eq(e2e_heapprof(fork_exec, NULL, &err), 0, "%s", err);
    free(err);
    char files[4][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 4), 1, "the parent's trace alone");
    json_t *p = e2e_stats(files[0], "forker");
    cr_expect_eq(e2e_int(p, "blocks"), 15);
    cr_expect_eq(e2e_int(p, "end_blocks"), 15);
    json_decref(p);
    free(dir);

    dir = e2e_tmpdir("nochildren_exec");
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    const char *exec_self[] = {"run", "-o", tmpl, "--no-children", "--", E2E_PROGS "/execer", NULL};
    err = NULL;
    cr_assert_eq(e2e_heapprof(exec_self, NULL, &err), 0, "%s", err);
    free(err);
    cr_expect_eq(e2e_traces_in(dir, files, 4), 2, "the command's image and the one it exec'd");
    free(dir);
}
