// SPDX-License-Identifier: MIT
// Stack capture behind one small interface, so the unwinder can be swapped per build.
#ifndef HEAPPROF_PRELOAD_UNWIND_H
#define HEAPPROF_PRELOAD_UNWIND_H

#include <stdbool.h>
#include <stdint.h>

// Fills out[0..max) with return addresses, innermost first, starting at the caller of the
// interposed allocation function (the shim's own frames are dropped). Returns the count, 0 if
// unwinding failed. Sets *same_as_last when the stack is exactly this thread's previous one; out
// is then left unfilled (the caller reuses what it made of the previous stack). Hot path; may
// call the real allocator through the recursion guard.
uint32_t hp_unwind(uint64_t *out, uint32_t max, bool *same_as_last);

// Records the address range of the shim's own code so hp_unwind can drop those frames.
void hp_unwind_init(void);

// With HEAPPROF_UNWIND=check, says on stderr how many stacks differed from libunwind's.
void hp_unwind_report(void);

// The libunwind backend (reference and fallback), same contract as hp_unwind.
uint32_t hp_unwind_libunwind(uint64_t *out, uint32_t max);
void hp_unwind_libunwind_init(uintptr_t self_lo, uintptr_t self_hi);

#endif
