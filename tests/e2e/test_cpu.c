// SPDX-License-Identifier: MIT
// CPU samples end to end (issue #8): on a C and a Rust release sample (no frame pointers) with
// one CPU-hot and one allocation-hot function, `--metric cpu` gives the hot function >= 80% of
// the samples with full stacks up to main, the allocation metrics give the allocating function
// its blocks, folded totals equal the report's and stats' totals for every metric; with
// HEAPPROF_CPU=0 nothing is sampled and the allocation figures are exactly those of a sampled
// run; HEAPPROF_CPU=timer (the refused-perf path) records "off" and why, which stats, report and
// flame say; perf events go only on the CPUs of the process's affinity mask. Where the kernel
// refuses perf_event_open, the perf-dependent tests skip.
#include "spawn.h"

#include "../one_cpu.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *run_sample_arg(const char *name, const char *dir, const char *tag,
                            const char *const *env, const char *arg) {
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/%s", E2E_SAMPLES, name);
    char *trace = malloc(4200);
    snprintf(trace, 4200, "%s/%s.%s.hpt", dir, name, tag);
    char *argv[] = {prog, (char *)arg, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0, "%s", prog);
    return trace;
}

static char *run_sample(const char *name, const char *dir, const char *tag,
                        const char *const *env) {
    return run_sample_arg(name, dir, tag, env, NULL);
}

static char *folded(const char *trace, const char *metric) {
    const char *args[] = {"flame", trace, "--metric", metric, "--folded", NULL};
    return e2e_heapprof_ok(args);
}

// Whether the folded stack (frames joined by ';') has a frame named exactly fn.
static bool has_frame(const char *stack, size_t len, const char *fn) {
    size_t n = strlen(fn);
    for (const char *p = stack; p < stack + len;) {
        const char *e = memchr(p, ';', (size_t)(stack + len - p));
        size_t l = e ? (size_t)(e - p) : (size_t)(stack + len - p);
        if (l == n && memcmp(p, fn, n) == 0)
            return true;
        p += l + 1;
    }
    return false;
}

typedef struct tally {
    long long total;     // all samples (or blocks)
    long long with_fn;   // in lines with a frame named fn
    long long full;      // of those, lines that also reach main (a full stack)
} tally_t;

// The folded line at p ("frame;frame;... count"): returns its count, sets *stack_len to the
// length of its stack and *next to the line after it.
static long long folded_line(const char *p, size_t *stack_len, const char **next) {
    const char *nl = strchr(p, '\n');
    cr_assert(nl, "unterminated line");
    const char *sp = nl;
    while (sp > p && sp[-1] != ' ')
        sp--;
    cr_assert(sp > p, "no count");
    *stack_len = (size_t)(sp - 1 - p);
    *next = nl + 1;
    return strtoll(sp, NULL, 10);
}

static tally_t tally(const char *text, const char *fn, const char *main_fn) {
    tally_t t = {0, 0, 0};
    for (const char *p = text, *next; *p; p = next) {
        size_t slen;
        long long v = folded_line(p, &slen, &next);
        t.total += v;
        if (has_frame(p, slen, fn)) {
            t.with_fn += v;
            if (has_frame(p, slen, main_fn))
                t.full += v;
        }
    }
    return t;
}

// Sum of the counts of the folded lines whose stack starts with root.
static long long rooted_total(const char *text, const char *root) {
    long long sum = 0;
    for (const char *p = text, *next; *p; p = next) {
        size_t slen;
        long long v = folded_line(p, &slen, &next);
        if (strncmp(p, root, strlen(root)) == 0)
            sum += v;
    }
    return sum;
}

static json_t *cpu_of(json_t *stats) {
    json_t *c = json_object_get(stats, "cpu");
    cr_assert(json_is_object(c), "stats --json has no cpu object");
    return c;
}

static const char *str_of(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    cr_assert(json_is_string(v), "no string %s", key);
    return json_string_value(v);
}

