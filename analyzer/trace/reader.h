// SPDX-License-Identifier: MIT
// reader: streams a .hpt trace (docs/trace-format.md): verifies and decompresses chunks, decodes
// records with hpt_rec_decode, merges the threads' streams into one time-ordered event stream
// (docs/trace-format.md#merge), and notes every kind of damage instead of giving up.
// Memory: events between two SYNC chunks, plus stacks, modules and threads. Never the whole trace.
#ifndef HEAPPROF_ANALYZER_READER_H
#define HEAPPROF_ANALYZER_READER_H

#include "core/errmsg.h"
#include "format/hpt_format.h"
#include "trace/event.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct reader_damage {
    uint64_t chunks_ok;      // chunks that verified and decoded
    uint64_t chunks_damaged; // bad regions and undecodable chunks skipped
    uint64_t bytes_skipped;  // bytes passed over while resynchronising (not the truncated tail)
    uint64_t seq_gaps;       // chunks missing by sequence number (includes the damaged ones)
    uint64_t late_events;    // events that arrived below an already released SYNC watermark,
                             // and heap events the shim itself had to place late (trailer)
    uint64_t truncated_bytes;
    bool truncated; // the file ends inside a chunk (process killed mid-write)
    bool trailer;   // a TRAILER chunk was read: the process exited cleanly
} reader_damage_t;

typedef struct reader_module {
    const char *path; // as the loader saw it; NUL-terminated, owned by the reader
    uint64_t base;
    uint64_t size;
    const uint8_t *build_id;
    uint32_t build_id_len;
    uint32_t tid; // thread whose record announced it (0: the module map at start)
    uint64_t load_ns;
    uint64_t unload_ns; // UINT64_MAX while loaded
} reader_module_t;

typedef struct reader_thread {
    uint32_t tid;
    const char *name; // "" if unnamed
    uint64_t start_ns;
    uint64_t end_ns; // UINT64_MAX if no THREAD_END was seen
} reader_thread_t;

typedef struct reader_trailer {
    uint64_t n_events;
    uint64_t n_lost_events;
    uint64_t n_stacks;
    uint64_t n_stack_overflows;
    uint64_t wait_ns; // time the program's threads waited for heapprof (full rings)
    uint64_t n_waits;
    uint64_t workers_cpu_ns; // CPU time of the shim's pipeline workers
    uint64_t flusher_cpu_ns; // CPU time of its flusher thread
    uint64_t n_workers;      // the most pipeline workers that ran at once
} reader_trailer_t;

// CPU samples (docs/trace-format.md#cpu). They change no heap state, so they are not merged
// into the event stream (and never count as late): the reader counts them by stack as it reads.
// The process's resident set as the shim sampled it at each SYNC (docs/trace-format.md#chunks):
// heap plus everything else the process maps and touched (code, stacks, the allocator's
// retained pages, heapprof's own buffers).
typedef struct reader_rss {
    uint64_t n_samples;    // SYNC chunks that carried one (0: a trace from before, or no /proc)
    uint64_t peak_bytes;   // the largest
    uint64_t peak_time_ns; // the SYNC's watermark when it was taken
    // The curve, at most READER_RSS_POINTS points: every sample while they fit, then every
    // second one of those kept (and so on), the peak always among them. Times are watermarks.
    const uint64_t *time_ns, *bytes;
    size_t n_points;
} reader_rss_t;

#define READER_RSS_POINTS 4096

typedef struct reader_cpu {
    bool has_info;      // a CPU_INFO record was read (traces before CPU sampling have none)
    uint8_t source;     // enum hpt_cpu_source of the last CPU_INFO
    uint32_t hz;        // samples asked for per CPU-second
    uint64_t n_samples; // CPU_SAMPLE records read from intact chunks
    uint64_t n_lost;    // samples the shim could not take or keep (its last CPU_INFO's count)
    const char *reason; // why sampling is off ("" when on); owned by the reader
} reader_cpu_t;

// An allocator the shim found that libc's malloc names do not reach (ALLOCATOR records,
// docs/trace-format.md#allocators): how it was hooked, or why it was not.
typedef struct reader_allocator {
    uint8_t status;     // enum hpt_alloc_status
    const char *family; // "jemalloc", "mimalloc", "Rust #[global_allocator]", ...
    const char *detail; // which module, which entry points, or why they could not be hooked
} reader_allocator_t;

typedef struct reader reader_t;

// Opens and checks the file header. Refuses anything but a regular file (never blocks on a
// FIFO or device). Returns NULL and fills err with one line naming the path on failure.
reader_t *reader_open(const char *path, errmsg_t *err);
void reader_close(reader_t *r);

// Hands out the next event in merged time order: 1 = *ev filled, 0 = end of trace, -1 = I/O
// error (err filled). Damage is not an error: it is skipped and counted in reader_damage().
// Hot path.
int reader_next(reader_t *r, reader_event_t *ev, errmsg_t *err);

// The same for a run of events at once, without copying: *evs points at *n >= 1 events (owned
// by the reader, valid until the next reader call). Returns 1, 0 at the end (*n = 0), or -1.
// Mixing it with reader_next is fine. Hot path.
int reader_next_batch(reader_t *r, const reader_event_t **evs, size_t *n, errmsg_t *err);

