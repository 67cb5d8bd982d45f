// SPDX-License-Identifier: MIT
// `heapprof pprof TRACE [-o FILE] [--at exit|peak] [--full-stacks]`: the trace's allocation
// sites as a gzipped pprof profile (docs/pprof.md). Writes only to the FILE it is given or the -o
// file (replaced only once complete); errors and warnings go back to main.c.
// `heapprof pprof --follow TRACE --every 10s --out-dir DIR`: one profile per interval of a trace
// that is still being written, until the program exits (docs/pprof.md#follow).
#ifndef HEAPPROF_ANALYZER_CMD_PPROF_H
#define HEAPPROF_ANALYZER_CMD_PPROF_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

extern const char cmd_pprof_usage[];

typedef struct cmd_pprof_opts {
    const char *trace;
    const char *out; // -o: NULL or "-" writes to the FILE given to cmd_pprof_run
    bool at_peak;
    bool full_stacks;
    bool follow;
    const char *out_dir;  // --out-dir (follow)
    uint64_t every_ns;    // --every (follow), default 10 s
} cmd_pprof_opts_t;

// What main.c prints on stderr after a profile was written: what the trace lacked.
typedef struct cmd_pprof_warnings {
    char damage[512];     // the report's damage line, or ""
    char unfinished[256]; // the trace has no trailer, or ""
} cmd_pprof_warnings_t;

// argv[0] is "pprof". Returns 0, or -1 with err filled.
int cmd_pprof_parse(int argc, char **argv, cmd_pprof_opts_t *o, errmsg_t *err);

// Reads the trace and writes the profile to o->out or to out (refused when out is a terminal).
// progress: a terminal for the progress line, or NULL. Returns 0 with *w filled, or -1 with err
// filled and nothing written.
int cmd_pprof_run(const cmd_pprof_opts_t *o, FILE *out, FILE *progress, cmd_pprof_warnings_t *w,
                  errmsg_t *err);

// Follow mode: every o->every_ns, reads the trace as written so far and writes one profile into
// o->out_dir (alloc_* over the interval, inuse_* at its end), calling on_write with its path;
// returns 0 after the profile that read the trace's trailer (the program exited), or -1 with err
// filled (the trace cannot be opened at the start, or a profile cannot be written).
int cmd_pprof_follow(const cmd_pprof_opts_t *o, void (*on_write)(const char *path, void *ctx),
                     void *ctx, errmsg_t *err);

#endif
