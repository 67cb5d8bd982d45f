// SPDX-License-Identifier: MIT
// Event times against the program's own CLOCK_MONOTONIC (docs/design.md, "The clock"): a block
// the program kept for a time it measured itself must live that long in the report, with the
// default clock (the TSC once its rate is measured, ~10 ms into the run) and with
// HEAPPROF_CLOCK=mono. A wrong TSC rate or a jump at the switch shows as a wrong lifetime.
#include "spawn.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void check_lifetimes(const char *tag, const char *const *env) {
    char *dir = e2e_tmpdir(tag);
    char trace[4200];
    snprintf(trace, sizeof trace, "%s/t.hpt", dir);
    char *argv[] = {E2E_PROGS "/clock", NULL};
    e2e_run_opts_t o = {.out_template = trace, .env = env, .timeout_s = 60};
    char *out = NULL;
    cr_assert_eq(e2e_run(argv, &o, &out, NULL, NULL), 0, "clock failed");
    json_t *r = e2e_report(trace);
    int seen = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        char name[64];
        unsigned long long inner, outer;
        cr_assert_eq(sscanf(line, "%63s %llu %llu", name, &inner, &outer), 3, "bad line: %s",
                     line);
        json_t *s = e2e_site(r, name);
        cr_assert_eq(e2e_int(s, "blocks"), 1);
        long long life = e2e_int(s, "lifetime_ns");
        // The shim reads its clock inside malloc and free, between the program's reads: its
        // lifetime lies between the inner and the outer one, give or take the TSC clock's 2 us
        // lag at the switch and its rate's error (~3 ppm, under 1 us over these 200 ms); 20 us
        // leaves room. (Trace v3 kept times in 4 us units; since v4 they are nanoseconds.)
        // Preemption anywhere only widens the outer bound, so the check holds on a loaded
        // machine.
        cr_expect_geq(life, (long long)inner - 20000, "%s: %s lived %lld ns, the program saw %llu-%llu",
                      tag, name, life, inner, outer);
        cr_expect_leq(life, (long long)outer + 20000, "%s: %s lived %lld ns, the program saw %llu-%llu",
                      tag, name, life, inner, outer);
        seen++;
    }
    cr_expect_eq(seen, 2, "%s: the program printed %d blocks", tag, seen);
    json_decref(r);
    free(out);
    free(dir);
}

Test(clock, lifetimes_match_the_programs_own_clock, .timeout = 120) {
    check_lifetimes("clock-tsc", NULL);
}

Test(clock, lifetimes_match_with_the_vdso_clock, .timeout = 120) {
    static const char *const mono[] = {"HEAPPROF_CLOCK=mono", NULL};
    check_lifetimes("clock-mono", mono);
}
