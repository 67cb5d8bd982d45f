// SPDX-License-Identifier: MIT
// Allocators the dynamic linker does not route through the shim: a Rust #[global_allocator],
// jemalloc/mimalloc/tcmalloc linked into the executable, a program's own malloc. Found at start
// from the symbol tables of the loaded modules (libelf); hooked by entry patching (patch.h) or,
// for mimalloc imported from its shared library, by name; otherwise reported, so a trace never
// looks complete when it is not (docs/trace-format.md#allocators).
#ifndef HEAPPROF_PRELOAD_ALLOCSCAN_H
#define HEAPPROF_PRELOAD_ALLOCSCAN_H

#include "modmap.h"

#include <stdbool.h>

// The entry points a wrapper exists for. The wrappers live in the preloaded module
// (hook_static.c), which defines hp_hook_table; a program without it (the unit tests) hooks
// nothing and only reports.
enum hp_hook_role {
    HP_HOOK_MALLOC, // libc's names, defined by the executable itself
    HP_HOOK_FREE,
    HP_HOOK_CALLOC,
    HP_HOOK_REALLOC,
    HP_HOOK_POSIX_MEMALIGN,
    HP_HOOK_ALIGNED_ALLOC,
    HP_HOOK_MEMALIGN,
    HP_HOOK_VALLOC, // page-aligned (Chromium's PartitionAlloc, tcmalloc, mimalloc define them)
    HP_HOOK_PVALLOC,
    HP_HOOK_NEW, // C++'s operator new and delete, when the executable defines them (tcmalloc)
    HP_HOOK_NEW_ARRAY,
    HP_HOOK_DELETE,
    HP_HOOK_DELETE_ARRAY,
    HP_HOOK_DELETE_SIZED,
    HP_HOOK_DELETE_ARRAY_SIZED,
    HP_HOOK_NEW_NOTHROW, // the nothrow and aligned forms (C++17's align_val_t), in that order:
    HP_HOOK_NEW_ARRAY_NOTHROW, // each form's plain name before its array one, so an alias
    HP_HOOK_NEW_ALIGNED,       // (allocscan.c's is_alias) is hooked under the plainer role
    HP_HOOK_NEW_ARRAY_ALIGNED,
    HP_HOOK_NEW_ALIGNED_NOTHROW,
    HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW,
    HP_HOOK_DELETE_NOTHROW,
    HP_HOOK_DELETE_ARRAY_NOTHROW,
    HP_HOOK_DELETE_ALIGNED,
    HP_HOOK_DELETE_ARRAY_ALIGNED,
    HP_HOOK_DELETE_SIZED_ALIGNED,
    HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED,
    HP_HOOK_DELETE_ALIGNED_NOTHROW,
    HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW,
    HP_HOOK_CXX_LAST = HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW,
    HP_HOOK_RUST_ALLOC, // Rust's allocator shims (__rust_alloc, ...), plain or v0-mangled
    HP_HOOK_RUST_DEALLOC,
    HP_HOOK_RUST_REALLOC,
    HP_HOOK_RUST_ALLOC_ZEROED,
    HP_HOOK_MALLOCX, // jemalloc's non-standard API, bare or with je_ / _rjem_ prefixes
    HP_HOOK_RALLOCX,
    HP_HOOK_SDALLOCX,
    HP_HOOK_DALLOCX,
    HP_HOOK_JE_MALLOC, // jemalloc's standard names with its prefix (tikv-jemallocator's
    HP_HOOK_JE_CALLOC, // _rjem_malloc for the common layouts), beside libc's own
    HP_HOOK_JE_REALLOC,
    HP_HOOK_JE_FREE,
    HP_HOOK_MI_MALLOC, // mimalloc
    HP_HOOK_MI_CALLOC,
    HP_HOOK_MI_ZALLOC,
    HP_HOOK_MI_REALLOC,
    HP_HOOK_MI_FREE,
    HP_HOOK_MI_MALLOC_ALIGNED,
    HP_HOOK_MI_ZALLOC_ALIGNED,
    HP_HOOK_MI_REALLOC_ALIGNED,
    HP_HOOK_MI_FREE_SIZE,
    HP_HOOK_MI_FREE_ALIGNED,
    HP_HOOK_MI_FREE_SIZE_ALIGNED,
    HP_HOOK_N
};

// wrapper[role]: the function a patched entry jumps to; orig[role]: the function-pointer
// variable where that wrapper finds the original (a trampoline, or for mimalloc imported by name
// the library's function), written as its bits.
typedef void (*hp_hook_fn_t)(void);
typedef struct hp_hook_table {
    hp_hook_fn_t wrapper[HP_HOOK_N];
    void *orig[HP_HOOK_N];
    hp_hook_fn_t on_dl_state; // what the loader's _dl_debug_state jumps to: calls
                              // hp_allocscan_dl_state, keeping every general register
} hp_hook_table_t;

// Looks at every loaded module, hooks what it can and says on stderr what it cannot (always) and
// what it hooked (unless quiet). Call once per process image, before recording starts, while
// the process has one thread: patching is refused (and said) otherwise. Cold; allocates
// through the host's malloc (libelf, Capstone), so the caller holds the recursion guard.
void hp_allocscan_run(void);

// The loader says its list of modules changed (glibc calls _dl_debug_state, patched at start
// by hp_allocscan_run, after mapping the objects of a dlopen and before relocating them or
// running any of their code, holding its lock). Scans the modules not seen yet and hooks their
// allocators: no thread can be running their code yet, since dlopen has not returned and their
// constructors have not run. Findings go to stderr and, while recording, into the calling
// thread's stream. Cold.
void hp_allocscan_dl_state(void);

// Emits one ALLOCATOR record per finding into the META chunk (writer.c). True when the scan ran
// (the trace's header then carries HPT_FILE_ALLOC_SCAN).
bool hp_allocscan_emit(hp_modmap_emit_fn emit, void *ctx);

#endif
