// SPDX-License-Identifier: MIT
// THE trace contract shared by the shim (writer) and the analyzer (reader):
// file header, chunk framing and record tags. Plain data and constants only.
// Changing anything here bumps HPT_VERSION and docs/trace-format.md together.
#ifndef HEAPPROF_FORMAT_HPT_FORMAT_H
#define HEAPPROF_FORMAT_HPT_FORMAT_H

#include <stdint.h>

#define HPT_MAGIC "HEAPPROF" // 8 bytes, no terminator in the file
#define HPT_VERSION 5u

// File = file header, then chunks back to back until EOF. All integers little-endian.
typedef struct hpt_file_hdr {
    char magic[8];       // HPT_MAGIC
    uint32_t version;    // HPT_VERSION
    uint32_t hdr_bytes;  // sizeof(hpt_file_hdr_t): lets a reader skip fields it does not know
    uint64_t start_ns;   // CLOCK_MONOTONIC at trace start; record times are relative to it
    uint64_t start_unix_ns; // CLOCK_REALTIME at the same moment, for humans
    uint32_t pid;
    uint32_t ppid;
    uint32_t flags;      // HPT_FILE_*
    uint32_t touch_fill_max; // with HPT_FILE_TOUCH: blocks up to this many usable bytes are
                             // pattern-filled (HPT_TOUCH_FILL), larger ones on resident pages (PAGES)
    uint32_t run_id;     // HEAPPROF_RUN_ID: the `heapprof run` whose command tree this process
                         // is in (0: none; v3's heap stream kept a time unit in this word)
    uint32_t sample_bytes; // with HPT_FILE_SAMPLED: the mean sampling interval N in bytes, else 0
} hpt_file_hdr_t;

#define HPT_FILE_HAS_MEMBARRIER 1u // sync watermarks are exact (see docs/trace-format.md#merge)
#define HPT_FILE_TOUCH 2u          // frees carry bytes-touched measures (docs/trace-format.md#touch)
#define HPT_FILE_SAMPLED 4u        // only sampled allocations (and their frees) are recorded, each
                                   // standing for 1/p of its kind (docs/trace-format.md#sampled)
#define HPT_FILE_ALLOC_SCAN 8u     // the shim looked for allocators it is not preloaded over; what
                                   // it found is in ALLOCATOR records (docs/trace-format.md#allocators)
#define HPT_FILE_ATTACHED 0x10u    // recording started mid-run (`heapprof attach`): frees of blocks
                                   // made before it are expected (docs/trace-format.md#attached)
#define HPT_FILE_FORKED 0x20u      // the trace of a fork child (before any exec): it inherited the
                                   // parent's heap, so frees of blocks made before the fork are
                                   // expected (docs/trace-format.md#forked). A compatible addition
                                   // to version 5: a reader that ignores it counts them as unknown

#define HPT_CHUNK_MAGIC 0x4b435048u // "HPCK" read as little-endian u32

enum hpt_chunk_type {
    HPT_CHUNK_META = 1,    // process-wide records (tid 0): PROCESS, MODULE_LOAD at start
    HPT_CHUNK_EVENTS = 2,  // one thread's records (since v4 every heap event comes this way)
    HPT_CHUNK_SYNC = 3,    // no payload; base_time_ns = watermark (see docs/trace-format.md#merge)
    HPT_CHUNK_TRAILER = 4, // written once at a clean exit; payload = TRAILER record
    // 5 was v3's heap stream (the shim's own merge of every thread's events); never reused
};

#define HPT_CHUNK_ZSTD 1u    // payload is one zstd frame of raw_bytes
#define HPT_CHUNK_COLUMNS 2u // EVENTS only: the payload (after zstd) holds the records in columns,
                             // not one after another (hpt_columns.h, docs/trace-format.md#columns)

// Every chunk starts with this header. A chunk is self-contained: the delta bases of its first
// record are in the header, so a reader can decode any intact chunk after a damaged one.
typedef struct hpt_chunk_hdr {
    uint32_t magic;       // HPT_CHUNK_MAGIC
    uint16_t type;        // enum hpt_chunk_type
    uint16_t flags;       // HPT_CHUNK_*
    uint32_t tid;         // kernel thread id the records belong to; 0 for process-wide
    uint32_t stored_bytes; // payload bytes following this header in the file
    uint32_t raw_bytes;   // payload bytes after decompression
    uint32_t n_records;
    uint64_t seq;         // 0, 1, 2, ... per file: a gap means lost chunks
    uint64_t base_time_ns; // time delta base of the first record (SYNC: the watermark)
    uint64_t base_addr;   // address delta base of the first record (SYNC: the resident set
                          // in bytes when it was written, 0 if unknown)
    uint32_t crc32;       // zlib crc32 of this header (with crc32 = 0) followed by the payload
    uint32_t reserved;
} hpt_chunk_hdr_t;

#define HPT_CHUNK_MAX_RAW (16u << 20) // reader rejects larger chunks as damage

