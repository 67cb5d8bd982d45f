// SPDX-License-Identifier: MIT
// End-to-end test helpers: run a program under libheapprof.so, run the heapprof command, read
// samples' .expect files. Paths come from CMake (E2E_LIB, E2E_HEAPPROF, E2E_SAMPLES, E2E_PROGS).
#ifndef HEAPPROF_TESTS_E2E_SPAWN_H
#define HEAPPROF_TESTS_E2E_SPAWN_H

#include <jansson.h>
#include <stdbool.h>

// A fresh empty directory for this test; caller frees the string.
char *e2e_tmpdir(const char *tag);

// The paths of the .hpt files in dir, into out (at most max of them); returns how many.
int e2e_traces_in(const char *dir, char out[][4096], int max);

// Runs argv (argv[0] a path) with LD_PRELOAD=E2E_LIB, HEAPPROF_OUT=out_template and the extra
// NULL-terminated "K=V" env entries. Returns the exit status, or 128 + signal. *pid_out gets
// the child's pid when not NULL.
int e2e_run_preloaded(char *const argv[], const char *out_template, const char *const *env,
                      int *pid_out);

// Runs `heapprof args...`; captures stdout and stderr (malloc'd, NUL-terminated) when not NULL.
// Returns the exit status.
int e2e_heapprof(const char *const args[], char **out, char **err);

typedef struct e2e_run_opts {
    const char *out_template; // HEAPPROF_OUT; NULL leaves it unset (the shim's default name)
    const char *const *env;   // extra NULL-terminated "K=V" entries, or NULL
    const char *cwd;          // the child's working directory; NULL: ours
    bool no_preload;          // run without the shim (reference runs, the heapprof command)
    unsigned timeout_s;       // the child gets SIGALRM (status 128 + 14) after this; 0: never
    unsigned long long max_as_bytes; // RLIMIT_AS of the child (malloc fails beyond); 0: ours
} e2e_run_opts_t;

// Runs argv (argv[0] a path) as e2e_run_preloaded does, with the options above; captures stdout
// and stderr (malloc'd, NUL-terminated) when out/err are not NULL. Returns the exit status, or
// 128 + signal. *pid_out gets the child's pid when not NULL.
int e2e_run(char *const argv[], const e2e_run_opts_t *o, char **out, char **err, int *pid_out);

// `heapprof args...`, asserting it succeeds: its stdout (caller frees), or parsed as JSON.
char *e2e_heapprof_ok(const char *const args[]);
json_t *e2e_heapprof_json(const char *const args[]);

// `heapprof stats --json TRACE [--from-module M]` parsed; asserts success.
json_t *e2e_stats(const char *trace, const char *from_module);
// `heapprof report --json TRACE` parsed; asserts success.
json_t *e2e_report(const char *trace);

// Integer value of key in a samples .expect file (key=value lines, # comments); -1 if absent.
long long e2e_expect(const char *path, const char *key);

// Integer member of a JSON object, asserting it exists.
long long e2e_int(json_t *obj, const char *key);

// The one site of `heapprof report --json` output whose naming function is fn; asserts there
// is exactly one.
json_t *e2e_site(json_t *report, const char *fn);
// The blocks of every site of report whose function is fn (a function with several call sites);
// fails if there is none.
long long e2e_sites_blocks(json_t *report, const char *fn);

#endif
