// SPDX-License-Identifier: MIT
// The C sample under the real preload must give exactly the counts it is built to produce.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>

Test(exact_counts, stats_equal_the_counts_the_sample_is_built_to_produce) {
    char *dir = e2e_tmpdir("exact");
    char trace[4096], expect[4096];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    snprintf(expect, sizeof expect, "%s/exact_counts.expect", E2E_SAMPLES);
    char *argv[] = {E2E_SAMPLES "/exact_counts", NULL};
    cr_assert_eq(e2e_run_preloaded(argv, trace, NULL, NULL), 0);

    // Only the sample's own calls: libc allocates a DTV per thread on its own behalf.
    json_t *s = e2e_stats(trace, "exact_counts");
    const char *keys[] = {"blocks", "bytes", "frees", "peak_bytes", "peak_blocks",
                          "end_bytes", "end_blocks", "threads"};
    for (size_t i = 0; i < sizeof keys / sizeof *keys; i++) {
        long long want = e2e_expect(expect, keys[i]);
        cr_assert_neq(want, -1, "%s missing from %s", keys[i], expect);
        cr_expect_eq(e2e_int(s, keys[i]), want, "%s: heapprof says %lld, the sample makes %lld",
                     keys[i], e2e_int(s, keys[i]), want);
    }
    json_t *damage = json_object_get(s, "damage");
    cr_expect(json_is_true(json_object_get(damage, "clean_exit")));
    json_decref(s);
    free(dir);
}
