// SPDX-License-Identifier: MIT
// symindex against libdwfl itself: on real modules (libc, libstdc++, this executable), at the
// edges of every symbol and at addresses all over their code, every answer symindex gives is
// dwfl_module_addrinfo's, and every address of one gap gets one answer from libdwfl.
#include "core/hmap.h"
#include "symbols/symindex.h"

#include <criterion/criterion.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char *debuginfo_path;
static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

typedef struct counts {
    size_t found, none, ask, gaps_checked;
} counts_t;

static void check_addr(Dwfl_Module *dm, const symindex_t *ix, uint64_t addr, hmap_t *gaps,
                       counts_t *c) {
    const char *name = NULL;
    uint64_t lo, hi, gap;
    symindex_answer_t k = symindex_find(ix, addr, &name, &lo, &hi, &gap);
    GElf_Off off;
    GElf_Sym sym;
    const char *want = dwfl_module_addrinfo(dm, addr, &off, &sym, NULL, NULL, NULL);
    if (k == SYMINDEX_FOUND) {
        c->found++;
        cr_assert_not_null(want, "%#lx: symindex %s, libdwfl none", (unsigned long)addr, name);
        cr_assert_str_eq(name, want, "%#lx", (unsigned long)addr);
        cr_assert_eq(lo, addr - off, "%#lx %s", (unsigned long)addr, name);
        cr_assert_eq(hi, addr - off + sym.st_size, "%#lx %s", (unsigned long)addr, name);
    } else if (k == SYMINDEX_NONE) {
        c->none++;
        cr_assert_null(want, "%#lx: symindex none, libdwfl %s", (unsigned long)addr, want);
    } else {
        c->ask++;
        if (gap != UINT64_MAX) {
            bool seen;
            const char **slot = hmap_put(gaps, gap, &seen);
            if (seen) {
                cr_assert((*slot == NULL) == (want == NULL) && (!want || !strcmp(*slot, want)),
                          "%#lx: one gap, two answers", (unsigned long)addr);
                c->gaps_checked++;
            } else {
                *slot = want;
            }
            cr_assert(!want || sym.st_size == 0, "%#lx: a sized symbol in a gap", (unsigned long)addr);
        }
    }
}

// The edges of every `every`-th symbol, and every `step`-th byte of the module's executable
// sections (libdwfl's own answer scans the whole table: the big modules are sampled).
static counts_t check_module(Dwfl_Module *dm, unsigned every, unsigned step) {
    symindex_t ix;
    symindex_build(&ix, dm);
    hmap_t gaps;
    hmap_init(&gaps, sizeof(const char *));
    counts_t c = {0};
    int n = dwfl_module_getsymtab(dm);
    for (int i = 1; i < n; i += (int)every) {
        GElf_Sym sym;
        GElf_Addr a;
        if (!dwfl_module_getsym_info(dm, i, &sym, &a, NULL, NULL, NULL) || a == 0)
            continue;
        const uint64_t at[] = {a - 1, a, a + 1, a + sym.st_size / 2, a + sym.st_size - 1,
                               a + sym.st_size, a + sym.st_size + 1};
        for (size_t k = 0; k < sizeof at / sizeof *at; k++)
            check_addr(dm, &ix, at[k], &gaps, &c);
    }
    GElf_Addr bias;
    Elf *elf = dwfl_module_getelf(dm, &bias);
    Elf_Scn *scn = NULL;
    while (elf && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR))
            continue;
        for (uint64_t x = sh.sh_addr; x < sh.sh_addr + sh.sh_size; x += step)
            check_addr(dm, &ix, x + bias, &gaps, &c);
    }
    hmap_fini(&gaps);
    symindex_fini(&ix);
    return c;
}

static Dwfl_Module *report(Dwfl *dwfl, const char *path) {
    Dwfl_Module *dm = dwfl_report_offline(dwfl, path, path, -1);
    cr_assert_not_null(dm, "%s: %s", path, dwfl_errmsg(-1));
    return dm;
}

static void check_path(const char *path, unsigned every, unsigned step) {
    Dwfl *dwfl = dwfl_begin(&callbacks);
    cr_assert_not_null(dwfl);
    Dwfl_Module *dm = report(dwfl, path);
    cr_assert_eq(dwfl_report_end(dwfl, NULL, NULL), 0);
    counts_t c = check_module(dm, every, step);
    // most addresses answered without libdwfl's scan (libc's aliases leave it a third)
    cr_expect_gt(c.found + c.none, c.ask, "%s: found %zu none %zu ask %zu", path, c.found, c.none,
                 c.ask);
    cr_expect_gt(c.found, 100, "%s", path);
    dwfl_end(dwfl);
}

Test(symindex, libdwfls_answers_on_libc) {
    check_path("/lib/x86_64-linux-gnu/libc.so.6", 7, 1009);
}

Test(symindex, libdwfls_answers_on_libstdcxx) {
    check_path("/lib/x86_64-linux-gnu/libstdc++.so.6", 5, 1009);
}

Test(symindex, libdwfls_answers_on_this_executable) {
    check_path("/proc/self/exe", 1, 7);
}

// LLVM's own library, linked with lld and stripped to its dynamic symbols, where the lookups
// that made symindex worth having were (where it is installed: clang's dependency).
Test(symindex, libdwfls_answers_on_libllvm) {
    const char *path = "/lib/x86_64-linux-gnu/libLLVM-14.so.1";
    if (access(path, R_OK) != 0)
        cr_skip_test("%s is not installed", path);
    check_path(path, 401, 300007);
}

Test(symindex, an_empty_index_answers_none) {
    symindex_t ix;
    symindex_build(&ix, NULL);
    const char *name;
    uint64_t lo, hi, gap;
    cr_expect_eq(symindex_find(&ix, 0x1000, &name, &lo, &hi, &gap), SYMINDEX_NONE);
    symindex_fini(&ix);
}
