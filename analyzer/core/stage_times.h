// SPDX-License-Identifier: MIT
// Where an analyzer command's time goes, for maintainers measuring on many cores: with
// HEAPPROF_STAGE_TIMES=1 each stage_mark prints one stderr line with the wall time since the
// previous mark, the process's CPU time (all threads) and the calling thread's CPU time in
// that stretch. CPU/wall near 1 on the calling thread marks a serial stage. Silent otherwise.
// HEAPPROF_STAGE_TIMES=2 adds, at stage_threads, each of the process's threads by name: its
// CPU time and the time it waited for a CPU while runnable (/proc's schedstat), so a stage
// that waits on a thread preempted for another (more threads than CPUs) shows as wait.
#pragma once

#include <stdint.h>

// CLOCK_MONOTONIC in nanoseconds: what every stage time and measured wait is read from.
uint64_t stage_clock_ns(void);

// Ends the stretch since the previous mark (or the first call) and names it.
void stage_mark(const char *stage);

// With HEAPPROF_STAGE_TIMES=2: one stderr line per thread name (threads of one name summed,
// with the busiest one's), CPU seconds and seconds spent runnable but not running, since each
// thread started. `when` names the moment.
void stage_threads(const char *when);

// HEAPPROF_STAGE_TIMES's level: 0 off, 1 stages, 2 stages and threads (what the threads of a
// stage waited for, where they measure it).
int stage_times_level(void);
