// SPDX-License-Identifier: MIT
// Makes libdw find FDEs through a module's .eh_frame_hdr search table where the section order
// would keep it from doing so (BOLT-ed libraries: rustc's libLLVM and librustc_driver).
#ifndef HEAPPROF_PRELOAD_CFI_SEARCH_H
#define HEAPPROF_PRELOAD_CFI_SEARCH_H

#include <gelf.h>
#include <stdbool.h>

// libdw (0.188) takes a file's CFI from the first section named .eh_frame and its search table
// from a .eh_frame_hdr met before it; where .eh_frame comes first it has no table and parses
// .eh_frame from the start to find each address's FDE: 8-40 ms for one address of a 7 MB
// .eh_frame, under the unwinder's lock. Without a section of that name it reads both through
// the program headers (PT_GNU_EH_FRAME), table included. So where the file has that program
// header and its .eh_frame comes before any .eh_frame_hdr, this renames .eh_frame to "" in elf,
// which must have been opened ELF_C_READ_MMAP_PRIVATE (the change stays in this process's copy
// of the section headers). Returns whether it renamed. Before dwarf_getcfi_elf. Cold.
bool hp_cfi_search_table_first(Elf *elf);

#endif