// Skips the test when this kernel refuses perf events (paranoid >= 3, seccomp): the trace then
// says so, and the refusal itself is tested by cpu.timer_fallback_is_recorded_as_off.
static void skip_unless_perf(json_t *stats) {
    json_t *c = cpu_of(stats);
    if (strcmp(str_of(c, "source"), "perf") != 0)
        cr_skip_test("perf_event_open unavailable here: %s", str_of(c, "reason"));
}

// timer: HEAPPROF_CPU=timer, a longer run (250 samples/s at most), and slack for the samples
// that stop at a frame whose unwind rule was not known yet (the handler computes none).
static void hot_and_alloc(const char *sample, const char *hot, const char *alloc,
                          const char *main_fn, bool timer) {
    static const char *const timer_env[] = {"HEAPPROF_CPU=timer", NULL};
    char *dir = e2e_tmpdir(sample);
    char *trace = run_sample_arg(sample, dir, timer ? "timer" : "on", timer ? timer_env : NULL,
                                 timer ? "1000" : NULL);
    json_t *s = e2e_stats(trace, NULL);
    if (timer)
        cr_assert_str_eq(str_of(cpu_of(s), "source"), "timer", "%s",
                         str_of(cpu_of(s), "reason"));
    else
        skip_unless_perf(s);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s.expect", E2E_SAMPLES, sample);

    char *cpu = folded(trace, "cpu");
    tally_t c = tally(cpu, hot, main_fn);
    // ~0.4 s of CPU at 997 Hz; allow for a slow or loaded machine
    cr_assert_geq(c.total, 50, "only %lld samples:\n%s", c.total, cpu);
    cr_expect_geq(c.with_fn * 100, c.total * 80, "%s has %lld of %lld samples:\n%s", hot,
                  c.with_fn, c.total, cpu);
    if (timer)
        cr_expect_geq(c.full * 100, c.with_fn * 90, "%lld of %s's %lld samples do not reach %s:\n%s",
                      c.with_fn - c.full, hot, c.with_fn, main_fn, cpu);
    else
        cr_expect_eq(c.full, c.with_fn, "%lld of %s's %lld samples do not reach %s:\n%s",
                     c.with_fn - c.full, hot, c.with_fn, main_fn, cpu);
    cr_expect_eq(c.total, e2e_int(cpu_of(s), "samples"), "folded cpu total != stats samples");
    // every sample, not only the hot ones, unwinds to the process's entry point (epilogues,
    // PLT stubs and the vDSO included); 1% of slack for what no CFI describes
    long long rooted = rooted_total(cpu, "_start;");
    cr_expect_geq(rooted * 100, c.total * (timer ? 85 : 99), "%lld of %lld samples reach _start:\n%s", rooted,
                  c.total, cpu);

    char *blocks = folded(trace, "blocks");
    tally_t b = tally(blocks, alloc, main_fn);
    long long want = e2e_expect(path, "blocks");
    if (want >= 0)
        cr_expect_eq(b.with_fn, want, "%s made %lld blocks, want %lld", alloc, b.with_fn, want);
    else
        cr_expect_geq(b.with_fn, e2e_expect(path, "min_blocks"), "%s made %lld blocks", alloc,
                      b.with_fn);
    cr_expect_eq(b.full, b.with_fn, "allocation stacks of %s do not reach %s", alloc, main_fn);
    // and the hot function allocated nothing
    cr_expect_eq(tally(blocks, hot, main_fn).with_fn, 0, "%s allocated", hot);
    free(cpu);
    free(blocks);
    json_decref(s);
    free(trace);
    free(dir);
}

Test(cpu, c_hot_function_gets_the_samples_with_full_stacks, .timeout = 120) {
    hot_and_alloc("cpu_hot", "hot_loop", "alloc_many", "main", false);
}

Test(cpu, timer_fallback_gives_the_hot_function_its_samples, .timeout = 120) {
    hot_and_alloc("cpu_hot", "hot_loop", "alloc_many", "main", true);
}

