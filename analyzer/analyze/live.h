// SPDX-License-Identifier: MIT
// live: what `heapprof live` shows of a trace that is still being written, brought up to date at
// every refresh: the heap now, the top sites by live bytes and by allocation rate since the
// previous refresh, the growth hotspots, and the live bytes at each refresh so far. Follows the
// trace (analyze_follow_step): a refresh reads only what was written since the last one, and
// waits at a chunk still in progress. No drawing here.
#ifndef HEAPPROF_ANALYZER_LIVE_H
#define HEAPPROF_ANALYZER_LIVE_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define LIVE_TOP 10
#define LIVE_GROWTH_TOP 5
#define LIVE_NAME_BYTES 200

typedef struct live_site {
    char name[LIVE_NAME_BYTES]; // "function  file:line", made safe for a terminal
    uint64_t live_bytes, live_blocks;
    uint64_t bytes;      // allocated since the trace started
    double rate_bytes_s; // allocated per second of the program's time since the last refresh
} live_site_t;

typedef struct live_growth {
    char name[LIVE_NAME_BYTES];
    uint64_t bytes_copied, n_steps;
} live_growth_t;

typedef struct live_snapshot {
    bool finished; // the trace is complete: its TRAILER was read (the program exited or was
                   // detached), or its writer is gone (killed) and the rest was read
    bool attached; // the trace started mid-run (heapprof attach)
    bool forked;   // the trace of a fork child: its heap began as the parent's
    uint32_t pid;
    char exe[LIVE_NAME_BYTES];
    uint64_t time_ns;                 // the program's time of the latest event read
    uint64_t live_bytes, live_blocks; // now
    uint64_t peak_bytes;
    uint64_t n_blocks, n_bytes; // allocated so far
    double rate_bytes_s;        // all sites, since the last refresh
    live_site_t by_live[LIVE_TOP];
    size_t n_by_live;
    live_site_t by_rate[LIVE_TOP];
    size_t n_by_rate;
    live_growth_t growth[LIVE_GROWTH_TOP];
    size_t n_growth;
} live_snapshot_t;

typedef struct live live_t;

// path is kept by pointer. Never fails (allocation failure exits, as everywhere).
live_t *live_new(const char *path);
void live_free(live_t *l);

// Reads what was written since the last refresh and fills *s. Returns 1 with *s filled, 0 when
// the trace is not readable yet (not created, no header: err says why), -1 never.
int live_refresh(live_t *l, live_snapshot_t *s, errmsg_t *err);

// The live bytes at every successful refresh so far, oldest first.
const uint64_t *live_history(const live_t *l, size_t *n);

#endif
