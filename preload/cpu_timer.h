// SPDX-License-Identifier: MIT
// The CPU-sampling fallback when perf events are refused: a timer on each thread's CPU-time
// clock, armed by each thread at its first allocation and from the sampling thread's listing of
// /proc/self/task (no pthread_create hook), a signal handler that walks the
// live stack with known unwind rules only and leaves the sample in a lock-free slot array.
// cpu.c runs it; interpose.c hands it the program's sigaction calls. See
// docs/design.md#cpu-samples.
#ifndef HEAPPROF_PRELOAD_CPU_TIMER_H
#define HEAPPROF_PRELOAD_CPU_TIMER_H

#include <signal.h>
#include <stdbool.h>
#include <stdint.h>

#define HP_CPU_TIMER_FRAMES 64

typedef struct hp_cpu_tsample {
    uint32_t tid;
    uint32_t n_frames;
    uint64_t time_ns; // CLOCK_MONOTONIC
    uint64_t want_pc; // first pc whose unwind rule was not known yet (0: none)
    uint64_t frames[HP_CPU_TIMER_FRAMES]; // frame 0 = interrupted pc + 1, as for perf samples
} hp_cpu_tsample_t;

// Picks a signal nobody handles, installs the handler and makes the slot array. Returns false
// with *reason set. period_ns: CPU time between samples of one thread. Cold, any thread.
bool hp_cpu_timer_open(uint64_t period_ns, const char **reason);

// Arms a timer on every thread that has none (skipping the shim's own), deletes those of
// threads that are gone; false with *reason set when the program took the signal over (all
// timers are then deleted). Sampling thread only.
bool hp_cpu_timer_scan(uint32_t self_tid, const char **reason);

// The calling thread (tid, its first recorded event): makes sure it has an alternate signal
// stack (altstack.h; without one it is left to the listing), then arms a timer on its own
// CPU-time clock at once, for the sampling thread to take in at its next scan, so a thread that
// lives less than a scan's interval is sampled too. Nothing when the timer is not sampling. Runs
// inside malloc: a few system calls, no allocation; locks held for a few stores.
void hp_cpu_timer_thread_start(uint32_t tid);

// Takes the oldest sample the handler left; false when there is none. Sampling thread only.
bool hp_cpu_timer_next(hp_cpu_tsample_t *out);

// Samples the handler could not keep (slots full).
uint64_t hp_cpu_timer_lost(void);

// Deletes every timer; the handler stays installed but does nothing (a signal still queued
// must not meet the default action). Any thread.
void hp_cpu_timer_close(void);

// The program's sigaction(s, act, old) (also signal()): when s is the timer's signal, keeps our
// handler installed, records act as the program's (forwarded every signal that is not one of
// our timers'), fills old with the program's previous one, sets *rc and returns true; false:
// not ours, the caller calls the real function. Async-signal-safe.
bool hp_cpu_timer_sigaction(int s, const struct sigaction *act, struct sigaction *old, int *rc);

// fork child: timers are not inherited; forget the parent's.
void hp_cpu_timer_fork_child(void);

#endif