Test(cpu, rust_hot_function_gets_the_samples_with_full_stacks, .timeout = 120) {
    char path[4200];
    snprintf(path, sizeof path, "%s/cpu_hot_rust", E2E_SAMPLES);
    FILE *f = fopen(path, "rb");
    if (!f)
        cr_skip_test("no Rust sample (rustc not found at configure time)");
    fclose(f);
    hot_and_alloc("cpu_hot_rust", "cpu_hot_rust::hot_loop", "cpu_hot_rust::alloc_many",
                  "cpu_hot_rust::main", false);
    hot_and_alloc("cpu_hot_rust", "cpu_hot_rust::hot_loop", "cpu_hot_rust::alloc_many",
                  "cpu_hot_rust::main", true);
}

Test(cpu, folded_totals_equal_report_totals_for_every_metric, .timeout = 120) {
    char *dir = e2e_tmpdir("cpu_totals");
    char *trace = run_sample("cpu_hot", dir, "on", NULL);
    const char *args[] = {"report", trace, "--json", NULL};
    char *out = e2e_heapprof_ok(args);
    json_error_t jerr;
    json_t *rep = json_loads(out, 0, &jerr);
    cr_assert(rep, "report --json is not JSON: %s", jerr.text);
    json_t *totals = json_object_get(rep, "totals");
    json_t *cpu = json_object_get(rep, "cpu");
    cr_assert(json_is_object(totals) && json_is_object(cpu));
    static const struct {
        const char *metric, *key;
    } pairs[] = {{"bytes", "bytes"}, {"blocks", "blocks"}, {"peak", "peak_bytes"},
                 {"leaked", "end_bytes"}};
    for (size_t i = 0; i < sizeof pairs / sizeof *pairs; i++) {
        char *text = folded(trace, pairs[i].metric);
        cr_expect_eq(tally(text, "", "").total, e2e_int(totals, pairs[i].key), "metric %s",
                     pairs[i].metric);
        free(text);
    }
    long long samples = e2e_int(cpu, "samples");
    cr_expect_eq(samples, e2e_int(json_object_get(totals, "cpu"), "samples"));
    if (samples) {
        char *text = folded(trace, "cpu");
        cr_expect_eq(tally(text, "", "").total, samples, "metric cpu");
        free(text);
        // the allocator share is a part of the whole, charged to user callers
        long long in_alloc = e2e_int(cpu, "allocator_samples"), charged = 0;
        json_t *callers = json_object_get(cpu, "allocator_callers");
        size_t i;
        json_t *c;
        json_array_foreach(callers, i, c) charged += e2e_int(c, "samples");
        cr_expect_leq(in_alloc, samples);
        cr_expect_leq(charged, in_alloc);
        cr_expect_leq(e2e_int(cpu, "shim_samples"), in_alloc);
    }
    json_decref(rep);
    free(out);
    free(trace);
    free(dir);
}

// What tests/e2e/progs/`name` prints, run with the arguments args (NULL-terminated; NULL:
// none) preloaded with `env`, its trace written to `trace` (DIR/name.TAG.hpt); the caller frees
// it.
static char *prog_output(const char *dir, const char *name, const char *tag,
                         const char *const *args, const char *const *env, int timeout_s,
                         char trace[4200]) {
    char prog[4200];
    snprintf(prog, sizeof prog, "%s/%s", E2E_PROGS, name);
    snprintf(trace, 4200, "%s/%s.%s.hpt", dir, name, tag);
    char *argv[8] = {prog};
    for (size_t i = 0; args && args[i]; i++) {
        cr_assert(i + 2 < sizeof argv / sizeof *argv, "too many arguments for %s", name);
        argv[i + 1] = (char *)args[i];
    }
    e2e_run_opts_t o = {.out_template = trace, .env = env, .timeout_s = timeout_s};
    char *out = NULL;
    cr_assert_eq(e2e_run(argv, &o, &out, NULL, NULL), 0, "%s", prog);
    return out;
}

