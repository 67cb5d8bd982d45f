// SPDX-License-Identifier: MIT
// See cfi_search.h. Asked once per module the unwinder opens.
#include "cfi_search.h"

#include <string.h>

static bool has_eh_frame_phdr(Elf *elf) {
    size_t n;
    if (elf_getphdrnum(elf, &n) != 0)
        return false;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(elf, (int)i, &ph) && ph.p_type == PT_GNU_EH_FRAME)
            return true;
    }
    return false;
}

bool hp_cfi_search_table_first(Elf *elf) {
    size_t shstrndx;
    if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0 || !has_eh_frame_phdr(elf))
        return false;
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS)
            continue;
        const char *name = elf_strptr(elf, shstrndx, sh.sh_name);
        if (!name)
            continue;
        if (!strcmp(name, ".eh_frame_hdr"))
            return false; // met first: libdw uses its table
        if (!strcmp(name, ".eh_frame")) {
            sh.sh_name = 0; // the empty string that starts every string table
            return gelf_update_shdr(scn, &sh) != 0;
        }
    }
    return false;
}
