// SPDX-License-Identifier: MIT
// Stack capture with libunwind's unw_backtrace: the reference unwinder, and the fallback for
// frames unwind_cfi.c does not handle (signal frames, CFA expressions). No locks of ours, no
// allocation of ours.
#include "unwind.h"

#include "format/hpt_format.h"
#include "guard.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <stddef.h>

static uintptr_t self_lo, self_hi;

void hp_unwind_libunwind_init(uintptr_t lo, uintptr_t hi) {
    self_lo = lo;
    self_hi = hi;
}

uint32_t hp_unwind_libunwind(uint64_t *out, uint32_t max) {
    void *ips[HPT_MAX_FRAMES + 16];
    hp_guard_cold_t g = hp_guard_cold_enter(); // libunwind's caches and locks: see guard.h
    int n = unw_backtrace(ips, (int)(max + 16 < HPT_MAX_FRAMES + 16 ? max + 16 : HPT_MAX_FRAMES + 16));
    hp_guard_cold_leave(g);
    int i = 0;
    while (i < n && (uintptr_t)ips[i] >= self_lo && (uintptr_t)ips[i] < self_hi)
        i++;
    uint32_t k = 0;
    for (; i < n && k < max; i++)
        out[k++] = (uint64_t)(uintptr_t)ips[i];
    return k;
}