// perf_fds's line run preloaded with perf events (HEAPPROF_CPU=perf): *fds perf descriptors,
// *cpus CPUs in its affinity mask.
static void perf_fds(const char *dir, const char *tag, int *fds, int *cpus) {
    static const char *const env[] = {"HEAPPROF_CPU=perf", NULL};
    char trace[4200];
    char *out = prog_output(dir, "perf_fds", tag, NULL, env, 60, trace);
    cr_assert_eq(sscanf(out, "perf_fds=%d cpus=%d", fds, cpus), 2, "%s", out);
    free(out);
}

// The sampler opens one inherited event per CPU the process may run on, not per CPU the machine
// has: each costs every thread the program makes a copy (docs/design.md#cpu-samples).
Test(cpu, perf_events_only_on_the_cpus_of_the_affinity_mask, .timeout = 120) {
    char *dir = e2e_tmpdir("cpu_affinity");
    int fds = 0, cpus = 0;
    perf_fds(dir, "all", &fds, &cpus);
    if (fds == 0)
        cr_skip_test("perf_event_open unavailable here (no events were opened)");
    // one per CPU of the mask, or fewer where the locked-memory budget ran out for a ring
    cr_expect(fds >= 1 && fds <= cpus, "%d perf events for %d CPUs in the mask", fds, cpus);
    // now from a mask of one CPU, the first of ours (the child inherits it)
    cpu_set_t mine;
    pin_to_one_cpu(&mine);
    perf_fds(dir, "one", &fds, &cpus);
    sched_setaffinity(0, sizeof mine, &mine);
    cr_expect_eq(cpus, 1);
    cr_expect_eq(fds, 1, "%d perf events for a mask of one CPU", fds);
    free(dir);
}

// short_threads (tests/e2e/progs) under the CPU-time timer: CPU-time samples in short_burn (N
// threads of a few ms) and long_burn (the main thread, as much CPU in all).
static void short_vs_long(const char *dir, const char *tag, const char *ms, const char *n,
                          const char *at_once, long long *s, long long *l) {
    static const char *const env[] = {"HEAPPROF_CPU=timer", NULL};
    const char *const args[] = {ms, n, at_once, NULL};
    char trace[4200];
    free(prog_output(dir, "short_threads", tag, args, env, 60, trace));
    char *f = folded(trace, "cpu");
    *s = tally(f, "short_burn", "main").with_fn;
    *l = tally(f, "long_burn", "main").with_fn;
    free(f);
}

// A thread arms its own CPU-time timer at its first allocation, and the first expiry comes at
// the first tick it runs through: threads that live a few ms (fewer than the sampling thread's
// listing interval, ~20 ms, or a kernel tick) are sampled by their CPU time as a long thread is.
// Found only by the listing, they got 1-11 samples in short_burn against ~68 in long_burn (60
// threads of 5 ms), and 600 at once ~83 against ~144 (sessions 16-17); 600 at once also grow
// the table of timers.
Test(cpu, timer_samples_short_threads_by_their_cpu_time, .timeout = 180) {
    char *dir = e2e_tmpdir("cpu_short");
    struct {
        const char *tag, *ms, *n, *at_once;
    } runs[] = {{"seq", "300", "60", "1"}, {"wide", "600", "600", "600"}};
    for (size_t i = 0; i < sizeof runs / sizeof *runs; i++) {
        long long s = 0, l = 0;
        short_vs_long(dir, runs[i].tag, runs[i].ms, runs[i].n, runs[i].at_once, &s, &l);
        cr_assert_geq(l, 20, "%s: %lld samples in long_burn (the timer did not sample)",
                      runs[i].tag, l);
        // the same CPU time both ways: within a factor of two (a thread sampled twice, or
        // found late, falls outside it)
        cr_expect(s * 2 >= l && s <= 2 * l,
                  "%s: %lld samples in short threads, %lld in the long one", runs[i].tag, s, l);
    }
    free(dir);
}

