// SPDX-License-Identifier: MIT
// funcbounds: where each function of a module starts and ends, from its .eh_frame: one frame
// description entry per function (or function part: gcc's .cold splits get their own), kept by
// `strip`, so a stripped program has function bounds where it has no symbols. Addresses are the
// ELF file's (no load bias). Not thread-safe; one owner.
#ifndef HEAPPROF_ANALYZER_FUNCBOUNDS_H
#define HEAPPROF_ANALYZER_FUNCBOUNDS_H

#include <gelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct funcbounds {
    struct funcbounds_range *r; // sorted by start
    size_t n;
} funcbounds_t;

// Reads elf's .eh_frame into fb (empty when it has none or cannot be read: never fails).
// Entries whose pointer encoding it does not know are left out. May allocate.
void funcbounds_init(funcbounds_t *fb, Elf *elf);
void funcbounds_fini(funcbounds_t *fb);

// The entry holding addr: [*lo, *hi). False when none does.
bool funcbounds_find(const funcbounds_t *fb, uint64_t addr, uint64_t *lo, uint64_t *hi);

#endif
