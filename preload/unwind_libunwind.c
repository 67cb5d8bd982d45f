// SPDX-License-Identifier: MIT
// Stack capture with libunwind's unw_backtrace (DWARF CFI: works on binaries without frame
// pointers, such as Rust release builds). Hot path: no locks of ours, no allocation of ours.
#include "unwind.h"

#include "format/hpt_format.h"

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <link.h>
#include <stddef.h>

static uintptr_t self_lo, self_hi;

static int find_self(struct dl_phdr_info *info, size_t size, void *data) {
    (void)size;
    uintptr_t probe = (uintptr_t)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr, hi = lo + ph->p_memsz;
        if (probe >= lo && probe < hi) {
            // the whole object, not just this segment: inlined helpers sit in .text anyway
            uintptr_t olo = UINTPTR_MAX, ohi = 0;
            for (int j = 0; j < info->dlpi_phnum; j++) {
                const ElfW(Phdr) *q = &info->dlpi_phdr[j];
                if (q->p_type != PT_LOAD)
                    continue;
                if (info->dlpi_addr + q->p_vaddr < olo)
                    olo = info->dlpi_addr + q->p_vaddr;
                if (info->dlpi_addr + q->p_vaddr + q->p_memsz > ohi)
                    ohi = info->dlpi_addr + q->p_vaddr + q->p_memsz;
            }
            self_lo = olo;
            self_hi = ohi;
            return 1;
        }
    }
    return 0;
}

void hp_unwind_init(void) {
    dl_iterate_phdr(find_self, (void *)(uintptr_t)&hp_unwind);
}

uint32_t hp_unwind(uint64_t *out, uint32_t max) {
    void *ips[HPT_MAX_FRAMES + 16];
    int n = unw_backtrace(ips, (int)(max + 16 < HPT_MAX_FRAMES + 16 ? max + 16 : HPT_MAX_FRAMES + 16));
    int i = 0;
    while (i < n && (uintptr_t)ips[i] >= self_lo && (uintptr_t)ips[i] < self_hi)
        i++;
    uint32_t k = 0;
    for (; i < n && k < max; i++)
        out[k++] = (uint64_t)(uintptr_t)ips[i];
    return k;
}
