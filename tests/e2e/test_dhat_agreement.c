// SPDX-License-Identifier: MIT
// heapprof's totals on a program must agree with Valgrind DHAT's on the same program, to within
// the few blocks libc makes on its own behalf (DTVs sized differently under each tool, blocks
// Valgrind's start-up makes). DHAT is the independent truth here.
#include "spawn.h"

#include <criterion/criterion.h>
#include <criterion/parameterized.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

typedef struct totals {
    long long tb, tbk, gb, gbk, eb, ebk;
} totals_t;

static totals_t dhat_totals(const char *prog, const char *dir) {
    char json[4096], cmd[16384];
    snprintf(json, sizeof json, "%s/dhat.json", dir);
    snprintf(cmd, sizeof cmd,
             "valgrind --tool=dhat --dhat-out-file=%s %s >/dev/null 2>%s/valgrind.log", json, prog,
             dir);
    int st = system(cmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "valgrind failed: %s", cmd);
    json_error_t je;
    json_t *j = json_load_file(json, 0, &je);
    cr_assert(j, "DHAT output unreadable: %s", je.text);
    totals_t t = {0};
    size_t i;
    json_t *pp;
    json_array_foreach(json_object_get(j, "pps"), i, pp) {
        t.tb += json_integer_value(json_object_get(pp, "tb"));
        t.tbk += json_integer_value(json_object_get(pp, "tbk"));
        t.gb += json_integer_value(json_object_get(pp, "gb"));
        t.gbk += json_integer_value(json_object_get(pp, "gbk"));
        t.eb += json_integer_value(json_object_get(pp, "eb"));
        t.ebk += json_integer_value(json_object_get(pp, "ebk"));
    }
    json_decref(j);
    return t;
}

static void check_close(const char *what, long long ours, long long dhat, long long slack) {
    long long d = ours - dhat;
    cr_expect(d <= slack && d >= -slack, "%s: heapprof %lld, DHAT %lld (allowed difference %lld)",
              what, ours, dhat, slack);
}

static void agree(const char *name) {
    char prog[4096];
    snprintf(prog, sizeof prog, "%s/%s", E2E_SAMPLES, name);
    if (access(prog, X_OK)) {
        cr_skip_test("%s was not built (no rustc?)", name);
    }
    char *dir = e2e_tmpdir(name);
    char trace[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {prog, NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);
    json_t *s = e2e_stats(trace, NULL);
    totals_t d = dhat_totals(prog, dir);
    // libc's own: a DTV per thread (288-304 B) and a few start-up blocks; DHAT stores
    // malloc(0) as 1 byte
    const long long blocks = 8, bytes = 8 * 1024;
    check_close("total blocks", e2e_int(s, "blocks"), d.tbk, blocks);
    check_close("total bytes", e2e_int(s, "bytes"), d.tb, bytes);
    check_close("blocks at peak", e2e_int(s, "peak_blocks"), d.gbk, blocks);
    check_close("bytes at peak", e2e_int(s, "peak_bytes"), d.gb, bytes);
    // At exit Valgrind runs libc's and libstdc++'s freeres hooks, which free stdio buffers and
    // libstdc++'s 72,704-byte emergency exception pool; in a real run they stay live.
    const long long freeres_bytes = 72704 + 2 * 4096;
    check_close("blocks at exit", e2e_int(s, "end_blocks"), d.ebk, blocks);
    check_close("bytes at exit", e2e_int(s, "end_bytes"), d.eb, bytes + freeres_bytes);
    json_decref(s);
    free(dir);
}

Test(dhat_agreement, c_sample, .timeout = 600) {
    agree("exact_counts");
}
Test(dhat_agreement, cpp_sample, .timeout = 600) {
    agree("vector_map");
}
Test(dhat_agreement, rust_vec_sample, .timeout = 600) {
    agree("vec_growth");
}
Test(dhat_agreement, rust_hashmap_sample, .timeout = 600) {
    agree("hashmap_words");
}
