// SPDX-License-Identifier: MIT
// The shim never changes what the host program sees, and survives what host programs do:
// libc's edge-case results and errno are identical with and without it; malloc in a signal
// handler and in a destructor after the exit flush, posix_spawn, system(), vfork + exec and a
// double-forking daemon all work, and every process image gets its own complete trace.
#include "spawn.h"

#include <criterion/criterion.h>
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    cr_assert(f, "cannot open %s", path);
    static char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    buf[n] = 0;
    fclose(f);
    return strdup(buf);
}

Test(host_safety, libc_edge_cases_return_exactly_what_libc_returns) {
    char *dir = e2e_tmpdir("edge");
    char cmd[16384], plain[4096], shim[4096];
    snprintf(plain, sizeof plain, "%s/plain.txt", dir);
    snprintf(shim, sizeof shim, "%s/shim.txt", dir);
    snprintf(cmd, sizeof cmd, "%s/edge_semantics > %s", E2E_PROGS, plain);
    cr_assert_eq(system(cmd), 0);
    snprintf(cmd, sizeof cmd,
             "env HEAPPROF_QUIET=1 HEAPPROF_OUT=%s/t.hpt LD_PRELOAD=%s %s/edge_semantics > %s", dir,
             E2E_LIB, E2E_PROGS, shim);
    cr_assert_eq(system(cmd), 0);
    char *a = slurp(plain), *b = slurp(shim);
    cr_expect_str_eq(b, a, "results differ under the shim:\n--- without\n%s\n--- with\n%s", a, b);
    cr_expect(strstr(a, "calloc(SIZE_MAX, 2) overflow       NULL errno=12"), "unexpected libc: %s", a);
    free(a);
    free(b);
    free(dir);
}

Test(host_safety, signal_handlers_destructors_spawn_system_vfork_and_daemons, .timeout = 120) {
    char *dir = e2e_tmpdir("life");
    char tmpl[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    char *argv[] = {E2E_PROGS "/lifecycle", NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, NULL, &pid), 0);
    // From-module block counts of every trace: main 200 (handler) + 200 (loop) + 100 (late
    // destructor); each exec'd "child" image 3 + 100; the daemon's middle process 100 (its
    // destructor); its grandchild 5 + 100. /bin/sh from system() makes none of ours.
    // The daemon's grandchild exits on its own time: on a loaded machine, wait for it (5 s).
    long long want[] = {500, 103, 103, 103, 100, 105};
    int found[6], traces = 0, unclean = 0, stray = 0;
    for (int attempt = 0; attempt < 25; attempt++) {
        usleep(200 * 1000);
        memset(found, 0, sizeof found);
        traces = unclean = stray = 0;
        DIR *d = opendir(dir);
        struct dirent *e;
        while ((e = readdir(d))) {
            if (!strstr(e->d_name, ".hpt"))
                continue;
            char path[4096];
            snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
            json_t *s = e2e_stats(path, "lifecycle");
            long long blocks = e2e_int(s, "blocks");
            unclean += !json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit"));
            json_decref(s);
            traces++;
            if (blocks == 0)
                continue; // the shell
            int matched = 0;
            for (int i = 0; i < 6 && !matched; i++)
                if (!found[i] && want[i] == blocks)
                    found[i] = matched = 1;
            stray += !matched; // a trace of a process this program does not make
        }
        closedir(d);
        int all = 1;
        for (int i = 0; i < 6; i++)
            all &= found[i];
        if (all && !unclean)
            break;
    }
    cr_expect_eq(unclean, 0, "%d of %d traces did not end cleanly", unclean, traces);
    cr_expect_eq(stray, 0, "%d traces have block counts no process of this program makes", stray);
    for (int i = 0; i < 6; i++)
        cr_expect(found[i], "no trace with %lld blocks (of %d traces)", want[i], traces);
    free(dir);
}

