// SPDX-License-Identifier: MIT
// HEAPPROF_* settings, read once at start into a fixed struct. See README "Configuration".
#ifndef HEAPPROF_PRELOAD_CONFIG_H
#define HEAPPROF_PRELOAD_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#define HP_PATH_MAX 4096

enum hp_unwinder {
    HP_UNWIND_CFI = 0,       // our CFI walker, libunwind for frames it does not handle
    HP_UNWIND_LIBUNWIND = 1, // libunwind only
    HP_UNWIND_CHECK = 2,     // both on every event; report differences at exit (testing)
};

enum hp_cpu_mode {
    HP_CPU_OFF = 0,   // HEAPPROF_CPU=0: no CPU samples
    HP_CPU_AUTO = 1,  // default: perf_event, else the fallback
    HP_CPU_PERF = 2,  // HEAPPROF_CPU=perf: perf_event only
    HP_CPU_TIMER = 3, // HEAPPROF_CPU=timer: the fallback only (as if perf were refused)
};

typedef struct hp_config {
    char out[HP_PATH_MAX];  // HEAPPROF_OUT, %p not yet expanded
    uint32_t flush_ms;      // HEAPPROF_FLUSH_MS: longest time an event waits before it is written
    uint32_t max_frames;    // HEAPPROF_MAX_FRAMES: frames kept per stack
    uint32_t ring_bytes;    // HEAPPROF_BUFFER_KB * 1024: per-thread buffer, a power of two
    int zstd_level;         // HEAPPROF_ZSTD_LEVEL
    bool quiet;             // HEAPPROF_QUIET=1: no "writing trace to" nor "exists; writing" line
    bool enabled;           // HEAPPROF_ENABLE=0 turns recording off (the shim passes through)
    int unwinder;           // HEAPPROF_UNWIND: cfi (default), libunwind, check
    int cpu;                // HEAPPROF_CPU: enum hp_cpu_mode
    uint32_t cpu_hz;        // HEAPPROF_CPU_HZ: CPU samples per CPU-second (default 997)
    bool touch;             // HEAPPROF_TOUCH=0: do not measure bytes touched (touch.h)
    uint32_t touch_fill_max; // HEAPPROF_TOUCH_FILL_MAX: largest block (usable bytes) to fill
    uint32_t touch_sample_bytes; // HEAPPROF_TOUCH_SAMPLE_BYTES: most bytes measured per block
    bool touch_live;        // HEAPPROF_TOUCH_LIVE=0: blocks live at exit not measured (touch_live.h)
    uint32_t chunk_kb;      // HEAPPROF_CHUNK_KB: most raw bytes of records per chunk, in KiB
    uint32_t test_drain_delay_ms; // HEAPPROF_TEST_DRAIN_DELAY_MS: workers and the flusher sleep
                                  // this long before each drain (tests of back-pressure only)
    bool cpu_switch;        // HEAPPROF_CPU_SWITCH=0: perf events are never given up for the timer
    uint32_t test_cpu_switch_after; // HEAPPROF_TEST_CPU_SWITCH_AFTER: switch once this many
                                    // threads have started, whatever their rate (tests only)
    bool clock_tsc;         // HEAPPROF_CLOCK=mono: event times from the vDSO only (clock.h)
    bool attached;          // recording started mid-run by `heapprof attach` (not from the environment)
    uint32_t announce_pid;  // HEAPPROF_ANNOUNCE_PID: only the process of this pid says on stderr
                            // where its trace goes (`heapprof run` lists them all at the end;
                            // 0: every process says it)
    uint32_t run_id;        // HEAPPROF_RUN_ID: the `heapprof run` this process runs under, kept in
                            // the file header so that the command finds its whole tree's traces
                            // (0: none)
    uint32_t only_pid;      // HEAPPROF_ONLY_PID: record only the process of this pid (its exec'd
                            // images too), pass through in every other (0: record them all)
    uint32_t fork_parent;   // this image is a fork child of that pid (0: it is not): its heap
                            // began as the parent's (set at the fork, not from the environment;
                            // an exec starts a new image)
    uint32_t sample_bytes;  // HEAPPROF_SAMPLE_BYTES: mean bytes between samples; 0 = record all
    uint64_t sample_seed;   // HEAPPROF_SAMPLE_SEED (default: the process id), sample.h
} hp_config_t;

extern hp_config_t hp_config;

// Fills hp_config from the environment. A bad value is reported once on stderr and the default
// used. Never allocates.
void hp_config_load(void);

// Whether this process says where its trace goes ("writing trace to ..."): not quiet, and the
// process HEAPPROF_ANNOUNCE_PID names if it names one.
bool hp_config_announces(void);

#endif
