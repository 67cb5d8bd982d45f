// SPDX-License-Identifier: MIT
// The heap stream encoder (docs/trace-format.md#heap). The writer thread feeds it every app
// thread's records in one merged time order; it keeps the live blocks (address -> serial
// number) and writes HEAP records that name blocks by serial, so the file carries no addresses
// and the analyzer needs no address table. Single owner (the writer thread), no locks, memory
// from mmap only; the unit tests' trace builder uses it too.
#ifndef HEAPPROF_PRELOAD_RESOLVE_H
#define HEAPPROF_PRELOAD_RESOLVE_H

#include "format/hpt_codec.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct hp_resolve {
    uint64_t *tab;  // live blocks: pairs (address, serial); address 0 = empty slot
    size_t cap, n;  // slots (a power of two), live blocks
    hpt_dstate_t enc; // output state: quantized time, serial base (the next new block's serial)
    uint32_t tid;     // thread of the last record written
    uint64_t n_reused; // allocations at an address that was still live (its free was missed)
    uint32_t n_out;    // records written; the caller resets it per chunk
    uint64_t n_late;   // records timed below one already written: placed at the stream's time
} hp_resolve_t;

// Room a caller must leave in the output for one record (a STACK of HPT_MAX_FRAMES frames or a
// MODULE_LOAD with the longest path and build id).
#define HP_RESOLVE_REC_MAX (64 + HPT_MAX_FRAMES * HPT_VARINT_MAX + 2 * HPT_MAX_STRING)

// Serials start at 1. Returns false if the first table cannot be mapped.
bool hp_resolve_init(hp_resolve_t *rs, unsigned time_shift);
// Unmaps the table (also right in a fork child: the copy is the child's own).
void hp_resolve_fini(hp_resolve_t *rs);

// Where a realloc stands between its two halves (the merge places each at its own time).
typedef struct hp_resolve_pending {
    uint64_t old_serial; // the old block's serial (0: realloc(NULL, n) or never seen)
    uint64_t old_addr;
} hp_resolve_pending_t;

// A HEAP chunk being written: one buffer per column (docs/trace-format.md#heap), each with
// room for HP_RESOLVE_REC_MAX bytes past its len whenever a record is encoded.
typedef struct hp_hout {
    uint8_t *col[HPT_HCOLS];
    size_t len[HPT_HCOLS];
} hp_hout_t;

// Encodes one ring record `rec` (raw bytes raw..raw_end) of thread tid into o. A REALLOC is
// fed twice: half 0 (the old block dies, at rec->time_ns), then half 1 (the new one is born, at
// rec->time2_ns), with the same *pend. Returns false: out of memory, or a record that has no
// place in the heap stream (the writer then stops profiling). Heap events need no raw bytes.
bool hp_resolve_rec(hp_resolve_t *rs, hp_hout_t *o, uint32_t tid, const hpt_rec_t *rec,
                    const uint8_t *raw, const uint8_t *raw_end, int half,
                    hp_resolve_pending_t *pend);

// One app-thread heap event (MALLOC, CALLOC, ALIGNED, FREE, REALLOC) as the writer's merge
// decodes it. Its stack id and size stay the ring's own varint bytes: the HEAP columns take
// them unchanged (both are hpt_put_varint's LEB128), so the writer neither decodes nor
// re-encodes them. HP_RESOLVE_EV_SLACK bytes from stack_p and from size_p must be readable.
typedef struct hp_resolve_ev {
    uint8_t tag;               // HPT_REC_MALLOC .. HPT_REC_REALLOC
    uint8_t touch;             // FREE: 0 not measured, else 1 + HPT_TOUCH_*
    uint8_t stack_len;         // bytes of the stack id's varint at stack_p
    uint8_t size_len;          // bytes at size_p: the size's varint (ALIGNED: and the alignment's)
    uint64_t time_ns, time2_ns; // REALLOC: before and after the call
    uint64_t addr, old_addr;    // old_addr: REALLOC only
    uint64_t size;              // REALLOC only: its code needs the value
    uint64_t touched, touched_nz; // FREE with touch
    const uint8_t *stack_p, *size_p;
} hp_resolve_ev_t;
#define HP_RESOLVE_EV_SLACK 16

// hp_resolve_rec for a heap event, with the same contract. Hot path of the writer thread.
bool hp_resolve_ev(hp_resolve_t *rs, hp_hout_t *o, uint32_t tid, const hp_resolve_ev_t *ev,
                   int half, hp_resolve_pending_t *pend);

// A new HEAP chunk begins: its header takes the state now (rs->enc, rs->tid), and the state
// of references that a chunk does not carry over restarts (hpt_heap_state).
void hp_resolve_chunk_start(hp_resolve_t *rs);

// Bytes in o's columns. Inline: the writer asks after every record whether a chunk is full.
static inline size_t hp_hout_bytes(const hp_hout_t *o) {
    size_t n = 0;
    for (int i = 0; i < HPT_HCOLS; i++)
        n += o->len[i];
    return n;
}
// Writes o as a HEAP payload (column table, then the columns) at dst, which has room for
// hp_hout_bytes(o) + HP_HOUT_TABLE_MAX, and empties o. Returns the payload's size.
size_t hp_hout_assemble(hp_hout_t *o, uint8_t *dst);
#define HP_HOUT_TABLE_MAX (1 + (HPT_HCOLS - 1) * HPT_VARINT_MAX)

// A table this small stays in the cache whatever the order of its slots: there a scattering
// hash avoids the long runs that neighbouring addresses form (c_threads: 4,096 live blocks per
// thread spread over megabytes of heap alias onto a 16 K-slot table).
#define HP_RESOLVE_SMALL (64u * 1024)

// Neighbouring blocks get neighbouring slots: blocks made together are mostly freed together,
// so a table far bigger than the cache is still probed in cache (a scattering hash made every
// probe a miss: a third of the writer's time on rust_vec_growth's 2.8 M live blocks). The
// higher bits are folded in so that blocks at a power-of-two stride (mmapped ones) spread out
// instead of piling onto one slot. (Scattering 1 KiB windows instead, to shorten the runs of a
// small table, gained nothing on c_threads and lost 20% on rust_vec_growth.)
static inline size_t hp_resolve_home(const hp_resolve_t *rs, uint64_t addr) {
    if (rs->cap <= HP_RESOLVE_SMALL) {
        uint64_t m = addr * 0x9E3779B97F4A7C15ull;
        return (size_t)(m >> 40) & (rs->cap - 1);
    }
    uint64_t h = (addr >> 4) ^ (addr >> 19) ^ (addr >> 33);
    return (size_t)h & (rs->cap - 1);
}

// Hints that a block at addr will be looked up soon: its table slot is fetched while other
// work goes on. always_inline: gcc 12 takes a function whose only effect is __builtin_prefetch
// for a const one and deletes its calls before inlining them (as in the analyzer's
// hmap_prefetch); until then the shim's library held no prefetch instruction at all.
__attribute__((always_inline)) static inline void hp_resolve_prefetch(const hp_resolve_t *rs,
                                                                      uint64_t addr) {
    __builtin_prefetch(&rs->tab[2 * hp_resolve_home(rs, addr)], 1);
}

#endif