// altstacks's line (tests/e2e/progs/altstacks.c) run preloaded with `env`.
static void altstacks(const char *dir, const char *tag, const char *const *env, size_t *plain,
                      char own[16], char small[16]) {
    char trace[4200];
    char *out = prog_output(dir, "altstacks", tag, NULL, env, 60, trace);
    cr_assert_eq(sscanf(out, "plain=%zu own=%15s small=%15s", plain, own, small), 3, "%s", out);
    free(out);
}

// Under the CPU-time timer a thread arms its own timer at its first allocation, and the
// signal's frame goes on an alternate stack: one lent by the shim where the thread has none (a
// 16 KiB thread stack may be deep in the shim's cold paths when the first expiry comes), the
// program's own where it has one large enough; a program's is never replaced. Without the timer
// nothing is lent.
Test(cpu, timer_threads_get_an_alternate_signal_stack_and_keep_their_own, .timeout = 120) {
    char *dir = e2e_tmpdir("cpu_altstacks");
    static const char *const timer[] = {"HEAPPROF_CPU=timer", NULL};
    static const char *const off[] = {"HEAPPROF_CPU=0", NULL};
    size_t plain = 0;
    char own[16], small[16];
    altstacks(dir, "timer", timer, &plain, own, small);
    cr_expect_geq(plain, 32 * 1024, "a thread with no stack of its own was lent %zu bytes", plain);
    cr_expect_str_eq(own, "KEPT");
    cr_expect_str_eq(small, "KEPT");
    altstacks(dir, "off", off, &plain, own, small);
    cr_expect_eq(plain, 0, "without the timer a thread was lent %zu bytes", plain);
    cr_expect_str_eq(own, "KEPT");
    cr_expect_str_eq(small, "KEPT");
    free(dir);
}

// switch_source (tests/e2e/progs/switch_source.c) with `env`, waiting at most wait_ms for the
// switch: its line's two numbers, and the samples in before_switch and after_switch.
static void switch_run(const char *dir, const char *tag, const char *const *env,
                       const char *wait_ms, int *perf_at_start, int *switched, long long *before,
                       long long *after, json_t **stats) {
    const char *const args[] = {"300", wait_ms, NULL};
    char trace[4200];
    char *out = prog_output(dir, "switch_source", tag, args, env, 120, trace);
    cr_assert_eq(sscanf(out, "perf_at_start=%d switched=%d", perf_at_start, switched), 2, "%s",
                 out);
    free(out);
    char *f = folded(trace, "cpu");
    *before = tally(f, "before_switch", "main").with_fn;
    *after = tally(f, "after_switch", "main").with_fn;
    free(f);
    *stats = e2e_stats(trace, "switch_source");
}

// Perf events inherited by every thread cost the kernel a copy per sampled CPU at each thread's
// creation and end; where threads come fast the sampler gives them up for the CPU-time timer
// (the rate rule is test_cpu.c's in tests/unit; HEAPPROF_TEST_CPU_SWITCH_AFTER=2 triggers it at
// the second thread). The timer counts each tick as the samples of a tick at the asked rate, so
// the same CPU time gets as many samples on both sides of the switch (with one sample a signal
// after_switch had ~1/4 of before_switch's). HEAPPROF_CPU_SWITCH=0 keeps perf events.
Test(cpu, perf_events_are_given_up_for_the_timer_with_samples_of_the_same_weight,
     .timeout = 240) {
    char *dir = e2e_tmpdir("cpu_switch");
    static const char *const on[] = {"HEAPPROF_TEST_CPU_SWITCH_AFTER=2", NULL};
    static const char *const off[] = {"HEAPPROF_TEST_CPU_SWITCH_AFTER=2", "HEAPPROF_CPU_SWITCH=0",
                                      NULL};
    int at_start = 0, switched = 0;
    long long before = 0, after = 0;
    json_t *s = NULL;
    switch_run(dir, "on", on, "20000", &at_start, &switched, &before, &after, &s);
    if (at_start == 0) {
        json_decref(s);
        cr_skip_test("perf_event_open unavailable here (no events were opened)");
    }
    cr_expect_eq(switched, 1, "the perf events were not closed within 20 s");
    json_t *cpu = json_object_get(s, "cpu");
    cr_expect_str_eq(json_string_value(json_object_get(cpu, "source")), "timer");
    const char *why = json_string_value(json_object_get(cpu, "reason"));
    cr_expect(why && strstr(why, "given up"), "reason: %s", why ? why : "(none)");
    cr_expect_geq(before, 30, "%lld samples before the switch", before);
    cr_expect_geq(after, 30, "%lld samples after the switch", after);
    cr_expect(before <= 2 * after && after <= 2 * before,
              "the same CPU time: %lld samples with perf events, %lld with the timer", before,
              after);
    json_decref(s);
    switch_run(dir, "off", off, "1000", &at_start, &switched, &before, &after, &s);
    cr_expect_eq(switched, 0, "HEAPPROF_CPU_SWITCH=0 and the perf events were closed");
    cpu = json_object_get(s, "cpu");
    cr_expect_str_eq(json_string_value(json_object_get(cpu, "source")), "perf");
    json_decref(s);
    free(dir);
}

