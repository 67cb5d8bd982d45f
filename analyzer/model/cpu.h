// SPDX-License-Identifier: MIT
// cpu: the trace's CPU samples (docs/trace-format.md#cpu) aggregated by stack, symbolized with
// the same symbolizer and frame classifier as allocation sites; functions ranked by samples
// (self: the innermost frame; total: anywhere on the stack), and the allocator's CPU share:
// samples whose stack, below the first user frame, passes through the allocator (malloc and
// friends, operator new/delete, Rust's alloc layer, heapprof's own shim), attributed to that
// user frame. Built lazily: nothing is symbolized until a figure is asked for.
#ifndef HEAPPROF_ANALYZER_CPU_H
#define HEAPPROF_ANALYZER_CPU_H

#include "symbols/symbolize.h"
#include "trace/reader.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_stack {
    uint64_t id;    // stack id in the trace (0: unwinding failed)
    uint64_t count; // samples
    const symbolize_frame_t **frames; // expanded (inlined calls are frames), innermost first
    uint8_t *kinds;                   // sites_frame_kind_t of each frame (allocator, library, user)
    size_t n_frames;                  // 0: the stack is unknown
    bool in_allocator;  // the samples were taken inside the allocator
    bool in_shim;       // ... and in heapprof's own work (recording the call), not the allocator's
    size_t user_frame;  // with in_allocator: the user frame it is charged to (n_frames: none)
} cpu_stack_t;

typedef struct cpu_fn {
    const char *name;     // display name (sites_frame_function); owned by the cpu_t
    const char *location; // its source file (the first frame seen), else its module's file name
    uint64_t self;        // samples with this function innermost (or, for allocator callers,
                          // samples in the allocator charged to it)
    uint64_t total;       // samples with it anywhere on the stack (counted once per sample)
} cpu_fn_t;

typedef struct cpu cpu_t;

// The samples of r (read to its end), to be symbolized with sym. Both must outlive the result.
cpu_t *cpu_new(const reader_t *r, symbolize_t *sym);
void cpu_free(cpu_t *c);

uint64_t cpu_total(const cpu_t *c); // samples in the trace (= the sum over stacks)

// Stacks with their samples, symbolized on first call. *n set; owned by c.
const cpu_stack_t *cpu_stacks(cpu_t *c, size_t *n);

// Functions by self samples, then total, then name (ties), *n set; owned by c. Samples taken in
// heapprof's own shim (cpu_shim_samples) are left out, as they are of cpu_allocator_callers,
// unless cpu_rank_shim(c, true) was called first.
const cpu_fn_t *cpu_functions(cpu_t *c, size_t *n);
void cpu_rank_shim(cpu_t *c, bool on);
bool cpu_ranks_shim(const cpu_t *c);

// Samples in the allocator, and the user functions charged with them, by samples (self).
// Of the allocator samples, those in heapprof's own shim: the profiler's cost, which an
// unprofiled run would not have.
uint64_t cpu_allocator_samples(cpu_t *c);
uint64_t cpu_shim_samples(cpu_t *c);
const cpu_fn_t *cpu_allocator_callers(cpu_t *c, size_t *n);

// "perf", "timer", "off" (or "unknown").
const char *cpu_source_name(unsigned source);

// One line for `heapprof stats`, e.g. "1,234 samples at 997 Hz (perf_event cpu-clock), 0 lost"
// or "off: <reason>"; for traces without a CPU_INFO record, "not recorded". Returns buf.
const char *cpu_describe(const reader_cpu_t *ci, char *buf, size_t cap);

// {"source", "hz", "samples", "lost", "reason"}: the summary as JSON. New reference.
json_t *cpu_info_json(const reader_cpu_t *ci);

#endif