// The same again, but the events stay valid until the caller gives the batch back with
// reader_batch_done(r, *keep), from any thread, however many reader calls come before: the
// batch holds the reader's memory (a chunk's decoded events, or a merge's output) without a
// copy. Give back every batch before reader_close. Hot path.
typedef struct reader_batch reader_batch_t;
int reader_next_batch_keep(reader_t *r, const reader_event_t **evs, size_t *n,
                           reader_batch_t **keep, errmsg_t *err);
// Gives back a batch of reader_next_batch_keep (NULL is fine). The one reader call that may
// be made from another thread than the one reading, also while it reads.
void reader_batch_done(reader_t *r, reader_batch_t *keep);

// Reads the rest of the file for its definitions only (stacks, modules, threads, process,
// trailer, damage counts) without buffering events: the first pass of a two-pass analysis.
// After it, reader_next returns 0. Returns 0, or -1 on I/O error.
int reader_load_defs(reader_t *r, errmsg_t *err);

// Reads only the first chunk (the META chunk, which holds the PROCESS record), for a caller that
// wants to know which program a trace is of (reader_exe) without reading it all. Returns 0, or
// -1 on I/O error. Then reader_next goes on from there as usual.
int reader_read_process(reader_t *r, errmsg_t *err);

// Frames of a stack id, innermost first (frames[0] is the caller of malloc), and their count in
// *n; NULL if the id was not defined (yet: stacks may be defined after their first use).
// Owned by the reader, valid until reader_close.
const uint64_t *reader_stack(const reader_t *r, uint64_t id, uint32_t *n);
size_t reader_n_stacks(const reader_t *r); // distinct stack ids defined so far

// Modules and threads seen so far, in record order. Valid until the next reader_next. Threads
// are listed only after reader_keep_threads (call it right after reader_open): the list grows
// with every thread the program ever made, and no output needs it.
const reader_module_t *reader_modules(const reader_t *r, size_t *n);
const reader_thread_t *reader_threads(const reader_t *r, size_t *n);
void reader_keep_threads(reader_t *r);

const hpt_file_hdr_t *reader_header(const reader_t *r);
const reader_damage_t *reader_damage(const reader_t *r);
// NULL until a TRAILER chunk was read.
const reader_trailer_t *reader_trailer(const reader_t *r);
// CPU sampling summary; never NULL.
const reader_cpu_t *reader_cpu(const reader_t *r);
// Allocators found beside libc's, in record order (n = 0: none, or a trace from a shim that did
// not look: HPT_FILE_ALLOC_SCAN clear). Owned by the reader, valid until reader_close.
const reader_allocator_t *reader_allocators(const reader_t *r, size_t *n);
// Resident-set samples; never NULL.
const reader_rss_t *reader_rss(const reader_t *r);
// CPU samples counted by stack id (0: unwinding failed): *ids and *counts point at n entries,
// in no particular order, owned by the reader and valid until the next reader call.
size_t reader_cpu_stacks(const reader_t *r, const uint64_t **ids, const uint64_t **counts);

// ---- following a trace that is still being written (docs/design.md#live) ----
// After reader_follow (call it right after reader_open), the end of the file is the end of what
// is written so far, not of the trace: reader_next and reader_next_batch return 0 once every
// event that can be released is handed out (events past the last SYNC watermark wait for the
// next one, docs/trace-format.md#merge), and a chunk only partly written is left for later
// instead of being counted as truncation. A later call reads on from there: only the bytes
// written since (and the partial chunk) are read, and definitions, merge queues and watermark
// carry over. Real damage (a chunk whose crc fails, garbage) is still skipped and counted.
// The trace ends (reader_ended) with its TRAILER, or when the caller says the writer is gone
// (reader_follow_stop: the program no longer exists, or the file stopped growing): then the rest
// is read as a one-shot read would, a partial chunk at the end counting as truncation.
void reader_follow(reader_t *r);
void reader_follow_stop(reader_t *r);
// True once reader_next returned 0 for the end of the trace (not just of what is written).
bool reader_ended(const reader_t *r);
// True when the process that writes the trace (the header's pid) no longer exists.
bool reader_writer_gone(const reader_t *r);
// Frames chunks ahead into the decode pool while it has room, so that decoding goes on while
// the caller is not asking for events (readahead: its ring of batches is full). Changes no
// result: chunks are still applied in file order, when the merge needs them. False if there
// was no room or nothing left to frame. An I/O error is left for the next reader call to meet.
bool reader_prefetch(reader_t *r);
// With HEAPPROF_STAGE_TIMES=2, the reading thread's wait for chunks its decode workers had not
// finished; the most chunks in the decode pool at once (its depth in use). Once the reading is
// over (readahead_free).
uint64_t reader_decode_waited_ns(const reader_t *r);
size_t reader_decode_most_in_flight(const reader_t *r);
// Chunks framed (and whose crc verified) since reader_open: each chunk is counted once,
// so a follower that re-read old chunks would show more than a one-shot read of the same file.
uint64_t reader_chunks_framed(const reader_t *r);
// Chunks whose events were left in the file when read (more than the cap held in memory
// between two SYNCs) and decoded again when the merge reached them.
uint64_t reader_chunks_deferred(const reader_t *r);

// The path the trace was opened by.
const char *reader_path(const reader_t *r);
// Executable and arguments from the PROCESS record; NULL/0 until it was read.
const char *reader_exe(const reader_t *r);
const char *const *reader_argv(const reader_t *r, size_t *argc);
// File offset read up to: progress through the trace, for progress lines.
uint64_t reader_offset(const reader_t *r);

#endif