static const char *const alloc_keys[] = {"blocks", "bytes", "frees", "peak_bytes", "peak_blocks",
                                         "end_bytes", "end_blocks", NULL};

// Also the timer fallback, whose handler runs on the app's threads, even inside the shim.
Test(cpu, sampling_off_records_no_samples_and_the_same_allocations, .timeout = 180) {
    static const char *const off[] = {"HEAPPROF_CPU=0", NULL};
    static const char *const timer[] = {"HEAPPROF_CPU=timer", NULL};
    char *dir = e2e_tmpdir("cpu_off");
    const char *samples[] = {"cpu_hot", "exact_counts"};
    for (size_t k = 0; k < 2; k++) {
        char *t_on = run_sample(samples[k], dir, "on", NULL);
        char *t_off = run_sample(samples[k], dir, "off", off);
        char *t_timer = run_sample(samples[k], dir, "timer", timer);
        json_t *s_on = e2e_stats(t_on, NULL), *s_off = e2e_stats(t_off, NULL);
        json_t *s_timer = e2e_stats(t_timer, NULL);
        json_t *c = cpu_of(s_off);
        cr_expect_str_eq(str_of(c, "source"), "off");
        cr_expect_eq(e2e_int(c, "samples"), 0);
        cr_expect_str_eq(str_of(c, "reason"), "HEAPPROF_CPU=0");
        for (size_t i = 0; alloc_keys[i]; i++) {
            cr_expect_eq(e2e_int(s_on, alloc_keys[i]), e2e_int(s_off, alloc_keys[i]),
                         "%s: %s differs with sampling on and off", samples[k], alloc_keys[i]);
            cr_expect_eq(e2e_int(s_timer, alloc_keys[i]), e2e_int(s_off, alloc_keys[i]),
                         "%s: %s differs with the timer fallback and off", samples[k],
                         alloc_keys[i]);
        }
        cr_expect_eq(e2e_int(json_object_get(s_timer, "damage"), "late_events"), 0);
        // no merge damage from samples: they are never late events
        json_t *d = json_object_get(s_on, "damage");
        cr_expect_eq(e2e_int(d, "late_events"), 0, "%s: late events with sampling on", samples[k]);
        const char *args[] = {"flame", t_off, "--metric", "cpu", "--folded", NULL};
        char *err = NULL;
        cr_expect_neq(e2e_heapprof(args, NULL, &err), 0, "flame --metric cpu of an unsampled trace");
        cr_expect(err && strstr(err, "no CPU samples") && strstr(err, "HEAPPROF_CPU=0"), "%s", err);
        free(err);
        json_decref(s_on);
        json_decref(s_off);
        json_decref(s_timer);
        free(t_timer);
        free(t_on);
        free(t_off);
    }
    free(dir);
}