// Threads that make their first allocation while main runs exit(): every run ends (no hang,
// no crash) and leaves exactly one trace, under both CPU samplers. A short loop here;
// tests/e2e/stress_exit_race.sh runs the 2,000.
static void exit_race_runs(const char *cpu, int runs) {
    char *dir = e2e_tmpdir("exitrace");
    char tmpl[4096], cpu_env[64];
    snprintf(tmpl, sizeof tmpl, "%s/r.%%p.hpt", dir);
    snprintf(cpu_env, sizeof cpu_env, "HEAPPROF_CPU=%s", cpu);
    const char *env[] = {cpu_env, "HEAPPROF_QUIET=1", NULL};
    for (int i = 0; i < runs; i++) {
        char delay[16];
        snprintf(delay, sizeof delay, "%d", i % 5 * 30);
        char *argv[] = {E2E_PROGS "/exitrace", delay, "4", NULL};
        e2e_run_opts_t o = {.out_template = tmpl, .env = env, .timeout_s = 30};
        cr_assert_eq(e2e_run(argv, &o, NULL, NULL, NULL), 0, "run %d (%s) did not exit cleanly", i,
                     cpu);
    }
    int traces = 0;
    DIR *d = opendir(dir);
    for (struct dirent *e; (e = readdir(d));)
        traces += e->d_name[0] != '.';
    closedir(d);
    cr_expect_eq(traces, runs, "%d traces for %d processes (%s)", traces, runs, cpu);
    free(dir);
}

Test(host_safety, threads_starting_while_main_exits_never_hang_or_start_a_second_trace,
     .timeout = 300) {
    exit_race_runs("perf", 60);
    exit_race_runs("timer", 60);
}

// Issue #17: glibc takes the shim's static TLS out of every thread's stack, so 29.6 KiB of it
// made pthread_create fail with EINVAL for a 16 KiB stack, also with HEAPPROF_ENABLE=0.
// small_stacks creates such threads (and one 44 KiB deep in a 64 KiB stack), allocates in them
// and in a key destructor that runs after the shim has given the thread's block back.
Test(host_safety, threads_with_16_kib_stacks_are_created_and_every_block_recorded) {
    char *dir = e2e_tmpdir("small_stacks");
    char trace[4096], expect[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(expect, sizeof expect, "%s/small_stacks.expect", E2E_SAMPLES);
    char *argv[] = {E2E_SAMPLES "/small_stacks", NULL};
    char *err = NULL;
    static const char *const off[] = {"HEAPPROF_ENABLE=0", NULL};
    e2e_run_opts_t o = {.out_template = trace, .env = off};
    cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "with HEAPPROF_ENABLE=0: %s", err);
    free(err);
    err = NULL;
    static const char *const timer[] = {"HEAPPROF_CPU=timer", NULL};
    for (int k = 0; k < 2; k++) {
        snprintf(trace, sizeof trace, "%s/t%d.hpt", dir, k);
        o = (e2e_run_opts_t){.out_template = trace, .env = k ? timer : NULL};
        cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "profiling: %s", err);
        free(err);
        err = NULL;
        json_t *s = e2e_stats(trace, "small_stacks");
        const char *keys[] = {"blocks", "bytes", "frees", "peak_blocks", "peak_bytes",
                              "end_blocks", "end_bytes", "threads"};
        for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
            long long want = e2e_expect(expect, keys[i]);
            cr_assert_neq(want, -1, "%s missing from %s", keys[i], expect);
            cr_expect_eq(e2e_int(s, keys[i]), want, "%s: heapprof says %lld, the sample makes %lld",
                         keys[i], e2e_int(s, keys[i]), want);
        }
        cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
        json_decref(s);
    }
    free(dir);
}

