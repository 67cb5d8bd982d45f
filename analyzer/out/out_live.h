// SPDX-License-Identifier: MIT
// Drawing `heapprof live`'s snapshots (analyze/live.h): a full-screen curses view (the heap
// over time as a bar line, top sites by live bytes and by allocation rate, growth hotspots) and
// the plain one-line-a-refresh form for output that is not a terminal.
#ifndef HEAPPROF_ANALYZER_OUT_LIVE_H
#define HEAPPROF_ANALYZER_OUT_LIVE_H

#include "analyze/live.h"

#include <stdio.h>

// One line: time, live heap, rate, the top site by live bytes and by rate.
void out_live_line(FILE *f, const live_snapshot_t *s);

// Draws the whole screen with curses (initscr done by the caller). s NULL: waiting for the
// trace (why says for what). hist: live bytes at each refresh, oldest first.
void out_live_screen(const char *trace, const live_snapshot_t *s, const char *why,
                     const uint64_t *hist, size_t n_hist);

#endif
