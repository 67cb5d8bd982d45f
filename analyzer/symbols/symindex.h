// SPDX-License-Identifier: MIT
// symindex_t: one module's symbol table, as libdwfl lists it (dwfl_module_getsym_info), sorted
// by address, for the question libdwfl answers with a scan of the whole table at every call:
// which symbol holds an address (dwfl_module_addrinfo; LLVM's stripped libraries have ~100 K
// dynamic symbols, and a trace asks for tens of thousands of addresses). It answers only where
// every rule libdwfl has had picks the same symbol: one named symbol with a size holds the
// address, or several with the same bounds that every version ranks alike (aliases: C++'s
// complete and base constructors), and no sizeless label lies between their start and the
// address. Anything else (nested symbols, global against weak aliases, assembly labels, a huge
// symbol far below) is left to libdwfl, so the names are libdwfl's either way
// (tests/unit/test_symindex.c compares them address by address).
#ifndef HEAPPROF_ANALYZER_SYMINDEX_H
#define HEAPPROF_ANALYZER_SYMINDEX_H

#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct symindex {
    struct symindex_entry *e; // sorted by start
    uint64_t *sized_end;      // sized_end[i]: the largest end of the sized symbols of e[0..i]
    uint64_t *label;          // label[i]: 1 + the highest start of a sizeless one there, 0: none
    size_t n;
    uint64_t *sec;            // the module's allocated sections: [sec[2k], sec[2k + 1]), sorted
    size_t n_sec;
} symindex_t;

// Reads dm's symbol table (empty when it has none). May allocate; exits on OOM like xmalloc.
void symindex_build(symindex_t *ix, Dwfl_Module *dm);
void symindex_fini(symindex_t *ix);

typedef enum symindex_answer {
    SYMINDEX_FOUND, // *name, *lo, *hi: the symbol libdwfl picks
    SYMINDEX_NONE,  // libdwfl names no symbol there
    SYMINDEX_ASK,   // ask libdwfl
} symindex_answer_t;

// What libdwfl's dwfl_module_addrinfo says of addr (an address in the Dwfl's space): the
// symbol's name (libdwfl's string, valid while the Dwfl lives) and [lo, hi). Without a sized
// symbol holding addr, libdwfl falls back to a sizeless label below it, by rules that changed
// between versions (the older one a label at exactly addr, the newer the highest one above
// every symbol's end below addr): NONE only where neither rule finds one.
// *gap: where the answer is ASK because no sized symbol holds addr, a key that every address
// with the same answer shares (strictly between the same two symbols, in the same section): the
// caller may keep libdwfl's answer under it; else UINT64_MAX.
symindex_answer_t symindex_find(const symindex_t *ix, uint64_t addr, const char **name,
                                uint64_t *lo, uint64_t *hi, uint64_t *gap);

#endif