// Issue #17: a signal handler that interrupted the shim (holding its recursion guard) and
// siglongjmp'd out left the guard set: recording stopped for good while the trace said clean
// and 0 lost. longjmp_guard does that 50 times (a fault inside the shim's free, deterministic)
// and allocates after each jump: every block must be recorded and nothing reported lost.
Test(host_safety, recording_resumes_after_a_longjmp_out_of_a_handler_that_interrupted_it) {
    char *dir = e2e_tmpdir("longjmp_guard");
    char trace[4096], expect[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(expect, sizeof expect, "%s/longjmp_guard.expect", E2E_SAMPLES);
    char *argv[] = {E2E_SAMPLES "/longjmp_guard", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    json_t *s = e2e_stats(trace, "longjmp_guard");
    const char *keys[] = {"blocks", "bytes", "frees", "peak_blocks", "peak_bytes",
                          "end_blocks", "end_bytes", "threads"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        long long want = e2e_expect(expect, keys[i]);
        cr_assert_neq(want, -1, "%s missing from %s", keys[i], expect);
        cr_expect_eq(e2e_int(s, keys[i]), want, "%s: heapprof says %lld, the sample makes %lld",
                     keys[i], e2e_int(s, keys[i]), want);
    }
    cr_expect_eq(e2e_int(json_object_get(s, "shim"), "events_lost"), 0);
    cr_expect_eq(e2e_int(json_object_get(s, "anomalies"), "unknown_frees"), 0);
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
    json_decref(s);
    free(dir);
}

// A child cloned by the system call itself (Chromium's zygote, sandboxes) runs none of the
// parent's fork handlers: it used to write its first event into a ring that fork does not copy
// and die of SIGSEGV. It and its own fork child now pass every call through (their exit
// handlers too), and an image either of them execs records as usual. Under HEAPPROF_CPU=timer
// as well: the parent's sampling thread and timers are not the child's.
Test(host_safety, a_child_cloned_without_fork_handlers_runs_unprofiled_and_unharmed,
     .timeout = 120) {
    static const char *const timer[] = {"HEAPPROF_CPU=timer", NULL};
    for (int k = 0; k < 2; k++) {
        char *dir = e2e_tmpdir("raw_clone");
        char tmpl[4096], parent[4096];
        snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
        char *argv[] = {E2E_PROGS "/raw_clone", NULL};
        char *err = NULL;
        int pid;
        e2e_run_opts_t o = {.out_template = tmpl, .env = k ? timer : NULL, .timeout_s = 60};
        cr_assert_eq(e2e_run(argv, &o, NULL, &err, &pid), 0, "raw_clone failed: %s", err);
        free(err);
        snprintf(parent, sizeof parent, "%s/t.%d.hpt", dir, pid);
        char files[4][4096];
        cr_assert_eq(e2e_traces_in(dir, files, 4), 2, "the parent's trace and the exec'd leaf's only");
        for (int i = 0; i < 2; i++) {
            bool is_parent = !strcmp(files[i], parent);
            json_t *s = e2e_stats(files[i], is_parent ? "raw_clone" : "forker");
            cr_expect_eq(e2e_int(s, "blocks"), is_parent ? 15 : 2, "%s", files[i]);
            cr_expect_eq(e2e_int(s, "bytes"), is_parent ? 1250 : 128, "%s", files[i]);
            cr_expect_eq(e2e_int(s, "frees"), is_parent ? 0 : 1, "%s", files[i]);
            cr_expect(json_is_false(json_object_get(s, "forked")), "%s", files[i]);
            cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")),
                      "%s", files[i]);
            json_decref(s);
        }
        free(dir);
    }
}

// dir holds one trace, ended cleanly, whose blocks from module (NULL: all) are exactly these.
static void expect_one_whole_trace(const char *dir, const char *module, long long blocks,
                                   long long bytes, long long frees, int variant) {
    char files[2][4096];
    cr_assert_eq(e2e_traces_in(dir, files, 2), 1, "variant %d", variant);
    json_t *s = e2e_stats(files[0], module);
    cr_expect_eq(e2e_int(s, "blocks"), blocks, "variant %d", variant);
    cr_expect_eq(e2e_int(s, "bytes"), bytes, "variant %d", variant);
    cr_expect_eq(e2e_int(s, "frees"), frees, "variant %d", variant);
    cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")),
              "variant %d", variant);
    json_decref(s);
}

// Runs E2E_PROGS/prog under the shim with env (NULL-terminated, or NULL for none), its traces
// (t.PID.hpt) in a new directory, which it returns (the caller frees it); asserts the program
// exits 0 within timeout_s. Its stdout in *out when out is not NULL (the caller frees it), its
// pid in *pid when pid is not NULL.
static char *run_in_tmpdir(const char *prog, const char *const *env, unsigned timeout_s,
                           char **out, int *pid, int variant) {
    char *dir = e2e_tmpdir(prog);
    char tmpl[4096], path[4096];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    snprintf(path, sizeof path, "%s/%s", E2E_PROGS, prog);
    char *argv[] = {path, NULL};
    char *err = NULL;
    e2e_run_opts_t o = {.out_template = tmpl, .env = env, .timeout_s = timeout_s};
    cr_assert_eq(e2e_run(argv, &o, out, &err, pid), 0, "%s, variant %d (hung?): %s", prog,
                 variant, err);
    free(err);
    return dir;
}

