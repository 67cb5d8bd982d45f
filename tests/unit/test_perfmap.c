// SPDX-License-Identifier: MIT
// perfmap: JIT code names from a perf map. The entry written last names an address where
// entries overlap (a JIT reuses freed code's addresses); ranges are [START, START + SIZE); lines
// that are not "START SIZE NAME" are skipped; /tmp/perf-PID.map is taken only when it was
// written after the trace started (or for an attached trace), and HEAPPROF_PERF_MAP overrides.
#include "symbols/perfmap.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *write_map(const char *text) {
    char *path = strdup("/tmp/hp_perfmap_XXXXXX");
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(text, f);
    fclose(f);
    return path;
}

// Writes /tmp/perf-PID.map (its path into path[64]), as a JIT of that pid would.
static void write_process_map(uint32_t pid, const char *text, char path[64]) {
    snprintf(path, 64, "/tmp/perf-%u.map", pid);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(text, f);
    fclose(f);
}

static void expect_name(const perfmap_t *m, uint64_t addr, const char *want) {
    const char *got = perfmap_find(m, addr);
    if (!want)
        cr_expect_null(got, "%#lx: %s, expected none", (unsigned long)addr, got ? got : "");
    else
        cr_expect(got && !strcmp(got, want), "%#lx: %s, expected %s", (unsigned long)addr,
                  got ? got : "(none)", want);
}

Test(perfmap, the_latest_entry_names_an_address_and_ranges_end_before_start_plus_size) {
    char *path = write_map("1000 100 first\n"
                           "garbage line\n"
                           "2000 0 empty\n"
                           "0x3000 0x10 LazyCompile:~f /app/x.js:3\n"
                           "1080 100 second overlaps the first\n"
                           "1000 40 third inside the first\n"
                           "5000 zz bad size\n"
                           "ffffffffffffff00 100 wraps\n"
                           "10000 1000 big\n"
                           "10800 10 small inside big, written later\n");
    perfmap_t *m = perfmap_load(path);
    cr_assert_not_null(m);
    cr_expect_eq(perfmap_entries(m), 6);
    cr_expect_str_eq(perfmap_path(m), path);
    expect_name(m, 0xfff, NULL);
    expect_name(m, 0x1000, "third inside the first");
    expect_name(m, 0x103f, "third inside the first");
    expect_name(m, 0x1040, "first");
    expect_name(m, 0x107f, "first");
    expect_name(m, 0x1080, "second overlaps the first");
    expect_name(m, 0x117f, "second overlaps the first");
    expect_name(m, 0x1180, NULL);
    expect_name(m, 0x2000, NULL);
    expect_name(m, 0x3000, "LazyCompile:~f /app/x.js:3");
    expect_name(m, 0x300f, "LazyCompile:~f /app/x.js:3");
    expect_name(m, 0x3010, NULL);
    expect_name(m, 0x10000, "big");
    expect_name(m, 0x10808, "small inside big, written later");
    expect_name(m, 0x10810, "big"); // an earlier, longer entry still reaches past the later one
    expect_name(m, 0x10fff, "big");
    expect_name(m, 0x11000, NULL);
    perfmap_free(m);
    unlink(path);
    free(path);
}

Test(perfmap, a_map_without_entries_or_file_is_none) {
    char *path = write_map("not a map\n\n");
    cr_expect_null(perfmap_load(path));
    unlink(path);
    cr_expect_null(perfmap_load(path));
    free(path);
    cr_expect_null(perfmap_find(NULL, 1));
}

Test(perfmap, the_process_map_is_taken_only_when_written_after_the_trace_started) {
    unsetenv("HEAPPROF_PERF_MAP");
    // a pid no process has (above the kernel's pid_max limit of 2^22)
    const uint32_t pid = 4000000000u;
    char path[64];
    write_process_map(pid, "1000 10 x\n", path);
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    uint64_t now_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    uint64_t hour = 3600ull * 1000000000u;
    char *p = perfmap_path_for(NULL, pid, now_ns - hour, false);
    cr_expect(p && !strcmp(p, path), "a map written during the trace: %s", p ? p : "(none)");
    free(p);
    cr_expect_null(perfmap_path_for(NULL, pid, now_ns + hour, false), "a map older than the trace");
    p = perfmap_path_for(NULL, pid, now_ns + hour, true);
    cr_expect(p && !strcmp(p, path), "an attached trace takes an older map");
    free(p);
    unlink(path);
    cr_expect_null(perfmap_path_for(NULL, pid, now_ns - hour, false), "no map");
    setenv("HEAPPROF_PERF_MAP", "/elsewhere/jit.map", 1);
    p = perfmap_path_for(NULL, pid, now_ns, false);
    cr_expect(p && !strcmp(p, "/elsewhere/jit.map"));
    free(p);
    setenv("HEAPPROF_PERF_MAP", "", 1);
    cr_expect_null(perfmap_path_for(NULL, pid, now_ns, false), "HEAPPROF_PERF_MAP= turns it off");
    unsetenv("HEAPPROF_PERF_MAP");
}

// heapprof run keeps the process's map beside its trace (TRACE.perf.map), and the analyzer
// takes that copy before /tmp's; HEAPPROF_PERF_MAP still comes first.
Test(perfmap, the_copy_beside_the_trace_comes_before_the_process_map) {
    unsetenv("HEAPPROF_PERF_MAP");
    const uint32_t pid = 4000000001u;
    char tmp_map[64];
    write_process_map(pid, "2000 20 from_tmp\n", tmp_map);
    char *trace = write_map(""); // any file: stands for the trace
    char beside[128];
    snprintf(beside, sizeof beside, "%s.perf.map", trace);
    cr_expect_eq(perfmap_keep_beside(trace, pid, 0), 1);
    unlink(tmp_map);
    cr_expect_eq(perfmap_keep_beside(trace, pid, 0), 0, "no map to keep");
    cr_expect_neq(access(beside, F_OK), 0, "a copy no process map stands behind was kept");
    // the process's map again: copied again
    write_process_map(pid, "2000 20 from_tmp\n", tmp_map);
    cr_expect_eq(perfmap_keep_beside(trace, pid, 0), 1);
    unlink(tmp_map);
    char *p = perfmap_path_for(trace, pid, 0, false);
    cr_expect(p && !strcmp(p, beside), "the copy: %s", p ? p : "(none)");
    perfmap_t *m = perfmap_load(p);
    cr_expect(m && perfmap_find(m, 0x2010) && !strcmp(perfmap_find(m, 0x2010), "from_tmp"));
    perfmap_free(m);
    free(p);
    setenv("HEAPPROF_PERF_MAP", "/elsewhere/jit.map", 1);
    p = perfmap_path_for(trace, pid, 0, false);
    cr_expect(p && !strcmp(p, "/elsewhere/jit.map"));
    free(p);
    unsetenv("HEAPPROF_PERF_MAP");
    unlink(beside);
    unlink(trace);
    free(trace);
}