// Record tags: the first byte of every record. Fields follow as LEB128 varints;
// "dt" is the time since the previous record of the same chunk (or since base_time_ns),
// "addr" is zigzag(addr - previous addr of the chunk) (previous starts at base_addr).
enum hpt_rec_tag {
    HPT_REC_MALLOC = 1,   // dt stack addr size
    HPT_REC_CALLOC = 2,   // dt stack addr size           (size = n * m)
    HPT_REC_ALIGNED = 3,  // dt stack addr size align     (memalign, posix_memalign, aligned_alloc, valloc, pvalloc)
    HPT_REC_FREE = 4,     // dt addr touch
    HPT_REC_REALLOC = 5,  // dt dt2 stack old_addr new_addr size
                          //   dt = time before the real call (old block freed), dt2 = time after it
                          //   returned minus that (new block allocated); old_addr 0 = realloc(NULL, n)
    HPT_REC_STACK = 6,    // id n_frames frame... (first frame absolute, then zigzag deltas; innermost first)
    HPT_REC_THREAD_START = 7, // dt name_len name    (name may be empty)
    HPT_REC_THREAD_END = 8,   // dt
    HPT_REC_MODULE_LOAD = 9,  // dt base size path_len path buildid_len buildid
    HPT_REC_MODULE_UNLOAD = 10, // dt base
    HPT_REC_PROCESS = 11,     // exe_len exe argc (arg_len arg)...   META only
    HPT_REC_TRAILER = 12,     // n_events n_lost_events n_stacks n_stack_overflow n_late wait_ns n_waits
                              //   workers_cpu_ns flusher_cpu_ns n_workers   TRAILER only; wait: time
                              //   app threads spent on full rings; the rest: the pipeline's cost
    HPT_REC_CPU_SAMPLE = 14,  // zdt tid stack   (zdt: zigzag signed time delta; see docs/trace-format.md#cpu)
    HPT_REC_CPU_INFO = 15,    // source hz n_samples n_lost reason_len reason

    // 16-23 were v3's heap-stream records; never reused

    // 24-27 are set aside for sampled recording (docs/trace-format.md#sampled); unused so far
    HPT_REC_ALLOCATOR = 28,   // status family_len family detail_len detail   META, or EVENTS for
                              //   a library loaded by dlopen (docs/trace-format.md#allocators)
    HPT_REC_FREE_SIZED = 29,  // dt addr size align   a free that named the block's size (Rust's
                              //   dealloc: and alignment; jemalloc's sdallocx: align 0, not
                              //   given); never measured for touch (docs/trace-format.md#sized-frees)
    HPT_REC_TOUCH_LIVE = 36, // dt addr touch   a block still live at exit, measured then; addr is
                             //   absolute (no delta), touch as FREE's (docs/trace-format.md#touch)
};

// "touch": how many bytes of the block being freed the program touched (docs/trace-format.md#touch).
// A varint v: 0 = not measured. Otherwise (v - 1) & 3 is the method and (v - 1) >> 2 the count:
//   HPT_TOUCH_FILL: the block was filled with HPT_TOUCH_PATTERN when allocated; the count is the
//     bytes that differ from it, and one more varint follows: zigzag(bytes that are not zero -
//     count), which is the figure for a calloc block (zero-filled, never pattern-filled);
//   HPT_TOUCH_FILL_SAMPLED: the same on every k-th 64-byte line only (k a power of two chosen by
//     the block's usable size), both counts already multiplied by k: an estimate;
//   HPT_TOUCH_RESIDENT: the count is the block's bytes on resident pages (mincore), an upper bound
//     (written by shims before issue #23; no second varint);
//   HPT_TOUCH_PAGES: a block above touch_fill_max: the pattern (sampled as for FILL_SAMPLED) on the
//     pages resident when it was handed out, read back on the pages resident when it was freed;
//     a page faulted in meanwhile counts whole. Two varints as for FILL.
#define HPT_TOUCH_FILL 0u
#define HPT_TOUCH_RESIDENT 1u
#define HPT_TOUCH_FILL_SAMPLED 2u
#define HPT_TOUCH_PAGES 3u // issue #23
#define HPT_TOUCH_PATTERN 0xa5u

// HPT_REC_CPU_INFO source: how CPU samples were taken (docs/trace-format.md#cpu).
enum hpt_cpu_source {
    HPT_CPU_OFF = 0,   // not sampled (turned off, or refused: the reason says why)
    HPT_CPU_PERF = 1,  // perf_event cpu-clock, user-space stacks unwound by the shim
    HPT_CPU_TIMER = 2, // per-thread CPU-time timer signal (fallback)
};

// HPT_REC_ALLOCATOR status: what the shim did about an allocator that libc's malloc names do
// not reach (docs/trace-format.md#allocators).
enum hpt_alloc_status {
    HPT_ALLOC_PATCHED = 0,    // its entry points were patched: its blocks are in the trace
    HPT_ALLOC_INTERPOSED = 1, // imported from a shared library and interposed by name: the same
    HPT_ALLOC_UNHOOKED = 2,   // found but not hooked: its blocks are missing (detail says why)
};

#define HPT_STACK_UNKNOWN 0u     // stack id when unwinding failed
#define HPT_MAX_FRAMES 128u      // frames kept per stack, innermost first
#define HPT_MAX_STRING 4096u     // longest path/name/arg the reader accepts

#endif
