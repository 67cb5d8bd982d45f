// SPDX-License-Identifier: MIT
// 16 threads x 100,000 malloc/free pairs plus blocks freed by another thread: no event lost,
// no deadlock, lifetimes that cross threads resolve (nothing left live).
#include "format/hpt_format.h"
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(threads, sixteen_threads_lose_no_event, .timeout = 300) {
    char *dir = e2e_tmpdir("threads");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/threads16", NULL};
    // small buffers force many hand-offs to the writer while all threads run
    const char *env[] = {"HEAPPROF_BUFFER_KB=64", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    json_t *s = e2e_stats(trace, "threads16");
    cr_expect_eq(e2e_int(s, "blocks"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "frees"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "end_blocks"), 0);
    cr_expect_eq(e2e_int(s, "end_bytes"), 0);
    cr_expect_eq(e2e_int(s, "threads"), 16);
    json_t *an = json_object_get(s, "anomalies");
    cr_expect_eq(e2e_int(an, "unknown_frees"), 0, "a free was read before its allocation");
    cr_expect_eq(e2e_int(an, "double_allocs"), 0, "an address was allocated twice without a free");
    json_decref(s);

    // unfiltered: libc's own blocks (one per thread) come and go too; the totals only grow
    s = e2e_stats(trace, NULL);
    cr_expect_geq(e2e_int(s, "blocks"), 16 * 101000);
    cr_expect_eq(e2e_int(json_object_get(s, "shim"), "events_lost"), 0);
    json_decref(s);
    free(dir);
}

// Without membarrier (seccomp here; old kernels and sandboxes) the writer merges the threads at
// watermarks held 20 ms back instead of exact ones: blocks freed by another thread and
// addresses handed out again across threads must still resolve to the right block.
Test(threads, without_membarrier_cross_thread_frees_still_resolve, .timeout = 300) {
    char *dir = e2e_tmpdir("nomembarrier");
    char trace[4096], out_env[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(out_env, sizeof out_env, "HEAPPROF_OUT=%s", trace);
    const char *const env[] = {out_env, "HEAPPROF_BUFFER_KB=64", NULL};
    char *argv[] = {E2E_PROGS "/seccomp_deny", "membarrier", E2E_LIB, E2E_PROGS "/threads16",
                    NULL};
    e2e_run_opts_t o = {.env = env, .no_preload = true, .timeout_s = 240};
    char *err = NULL;
    cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "%s", err);
    free(err);
    FILE *f = fopen(trace, "rb");
    cr_assert(f);
    hpt_file_hdr_t h;
    cr_assert_eq(fread(&h, sizeof h, 1, f), 1);
    fclose(f);
    cr_expect_eq(h.flags & HPT_FILE_HAS_MEMBARRIER, 0, "membarrier was not refused");
    json_t *s = e2e_stats(trace, "threads16");
    cr_expect_eq(e2e_int(s, "blocks"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "frees"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "end_blocks"), 0);
    json_t *an = json_object_get(s, "anomalies");
    cr_expect_eq(e2e_int(an, "unknown_frees"), 0, "a free was read before its allocation");
    cr_expect_eq(e2e_int(an, "double_allocs"), 0, "an address was allocated twice without a free");
    json_decref(s);
    free(dir);
}

// Eight threads allocating as fast as they can with deep stacks fill their rings while the
// writer is between draining and flushing; the writer's staging must have room for both.
Test(threads, eight_threads_at_full_speed_keep_every_event, .timeout = 300) {
    for (int run = 0; run < 3; run++) {
        char *dir = e2e_tmpdir("fullspeed");
        char trace[4096];
        snprintf(trace, sizeof trace, "%s/t.hpt", dir);
        char *argv[] = {E2E_PROGS "/c_threads", "8", "4000000", NULL};
        cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
        json_t *s = e2e_stats(trace, "c_threads");
        // 4,000,000 pairs plus each thread's table of live slots
        cr_expect_eq(e2e_int(s, "blocks"), 4000000 + 8, "run %d lost events", run);
        cr_expect(json_is_true(json_object_get(json_object_get(s, "damage"), "clean_exit")),
                  "run %d: the shim stopped profiling", run);
        json_decref(s);
        free(dir);
    }
}

// A thread that fills its ring before a worker got to it, while the ring may still grow, grows
// it with its records kept instead of draining it itself: with the workers slowed down (a
// test knob), 20,000 malloc/free pairs (~840 KiB of ring entries) fill the first 64 KiB ring
// and its doublings up to 1 MiB, never the largest (2 MiB), so the thread never waits. Before
// session 34 it drained each full ring itself and waited 3 times (the 64, 128 and 256 KiB rings).
Test(threads, a_ring_that_fills_while_it_may_grow_grows_without_a_wait, .timeout = 300) {
    char *dir = e2e_tmpdir("growkeep");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/c_threads", "1", "20000", NULL};
    const char *env[] = {"HEAPPROF_BUFFER_KB=2048", "HEAPPROF_TEST_DRAIN_DELAY_MS=200", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    json_t *s = e2e_stats(trace, "c_threads");
    cr_expect_geq(e2e_int(s, "blocks"), 20000);
    json_t *an = json_object_get(s, "anomalies");
    cr_expect_eq(e2e_int(an, "unknown_frees"), 0);
    json_t *shim = json_object_get(s, "shim");
    cr_expect_eq(e2e_int(shim, "events_lost"), 0);
    cr_expect_eq(e2e_int(shim, "waits"), 0, "the thread drained its own ring while it could grow");
    json_decref(s);
    free(dir);
}

// Back-pressure: the pipeline's workers and flusher are slowed down (a test knob), so the
// threads' rings fill before anyone else drains them and each thread must drain its own. It
// waits and loses nothing. Rings of 64 KiB fill after ~5,000 events, far sooner than a 200 ms
// nap, so the threads wait whatever the machine's speed.
Test(threads, a_slow_pipeline_makes_threads_wait_and_loses_nothing, .timeout = 300) {
    char *dir = e2e_tmpdir("backpressure");
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/threads16", NULL};
    const char *env[] = {"HEAPPROF_BUFFER_KB=64", "HEAPPROF_TEST_DRAIN_DELAY_MS=200", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    json_t *s = e2e_stats(trace, "threads16");
    cr_expect_eq(e2e_int(s, "blocks"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "frees"), 16 * 101000);
    cr_expect_eq(e2e_int(s, "end_blocks"), 0);
    json_t *an = json_object_get(s, "anomalies");
    cr_expect_eq(e2e_int(an, "unknown_frees"), 0);
    cr_expect_eq(e2e_int(an, "double_allocs"), 0);
    json_t *shim = json_object_get(s, "shim");
    cr_expect_eq(e2e_int(shim, "events_lost"), 0);
    cr_expect_gt(e2e_int(shim, "waits"), 0, "no thread waited: the knob did not slow the pipeline");
    cr_expect_gt(e2e_int(shim, "wait_ns"), 0);
    json_decref(s);
    free(dir);
}