// run_in_tmpdir, expecting want on the program's stdout.
static char *run_saying(const char *prog, const char *const *env, unsigned timeout_s,
                        const char *want, int variant) {
    char *out = NULL;
    char *dir = run_in_tmpdir(prog, env, timeout_s, &out, NULL, variant);
    cr_expect_str_eq(out, want, "%s, variant %d", prog, variant);
    free(out);
    return dir;
}

// unshare(CLONE_NEWUSER) and setns into a mount namespace refuse a process with more than one
// thread (EINVAL), and the shim's flusher, workers and sampler are threads: `unshare -U`,
// `nsenter -m` and sandboxes failed under it (as under heaptrack). The shim stops its threads
// around those calls and starts them again; the trace keeps every event, with the timer's
// sampler too, and with small rings that the program's own thread drains meanwhile.
Test(host_safety, namespace_calls_that_need_a_single_thread_succeed, .timeout = 180) {
    char *probe[] = {E2E_PROGS "/ns_alone", "probe", NULL};
    e2e_run_opts_t plain = {.no_preload = true, .timeout_s = 60};
    if (e2e_run(probe, &plain, NULL, NULL, NULL) != 0)
        cr_skip_test("this machine refuses setns/unshare(CLONE_NEWUSER) even without the shim");
    static const char *const envs[3][2] = {
        {NULL}, {"HEAPPROF_CPU=timer", NULL}, {"HEAPPROF_BUFFER_KB=64", NULL}};
    for (int k = 0; k < 3; k++) {
        char *dir = e2e_tmpdir("ns_alone");
        char tmpl[4096];
        snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
        char *argv[] = {E2E_PROGS "/ns_alone", NULL};
        char *err = NULL;
        e2e_run_opts_t o = {.out_template = tmpl, .env = k ? envs[k] : NULL, .timeout_s = 60};
        cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "ns_alone (variant %d) failed: %s",
                     k, err);
        free(err);
        expect_one_whole_trace(dir, NULL, 200040, 4840000, 200000, k);
        free(dir);
    }
}

// A main thread that ends with pthread_exit before the threads it started: glibc ends the
// process (exit(0), exit handlers and all) when the last of them ends, and the shim's threads
// kept the old shim's process alive for good (a zombie main thread, the flusher, sampler and
// worker waiting). Now the process ends as without the shim, its exit handler runs and is
// recorded, and the trace is whole; with the timer's sampler too, and with no sampler.
Test(host_safety, a_process_whose_main_thread_exits_first_ends_when_its_last_thread_does,
     .timeout = 180) {
    static const char *const envs[3][2] = {{NULL}, {"HEAPPROF_CPU=timer", NULL}, {"HEAPPROF_CPU=0", NULL}};
    for (int k = 0; k < 3; k++) {
        char *dir = run_saying("main_exits_first", k ? envs[k] : NULL, 30, "atexit ran\n", k);
        expect_one_whole_trace(dir, "main_exits_first", 101017, 3217490, 100003, k);
        free(dir);
    }
}

// A coroutine whose stack says nothing of where it ends (a hand-written switch, as libco,
// libaco or Boost.Context make): the word above its entry frame is a stale return address into
// a 4 KiB frame, and PROT_NONE pages lie above the stack. The old shim's walker read past the
// stack's top on each allocation there (and the timer sampler's handler on each sample there)
// and the program died of SIGSEGV. Now walks off the thread's own stack check each page first:
// the program runs, every block is counted, and its allocations still have their stack up to
// the coroutine's entry.
Test(host_safety, a_coroutine_stack_that_ends_in_a_stale_frame_is_walked_without_a_fault,
     .timeout = 180) {
    static const char *const envs[3][3] = {
        {NULL}, {"HEAPPROF_CPU=timer", NULL}, {"HEAPPROF_UNWIND=check", "HEAPPROF_CPU=0", NULL}};
    for (int k = 0; k < 3; k++) {
        char *dir = run_saying("coro_stale", k ? envs[k] : NULL, 60, "done\n", k);
        expect_one_whole_trace(dir, "coro_stale", 50000, 3675000, 50000, k);
        char files[1][4096];
        cr_assert_eq(e2e_traces_in(dir, files, 1), 1);
        json_t *rep = e2e_report(files[0]);
        json_t *site = e2e_site(rep, "one_block");
        cr_expect_eq(e2e_int(site, "blocks"), 50000, "variant %d", k);
        json_t *caller = json_array_get(json_object_get(site, "stack"), 1);
        cr_expect_str_eq(json_string_value(json_object_get(caller, "function")),
                         "coroutine_entry", "variant %d", k);
        json_decref(rep);
        free(dir);
    }
}

