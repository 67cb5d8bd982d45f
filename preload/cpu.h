// SPDX-License-Identifier: MIT
// CPU sampling of the host (docs/design.md#cpu-samples): per-CPU perf_event cpu-clock events
// inherited by every thread the process creates later, drained and unwound on a thread of our
// own, written as CPU_SAMPLE records (docs/trace-format.md#cpu); where perf is refused, a
// per-thread CPU-time timer signal (cpu_timer.c) whose handler is the only part that runs on
// the app's threads.
#ifndef HEAPPROF_PRELOAD_CPU_H
#define HEAPPROF_PRELOAD_CPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// Starts sampling as hp_config says (or records why it does not: CPU_INFO with source off).
// Call once the trace is open and the writer runs, on the thread whose later threads are to be
// sampled (the constructor's, or a fork child's). Never fails the caller: any error turns
// sampling off and is recorded in the trace. Cold; creates a thread, may take ~1 ms.
void hp_cpu_start(void);

// Stops sampling: disables the events, drains what they hold, writes the final CPU_INFO and
// joins the sampling thread (at most ~1 s). Call before the writer's final flush. Idempotent.
void hp_cpu_stop(void);

// Before execve: with the timer fallback, stops sampling (deletes the timers, whose queued
// signal would kill the new image); nothing to do for perf events. Never in a vfork child (the
// timers and the thread are the parent's). Cold.
void hp_cpu_before_exec(void);

// After an exec that failed (the image goes on): resumes what hp_cpu_before_exec stopped. Cold;
// creates a thread.
void hp_cpu_exec_failed(void);

// The process is to be single-threaded for a moment (writer.h, hp_writer_pause): stops the
// sampling thread, its events or timers left on (samples that come meanwhile wait in their
// rings, or are counted lost). Returns how many threads ended (0 or 1). Cold.
unsigned hp_cpu_pause(void);
// After a pause: starts the sampling thread again; if it cannot start, sampling ends here (its
// final CPU_INFO says why). Cold; creates a thread.
void hp_cpu_resume(void);
// Whether the sampling thread runs (0 or 1): the writer counts the shim's threads.
unsigned hp_cpu_thread_count(void);

// The calling thread's first event (record.c): counted, for the choice between perf events and
// the timer (hp_cpu_perf_too_dear), and with the timer sampling, its own timer armed at once.
// Runs inside malloc; cold.
void hp_cpu_thread_start(uint32_t tid);

// perf events inherited by every new thread cost the kernel a copy per sampled CPU at the
// thread's creation and end (~4.4 us each on the 2-vCPU VM, bench/thread_churn.sh). True when
// `threads` started in `window_ns` on `n_cpus` sampled CPUs would have cost more than
// HP_CPU_SWITCH_SHARE of one CPU that way: the sampling thread then switches to the CPU-time
// timer, whose cost a thread does not grow with the CPUs (docs/design.md#cpu-samples).
#define HP_CPU_INHERIT_NS 4400u
#define HP_CPU_SWITCH_SHARE 0.02
bool hp_cpu_perf_too_dear(uint64_t threads, uint64_t window_ns, unsigned n_cpus);

// fork child: the parent's events, rings and thread are not ours; forget them (closes the
// fds, unmaps the rings). The child starts its own sampling with its trace.
void hp_cpu_fork_child(void);

// One PERF_RECORD_SAMPLE as we request it (TID|TIME|IP|REGS_USER|STACK_USER with rbp, rsp,
// rip): pointers into the record.
typedef struct hp_cpu_sample {
    uint32_t pid, tid;
    uint64_t time_ns; // the event's clock (CLOCK_MONOTONIC)
    uint64_t ip, sp, bp;
    bool has_regs;        // false for a sample taken outside user space (abi NONE)
    const uint8_t *stack; // copy of the user stack from sp upwards
    uint64_t stack_len;   // bytes of it the kernel really copied (dyn_size)
} hp_cpu_sample_t;

// Parses the body of a PERF_RECORD_SAMPLE (after the 8-byte perf_event_header) of len bytes.
// Returns false if the bytes are not a whole sample of that layout. Pure; unit-tested.
bool hp_cpu_parse_sample(const uint8_t *body, size_t len, hp_cpu_sample_t *out);

#endif
