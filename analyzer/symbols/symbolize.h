// SPDX-License-Identifier: MIT
// symbolize: code address -> function, source file and line, with inlined calls expanded, using
// the trace's module map and elfutils' libdwfl (docs/design.md#symbols). Each distinct address is
// looked up once and cached. Never fails on bad input: an address outside every module, a
// module whose file is gone or was rebuilt since the trace, or one without symbols gives a
// frame with what is known (at least the module and offset when the address lies in one).
// Not thread-safe; one owner.
#ifndef HEAPPROF_ANALYZER_SYMBOLIZE_H
#define HEAPPROF_ANALYZER_SYMBOLIZE_H

#include "trace/reader.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct symbolize_frame {
    uint64_t pc;            // the address as recorded
    const char *function;   // demangled, without Rust's hash; NULL when no symbol covers pc
    const char *file;       // source path as in the debug info; NULL without line info
    uint32_t line;          // 0 without line info
    const char *module;     // path of the module holding pc; NULL if none does
    uint64_t module_offset; // pc - the module's load bias (what `addr2line -e MODULE` takes)
    bool inlined;           // this call was inlined into the next (outer) frame
    uint32_t elem_size; // bytes of the function's element type parameter (Rust's T, libstdc++'s
                        // _Tp: what a Vec or vector holds) from DWARF; 0 when it has none
} symbolize_frame_t;

typedef enum symbolize_module_status {
    SYMBOLIZE_MODULE_UNUSED = 0, // no looked-up address fell into it
    SYMBOLIZE_MODULE_OK,         // symbols and line info
    SYMBOLIZE_MODULE_NO_DEBUG,   // symbols only (or none): functions, no file:line
    SYMBOLIZE_MODULE_MISSING,    // file not found or not a usable ELF file
    SYMBOLIZE_MODULE_CHANGED,    // its build id differs from the trace's: rebuilt since
} symbolize_module_status_t;

typedef struct symbolize_module {
    const char *path;
    symbolize_module_status_t status;
    uint64_t n_addresses; // distinct addresses looked up in it
} symbolize_module_t;

typedef struct symbolize symbolize_t;

// Reports every module the reader has seen (call after the reader has read its definitions)
// at its load bias. The reader must outlive the result; NULL means no modules at all. May
// allocate; never fails (modules that cannot be used are marked and give module+offset frames).
symbolize_t *symbolize_new(const reader_t *r);
void symbolize_free(symbolize_t *s);

// Frames for the return address pc, innermost first (*n >= 1): a call with inlined callees
// becomes several frames, all with the same pc. Line info is looked up at pc - 1, inside the
// call instruction. Owned by s and stable until symbolize_free. May allocate.
const symbolize_frame_t *symbolize_addr(symbolize_t *s, uint64_t pc, size_t *n);

// Looks pc up ahead of need (on a thread with time to spare): a later symbolize_addr finds it
// done. Changes no figure (symbolize_modules, symbolize_n_addresses count what was asked for).
void symbolize_warm(symbolize_t *s, uint64_t pc);

// Whether s still covers r's modules: none was added since symbolize_new (a module loaded
// later in the trace makes s outdated; so may a reader that moved its module table).
bool symbolize_current(const symbolize_t *s, const reader_t *r);

// The modules in reader order, with what symbolization found in each.
const symbolize_module_t *symbolize_modules(const symbolize_t *s, size_t *n);
size_t symbolize_n_addresses(const symbolize_t *s);

// Code outside every module (JIT-compiled code, mostly): the distinct addresses asked for that
// lie there, how many of them the process's perf map named (symbols/perfmap.h: /tmp/perf-PID.map
// or HEAPPROF_PERF_MAP), and that map's path (NULL: none was found or it named nothing).
const char *symbolize_jit(const symbolize_t *s, size_t *n_outside, size_t *n_named);

// Whether the function that holds return address pc only forwards to an allocator (forwarder.h;
// docs/design.md#allocator-wrappers), pc being seen in a stack as a call into an allocator or
// into such a forwarder; loose: by forwarder_check's loose rule. From the module's machine code
// and .eh_frame, so it works on stripped files; false when the module's file cannot be read.
// Cached per pc. May allocate.
bool symbolize_forwards_to_allocator(symbolize_t *s, uint64_t pc, bool loose);

// Where the function (or the function part) that holds return address pc starts, in the
// process's addresses, from .eh_frame or the symbol table; 0 when unknown. May allocate.
uint64_t symbolize_function_start(symbolize_t *s, uint64_t pc);

// Shortens a source path for display to its last n_components components
// ("/work/app/src/main.rs", 3 -> "app/src/main.rs"). Returns a pointer into path.
const char *symbolize_short_path(const char *path, int n_components);

#endif