// The real refusal: perf_event_open fails with EACCES (a seccomp filter, as in a container).
// By default the CPU-time timer takes over; with HEAPPROF_CPU=perf sampling is off. Either way
// profiling goes on and the trace, stderr and the report say why.
static void refused(const char *cpu_mode, const char *source, const char *report_line) {
    char *dir = e2e_tmpdir("cpu_refused");
    char trace[4200], prog[4200];
    snprintf(trace, sizeof trace, "%s/refused.hpt", dir);
    snprintf(prog, sizeof prog, "%s/cpu_hot", E2E_SAMPLES);
    char out_env[4300], mode_env[64];
    snprintf(out_env, sizeof out_env, "HEAPPROF_OUT=%s", trace);
    snprintf(mode_env, sizeof mode_env, "HEAPPROF_CPU=%s", cpu_mode);
    const char *const env[] = {out_env, mode_env, NULL};
    char *argv[] = {E2E_PROGS "/seccomp_deny", "perf_event_open", E2E_LIB, prog, "50", NULL};
    e2e_run_opts_t o = {.env = env, .no_preload = true, .timeout_s = 60};
    char *err = NULL;
    cr_assert_eq(e2e_run(argv, &o, NULL, &err, NULL), 0, "%s", err);
    cr_expect(strstr(err, "perf_event_open was refused") != NULL, "stderr: %s", err);
    json_t *s = e2e_stats(trace, NULL);
    json_t *c = cpu_of(s);
    cr_expect_str_eq(str_of(c, "source"), source);
    if (strcmp(source, "off") == 0)
        cr_expect_eq(e2e_int(c, "samples"), 0);
    cr_expect(strstr(str_of(c, "reason"), "refused") != NULL, "%s", str_of(c, "reason"));
    cr_expect_eq(e2e_int(s, "blocks"), 10000, "allocations are still recorded");
    const char *args[] = {"report", trace, NULL};
    char *rep = e2e_heapprof_ok(args);
    cr_expect(strstr(rep, report_line) != NULL, "%s", rep);
    free(rep);
    free(err);
    json_decref(s);
    free(dir);
}

Test(cpu, refused_perf_falls_back_to_the_timer, .timeout = 120) {
    refused("1", "timer", "(CPU-time timer), ");
}

Test(cpu, refused_perf_with_perf_only_is_recorded_as_off, .timeout = 120) {
    refused("perf", "off", "CPU samples: off: perf_event_open was refused");
}

// Issue #17: timer sampling stopped for good after a vfork child's exec (the child, sharing our
// memory, stopped our sampling thread and deleted our timers) and after an exec that failed.
// exec_burn then spends 0.6 s of CPU in burn_after_exec: some of its samples must be there (at
// 250/s at most ~150; one is enough to show sampling went on, so no rate is assumed).
static void sampling_goes_on_after(const char *mode) {
    static const char *const timer_env[] = {"HEAPPROF_CPU=timer", NULL};
    char *dir = e2e_tmpdir("exec_burn");
    char tmpl[4200], trace[4200];
    snprintf(tmpl, sizeof tmpl, "%s/t.%%p.hpt", dir);
    char *argv[] = {E2E_PROGS "/exec_burn", (char *)mode, "600", NULL};
    int pid;
    cr_assert_eq(e2e_run_preloaded(argv, tmpl, timer_env, &pid), 0, "%s", mode);
    snprintf(trace, sizeof trace, "%s/t.%d.hpt", dir, pid);
    json_t *s = e2e_stats(trace, NULL);
    cr_assert_str_eq(str_of(cpu_of(s), "source"), "timer", "%s", str_of(cpu_of(s), "reason"));
    char *cpu = folded(trace, "cpu");
    tally_t c = tally(cpu, "burn_after_exec", "main");
    cr_expect_gt(c.with_fn, 0, "%s: no CPU sample in burn_after_exec (of %lld):\n%s", mode,
                 c.total, cpu);
    free(cpu);
    json_decref(s);
    free(dir);
}

Test(cpu, timer_sampling_goes_on_after_a_vfork_child_execs, .timeout = 120) {
    sampling_goes_on_after("vfork");
}
Test(cpu, timer_sampling_goes_on_after_a_failed_exec, .timeout = 120) {
    sampling_goes_on_after("fail");
}

