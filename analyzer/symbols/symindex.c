// SPDX-License-Identifier: MIT
#include "symbols/symindex.h"

#include "core/xalloc.h"

#include <gelf.h>
#include <stdlib.h>
#include <string.h>

struct symindex_entry {
    uint64_t lo, hi; // hi == lo: a sizeless symbol (a label)
    const char *name;
    uint32_t index;  // in the symbol table: among aliases libdwfl keeps the first it meets
    uint8_t bind;    // STB_*
};

// A walk down from the address gives up past this many symbols (a symbol that spans much of
// the module below it keeps sized_end high): libdwfl answers those.
#define WALK_MAX 256u

static int by_start(const void *a, const void *b) {
    const struct symindex_entry *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

// Of two symbols with the same bounds, the one libdwfl names, or NULL where its versions differ.
// Every version meets a table's symbols in order and replaces its pick only by one that binds
// more strongly: a global or weak symbol over a local one, the first of equals (newer libdwfl
// searches the global and weak ones first, then the locals only if none held the address: the
// same pick). Global against weak differs (the old order ranked weak above global,
// the newer ranks global first), and other bindings are ranked differently too.
static const struct symindex_entry *alias_pick(const struct symindex_entry *a,
                                               const struct symindex_entry *b) {
    if (a->bind > STB_WEAK || b->bind > STB_WEAK)
        return NULL;
    bool a_local = a->bind == STB_LOCAL, b_local = b->bind == STB_LOCAL;
    if (a_local != b_local)
        return a_local ? b : a;
    if (a->bind != b->bind)
        return NULL; // global and weak
    return a->index < b->index ? a : b;
}

static int by_first_word(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

// The module's allocated sections, in the Dwfl's addresses, sorted.
static void read_sections(symindex_t *ix, Dwfl_Module *dm) {
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(dm, &bias);
    Elf_Scn *scn = NULL;
    size_t cap = 0;
    while (elf && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_ALLOC) || sh.sh_size == 0)
            continue;
        ix->sec = xgrow(ix->sec, &cap, 2 * (ix->n_sec + 1), sizeof *ix->sec);
        ix->sec[2 * ix->n_sec] = sh.sh_addr + bias;
        ix->sec[2 * ix->n_sec + 1] = sh.sh_addr + bias + sh.sh_size;
        ix->n_sec++;
    }
    qsort(ix->sec, ix->n_sec, 2 * sizeof *ix->sec, by_first_word);
}

// The index + 1 of the section holding addr, 0: none.
static uint64_t section_of(const symindex_t *ix, uint64_t addr) {
    size_t a = 0, b = ix->n_sec;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (ix->sec[2 * mid] <= addr)
            a = mid + 1;
        else
            b = mid;
    }
    return a && addr < ix->sec[2 * (a - 1) + 1] ? a : 0;
}

void symindex_build(symindex_t *ix, Dwfl_Module *dm) {
    memset(ix, 0, sizeof *ix);
    if (dm)
        read_sections(ix, dm);
    int n = dm ? dwfl_module_getsymtab(dm) : -1;
    if (n <= 1)
        return;
    ix->e = xmalloc((size_t)n * sizeof *ix->e);
    for (int i = 1; i < n; i++) { // entry 0 is the null symbol
        GElf_Sym sym;
        GElf_Addr addr;
        GElf_Word shndx;
        const char *name = dwfl_module_getsym_info(dm, i, &sym, &addr, &shndx, NULL, NULL);
        // what libdwfl never picks: unnamed, undefined, section, file and TLS symbols
        if (!name || !name[0] || shndx == SHN_UNDEF || GELF_ST_TYPE(sym.st_info) == STT_SECTION ||
            GELF_ST_TYPE(sym.st_info) == STT_FILE || GELF_ST_TYPE(sym.st_info) == STT_TLS)
            continue;
        ix->e[ix->n++] = (struct symindex_entry){addr, addr + sym.st_size, name, (uint32_t)i,
                                                 (uint8_t)GELF_ST_BIND(sym.st_info)};
    }
    qsort(ix->e, ix->n, sizeof *ix->e, by_start);
    size_t n_prefix = ix->n ? ix->n : 1;
    ix->sized_end = xmalloc(n_prefix * sizeof *ix->sized_end);
    ix->label = xmalloc(n_prefix * sizeof *ix->label);
    uint64_t end = 0, label = 0;
    for (size_t i = 0; i < ix->n; i++) {
        if (ix->e[i].hi == ix->e[i].lo)
            label = ix->e[i].lo + 1; // sorted: the highest so far
        else if (ix->e[i].hi > end)
            end = ix->e[i].hi;
        ix->sized_end[i] = end;
        ix->label[i] = label;
    }
}

void symindex_fini(symindex_t *ix) {
    free(ix->e);
    free(ix->sized_end);
    free(ix->label);
    free(ix->sec);
    memset(ix, 0, sizeof *ix);
}

symindex_answer_t symindex_find(const symindex_t *ix, uint64_t addr, const char **name,
                                uint64_t *lo, uint64_t *hi, uint64_t *gap) {
    *gap = UINT64_MAX;
    // the first entry starting above addr
    size_t a = 0, b = ix->n;
    while (a < b) {
        size_t mid = a + (b - a) / 2;
        if (ix->e[mid].lo <= addr)
            a = mid + 1;
        else
            b = mid;
    }
    if (a == 0)
        return SYMINDEX_NONE; // nothing starts at or below addr
    const struct symindex_entry *found = NULL;
    unsigned steps = 0;
    for (size_t j = a; j-- > 0;) {
        const struct symindex_entry *x = &ix->e[j];
        // below here no sized symbol holds addr, and nothing starts at the one found
        if (ix->sized_end[j] <= addr && (!found || x->lo < found->lo))
            break;
        if (++steps > WALK_MAX)
            return SYMINDEX_ASK;
        if (x->hi != x->lo && addr < x->hi) {
            if (!found)
                found = x;
            else if (x->lo != found->lo || x->hi != found->hi || !(found = alias_pick(found, x)))
                return SYMINDEX_ASK; // nested symbols, or aliases libdwfl's versions rank apart
        }
    }
    uint64_t label = ix->label[a - 1]; // 1 + the highest label at or below addr, 0: none
    if (found) {
        if (label && label - 1 >= found->lo)
            return SYMINDEX_ASK; // a label between the symbol's start and addr
        *name = found->name;
        *lo = found->lo;
        *hi = found->hi;
        return SYMINDEX_FOUND;
    }
    // no sized symbol holds addr: a label counts where it is at addr (the old rule) or at or
    // above the end of every sized symbol below addr (libdwfl's since)
    if (label && (label - 1 == addr || label - 1 >= ix->sized_end[a - 1])) {
        // libdwfl compares addr only with symbols' starts and ends, all at or below the start
        // of e[a - 1], and asks for addr's section: one answer for the whole gap
        uint64_t sec = section_of(ix, addr);
        if (addr > ix->e[a - 1].lo && sec && sec < (1u << 16))
            *gap = (uint64_t)(a - 1) << 16 | sec;
        return SYMINDEX_ASK;
    }
    return SYMINDEX_NONE;
}