// pthread_cancel of threads that allocate: cancellation acts at the thread's next cancellation
// point, and the shim's drains (which write the trace) had some inside malloc. A worker
// cancelled there unwound with the shim's locks held, and the program hung in 14 of 15 runs
// (the flusher, the workers and the program's threads all waiting for the lock). The shim now
// keeps cancellation off in its cold paths: the program ends, and every pair the workers made
// before their cancellation point (pthread_testcancel, after each batch) is in the trace.
Test(host_safety, threads_cancelled_while_they_allocate_leave_no_lock_behind, .timeout = 180) {
    static const char *const envs[3][2] = {
        {NULL}, {"HEAPPROF_BUFFER_KB=64", NULL}, {"HEAPPROF_CPU=timer", NULL}};
    for (int k = 0; k < 3; k++) {
        char *out = NULL; // hung: the run's timeout fails it
        char *dir = run_in_tmpdir("cancel_alloc", k ? envs[k] : NULL, 60, &out, NULL, k);
        long long pairs = -1;
        cr_assert_eq(sscanf(out, "pairs %lld", &pairs), 1, "variant %d: %s", k, out);
        free(out);
        // a batch of 1,000 pairs is 264,160 B; main adds 1,000 x 100 B
        expect_one_whole_trace(dir, "cancel_alloc", pairs + 1000, pairs / 1000 * 264160 + 100000,
                               pairs + 1000, k);
        free(dir);
    }
}

// exit() from a signal handler while the program allocates: the signal often lands inside the
// shim. The old shim then ended its trace from the handler, waiting for its own threads, which
// waited for a lock the interrupted frame held: the program hung, 1 run in 4. Now the trace
// ends at its last flush in that case (one line says so) and the program always ends, its exit
// handler run; the trace reads. Ten runs a variant: where the signal lands is up to the machine,
// and every run must end.
Test(host_safety, exit_from_a_signal_handler_inside_an_allocation_ends_the_program,
     .timeout = 300) {
    static const char *const envs[2][2] = {{NULL}, {"HEAPPROF_BUFFER_KB=64", NULL}};
    for (int k = 0; k < 2; k++)
        for (int run = 0; run < 10; run++) {
            char *dir = run_saying("exit_in_handler", k ? envs[k] : NULL, 30, "bye\n", k);
            char files[2][4096];
            cr_assert_eq(e2e_traces_in(dir, files, 2), 1);
            json_decref(e2e_stats(files[0], NULL)); // asserts it reads
            free(dir);
        }
}

// fork() from a signal handler while the program allocates: the signal often lands inside the
// shim, whose fork handler took the shim's locks, one of which the interrupted frame held: half
// the runs hung. The handler now takes none there and the child, like one made without fork
// handlers, passes every call through. The program always ends, and the parent's trace holds
// exactly the pairs it counted.
Test(host_safety, fork_from_a_signal_handler_inside_an_allocation_does_not_hang,
     .timeout = 300) {
    static const char *const envs[2][2] = {{NULL}, {"HEAPPROF_BUFFER_KB=64", NULL}};
    for (int k = 0; k < 2; k++)
        for (int run = 0; run < 5; run++) {
            char *out = NULL, parent[4200];
            int pid = 0;
            char *dir = run_in_tmpdir("fork_in_handler", k ? envs[k] : NULL, 60, &out, &pid, k);
            long long pairs = -1;
            cr_assert_eq(sscanf(out, "pairs %lld", &pairs), 1, "variant %d: %s", k, out);
            free(out);
            snprintf(parent, sizeof parent, "%s/t.%d.hpt", dir, pid);
            json_t *s = e2e_stats(parent, "fork_in_handler");
            cr_expect_eq(e2e_int(s, "blocks"), pairs, "variant %d run %d", k, run);
            cr_expect_eq(e2e_int(s, "frees"), pairs, "variant %d run %d", k, run);
            cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")));
            json_decref(s);
            free(dir);
        }
}