// Issue #17: a program that installed its own handler on the timer's signal (SIGRTMAX here)
// while heapprof sampled had it called 1-3 times with no signal sent, and sampling then stopped.
// sig_owner installs counting handlers on every real-time signal it may use, burns 0.6 s of CPU
// and then raises each once: it exits 0 only if no handler ran unasked and each ran once when
// asked; the trace must have samples in burn_with_handlers (taken after the handlers went in,
// which before the fix replaced ours: none could be).
Test(cpu, the_timer_signal_never_reaches_a_handler_the_program_installed, .timeout = 120) {
    static const char *const timer_env[] = {"HEAPPROF_CPU=timer", NULL};
    char *dir = e2e_tmpdir("sig_owner");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/sig_owner", "600", NULL};
    char *out = NULL;
    e2e_run_opts_t o = {.out_template = trace, .env = timer_env};
    int rc = e2e_run(argv, &o, &out, NULL, NULL);
    cr_assert_eq(rc, 0, "sig_owner: %s", out);
    json_t *s = e2e_stats(trace, NULL);
    cr_assert_str_eq(str_of(cpu_of(s), "source"), "timer", "%s", str_of(cpu_of(s), "reason"));
    char *cpu = folded(trace, "cpu");
    tally_t c = tally(cpu, "burn_with_handlers", "main");
    cr_expect_gt(c.with_fn, 0, "no CPU sample in burn_with_handlers (of %lld):\n%s", c.total, cpu);
    free(cpu);
    free(out);
    json_decref(s);
    free(dir);
}

// Whether a CPU ranking row is one of heapprof's own functions (its source is in preload/, or
// its module is the shim).
static bool row_in_shim(json_t *row) {
    const char *loc = str_of(row, "location");
    return strstr(loc, "preload/") || strstr(loc, "libheapprof");
}

static size_t shim_rows(json_t *cpu) {
    size_t n = 0, i;
    json_t *row;
    json_array_foreach(json_object_get(cpu, "functions"), i, row) n += row_in_shim(row);
    json_array_foreach(json_object_get(cpu, "allocator_callers"), i, row) n += row_in_shim(row);
    return n;
}

// Samples taken in heapprof's own shim (recording the calls) are the profiler's cost: counted
// once as shim_samples and left out of the function rankings, which then rank the program's
// own time; `report --shim-cpu` keeps them (issue 22). An allocation-heavy program under the
// timer sampler, which every machine has.
Test(cpu, the_shim_stays_out_of_the_rankings_unless_asked, .timeout = 180) {
    static const char *const env[] = {"HEAPPROF_CPU=timer", NULL};
    char *dir = e2e_tmpdir("shim_rank");
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/churn.hpt", dir);
    char *argv[] = {E2E_PROGS "/churn", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, env, NULL), 0);
    const char *plain[] = {"report", "--json", "--top", "100000", trace, NULL};
    const char *with[] = {"report", "--json", "--top", "100000", "--shim-cpu", trace, NULL};
    json_t *a = e2e_heapprof_json(plain), *b = e2e_heapprof_json(with);
    json_t *ca = json_object_get(a, "cpu"), *cb = json_object_get(b, "cpu");
    cr_assert(json_is_false(json_object_get(ca, "shim_ranked")));
    cr_assert(json_is_true(json_object_get(cb, "shim_ranked")));
    cr_expect_eq(shim_rows(ca), 0, "heapprof's own functions ranked without --shim-cpu");
    long long shim = e2e_int(ca, "shim_samples");
    cr_expect_eq(shim, e2e_int(cb, "shim_samples"));
    if (shim > 0) // (a machine too slow to take a sample there would have none to rank)
        cr_expect_gt(shim_rows(cb), 0, "%lld shim samples, none of them ranked with --shim-cpu",
                     shim);
    json_decref(a);
    json_decref(b);
    free(dir);
}
