// SPDX-License-Identifier: MIT
// `heapprof run [-o TRACE] -- CMD ARGS...`: runs CMD with libheapprof.so preloaded, forwards
// SIGINT/SIGTERM sent to heapprof, waits, and finds the trace file(s) written.
// Prints nothing: main.c reports the result and exits with the command's status.
#ifndef HEAPPROF_ANALYZER_CMD_RUN_H
#define HEAPPROF_ANALYZER_CMD_RUN_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stdint.h>
#include <stddef.h>
#include <sys/types.h>

extern const char cmd_run_usage[];

typedef struct cmd_run_opts {
    const char *out; // -o: HEAPPROF_OUT pattern (%p = pid); NULL keeps the environment's
    char **cmd;      // NULL-terminated argv of the command
    // --sample-bytes: HEAPPROF_SAMPLE_BYTES as a decimal number of bytes (sampled recording,
    // docs/sampling.md); empty keeps the environment's
    char sample_bytes[24];
    bool no_children; // --no-children: HEAPPROF_ONLY_PID, the command's own process alone
} cmd_run_opts_t;

typedef struct cmd_run_result {
    int exit_status;  // the command's, or 128 + signal if it was killed
    bool exec_failed; // the command could not be started (err says why)
    pid_t pid;
    uint32_t run_id;     // HEAPPROF_RUN_ID its processes were given (their traces' headers say it)
    char preload[4096];  // the LD_PRELOAD entry used
    char expected[4096]; // where the command's own trace should be (without a ".N" suffix)
    char **traces;       // traces written since it started: its own first, then descendants'
    size_t n_traces;
    size_t n_perf_maps;  // JIT perf maps (/tmp/perf-PID.map) copied beside their traces
} cmd_run_result_t;

// argv[0] is "run". Returns 0, or -1 with err filled (missing command, unknown option).
int cmd_run_parse(int argc, char **argv, cmd_run_opts_t *o, errmsg_t *err);

// Runs the command and waits for it. Returns 0 when it ran (whatever its status), -1 with err
// filled when it could not be started (res->exec_failed then says whether exec itself failed).
// res->traces is allocated; free it with cmd_run_result_fini.
int cmd_run_exec(const cmd_run_opts_t *o, cmd_run_result_t *res, errmsg_t *err);

// Whether path is an ELF executable without a program interpreter (a static binary, out of
// LD_PRELOAD's reach); false for anything else, unreadable files included. cmd_run_exec refuses
// such a command with one line.
bool cmd_run_is_static_elf(const char *path);
void cmd_run_result_fini(cmd_run_result_t *res);

// The libheapprof.so to preload: beside this executable (build tree, then install layouts),
// else the bare name for the loader's search path. exe_path NULL means /proc/self/exe.
// Writes into out (cap bytes); returns 0, or -1 if the path would not fit.
int cmd_run_find_preload(const char *exe_path, char *out, size_t cap);

// Expands the trace pattern as the shim does (%p -> pid, %% -> %) into out. Returns 0, or -1
// if too long.
int cmd_run_trace_path(const char *pattern, pid_t pid, char *out, size_t cap);

// The program a trace is of (the base name of its PROCESS record's executable) into out, and
// its pid. Reads only the trace's first chunk. Returns 0, or -1 if the trace says no program.
int cmd_run_trace_program(const char *path, char *out, size_t cap, uint32_t *pid);

#endif
