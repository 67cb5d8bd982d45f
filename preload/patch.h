// SPDX-License-Identifier: MIT
// Entry patching: makes a function of the host's jump to a wrapper of ours, and gives back a
// trampoline that runs the function's relocated first instructions and jumps back behind them,
// so the wrapper can call the original. Instructions are decoded by Capstone, never by hand,
// except the padding behind an empty function (hp_patch_empty). Capstone is loaded on the first
// call that needs it (dlopen): a process with nothing to patch never maps it.
#ifndef HEAPPROF_PRELOAD_PATCH_H
#define HEAPPROF_PRELOAD_PATCH_H

#include <stddef.h>
#include <stdint.h>

// Patches the function at fn (size bytes, as its symbol says) to jump to the code at wrapper;
// orig_slot (a function-pointer variable) gets the trampoline's address. Returns NULL on success, or why the function was left alone (static text):
// a branch among the first instructions, a jump elsewhere in the function that lands inside the
// bytes the patch overwrites, an instruction Capstone cannot decode or relocate, no memory
// within reach of a 32-bit jump, Capstone not there. The caller makes sure no other thread
// runs (or can reach fn) while this runs. Cold; loads Capstone on its first call, and allocates
// (Capstone) through whatever malloc the host binds.
const char *hp_patch_entry(void *fn, size_t size, uintptr_t wrapper, void *orig_slot);

// Makes a function that does nothing (a lone `ret`, after an `endbr64` or not, then alignment
// padding: glibc's _dl_debug_state) jump to target instead, which returns in its place. The
// jump covers the return and padding up to the next 16-byte boundary; refused (static text)
// when the bytes are anything else. Needs no disassembler (it runs in every process: the
// padding forms are matched by hand). The caller makes sure no other thread runs fn meanwhile.
const char *hp_patch_empty(void *fn, uintptr_t target);

// Checks the same conditions without writing anything: NULL when fn could be patched. Cold.
const char *hp_patch_check(const void *fn, size_t size);

#endif
