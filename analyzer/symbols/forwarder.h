// SPDX-License-Identifier: MIT
// forwarder: whether a function's machine code only forwards to an allocator, as xmalloc,
// jv_mem_alloc, g_malloc or sqlite3MemMalloc do, so that sites are named by its callers. The rule
// is docs/design.md#allocator-wrappers; x86-64 code, decoded with capstone. Pure over the bytes
// it is handed (no ELF, no trace); never fails: code it cannot follow is "not a forwarder".
#ifndef HEAPPROF_ANALYZER_FORWARDER_H
#define HEAPPROF_ANALYZER_FORWARDER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

// The code of one module, addressed as its ELF file does (vaddr, no load bias).
typedef struct forwarder_code {
    // The bytes at addr and how many follow it in the same section; NULL outside the code.
    const uint8_t *(*bytes)(void *ctx, uint64_t addr, size_t *avail);
    // [*lo, *hi): the function, or the part of one (gcc's .cold split), that holds addr, from
    // call-frame info or the symbol table; false when unknown.
    bool (*bounds)(void *ctx, uint64_t addr, uint64_t *lo, uint64_t *hi);
    void *ctx;
} forwarder_code_t;

// Whether the function holding ret_addr, the return address of a call seen (in the trace) to
// reach an allocator, is a forwarder: small, every returning path after an allocator call
// returns its result untouched, a path without one calls nothing, and no path writes into the
// block, stores it outside the stack frame or hands it to another call. loose allows the last
// (bookkeeping such as sqlite3Malloc's sqlite3MallocSize(p), or a memset) and tail calls
// through a pointer: only with evidence from the trace besides (docs/design.md). May allocate.
bool forwarder_check(const forwarder_code_t *code, uint64_t ret_addr, bool loose);

#endif
