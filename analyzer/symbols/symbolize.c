// SPDX-License-Identifier: MIT
// Symbolization with libdwfl. Each module of the trace is reported with dwfl_report_elf at its
// load bias; debug info comes from the file itself or from a separate debug file found by build
// id or debuglink (dwfl_standard_find_debuginfo). Inline chains come from our own walk of the
// DIE tree, not dwarf_getscopes, which finds no scopes in rustc 1.95's output (rustc nests
// subprograms in namespace DIEs): the first lookup in a compilation unit indexes its
// subprograms' address ranges, later ones binary-search that index and descend only into the
// one subprogram. Strings are interned in an arena that lives as long as the symbolizer.
#include "symbols/symbolize.h"

#include "core/arena.h"
#include "core/hmap.h"
#include "core/sort.h"
#include "core/xalloc.h"
#include "symbols/demangle.h"
#include "symbols/forwarder.h"
#include "symbols/funcbounds.h"
#include "symbols/perfmap.h"
#include "symbols/symindex.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_INLINE_DEPTH 64

typedef struct module {
    const reader_module_t *rm;
    Dwfl_Module *dm; // NULL: not reported, or not to be used (status says why)
    symbolize_module_t *pub;
    bool dwarf_checked;
    bool bounds_read;     // bounds holds the module's .eh_frame (read on first need)
    funcbounds_t bounds;  // for symbolize_forwards_to_allocator
    bool syms_read;       // syms holds the module's symbol table (read on first need)
    symindex_t syms;
    hmap_t gap_names;     // symindex's gap key -> libdwfl's name there (NULL: none)
} module_t;

typedef struct sub_range {
    Dwarf_Addr lo, hi; // [lo, hi) in the module's DWARF addresses
    Dwarf_Die die;
} sub_range_t;

typedef struct cu_index {
    sub_range_t *r;
    size_t n;
} cu_index_t;

typedef struct chain {
    module_t *m;  // the module that holds pc, NULL if none
    bool dwarf;   // a CU of m's DWARF covers pc
    bool counted; // asked for through symbolize_addr: what the per-module figures count
    size_t n;
    symbolize_frame_t f[];
} chain_t;

struct symbolize {
    Dwfl *dwfl;
    char *debuginfo_path;
    Dwfl_Callbacks cb;
    module_t *mods;
    symbolize_module_t *pub; // parallel to mods
    size_t n_mods;
    const reader_module_t *rm_base; // the reader's module array it was made from
    hmap_t cache;   // pc -> chain_t *
    hmap_t cus;     // address of a CU's DIE data -> cu_index_t *
    hmap_t strings; // FNV-1a hash -> interned string (first one with that hash)
    hmap_t forwarders; // return address -> 1 + whether its function only forwards (forwarder.h)
    hmap_t starts;     // return address -> its function's start (symbolize_function_start), 0: none
    perfmap_t *jit;    // names of code outside every module (perfmap.h), NULL: none
    size_t n_outside, n_jit_named; // distinct addresses asked for outside every module, named
    arena_t arena;
    size_t n_addresses;
};

// ---- strings ----

static const char *intern_n(symbolize_t *s, const char *str, size_t n) {
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (uint8_t)str[i]) * 0x100000001b3ull;
    const char **slot = hmap_get(&s->strings, h);
    if (slot && strncmp(*slot, str, n) == 0 && (*slot)[n] == '\0')
        return *slot;
    char *p = arena_strndup(&s->arena, str, n);
    if (!slot) // on a hash collision the newcomer simply stays un-interned
        *(const char **)hmap_put(&s->strings, h, NULL) = p;
    return p;
}

static const char *intern(symbolize_t *s, const char *str) {
    return str ? intern_n(s, str, strlen(str)) : NULL;
}

static const char *intern_demangled(symbolize_t *s, const char *sym) {
    char *d = demangle_name(sym, NULL);
    const char *r = intern(s, d);
    free(d);
    return r;
}

// ---- modules ----

static bool is_pseudo_module(const char *path) {
    // the vDSO has no file; "[...]" names are the kernel's pseudo-mappings
    return !path || !path[0] || path[0] == '[' || strncmp(path, "linux-vdso", 10) == 0 ||
           strncmp(path, "linux-gate", 10) == 0;
}

static void report_modules(symbolize_t *s) {
    dwfl_report_begin(s->dwfl);
    for (size_t i = 0; i < s->n_mods; i++) {
        module_t *m = &s->mods[i];
        if (is_pseudo_module(m->rm->path)) {
            m->pub->status = SYMBOLIZE_MODULE_MISSING;
            continue;
        }
        // add_p_vaddr: the bias is added to the segments' addresses, as the loader did
        m->dm = dwfl_report_elf(s->dwfl, m->rm->path, m->rm->path, -1, m->rm->base, true);
        if (!m->dm)
            m->pub->status = SYMBOLIZE_MODULE_MISSING; // missing file, or overlaps one reported
    }
    dwfl_report_end(s->dwfl, NULL, NULL);
    for (size_t i = 0; i < s->n_mods; i++) {
        module_t *m = &s->mods[i];
        if (!m->dm || m->rm->build_id_len == 0)
            continue;
        const unsigned char *bits;
        GElf_Addr vaddr;
        int len = dwfl_module_build_id(m->dm, &bits, &vaddr);
        if (len > 0 && ((uint32_t)len != m->rm->build_id_len ||
                        memcmp(bits, m->rm->build_id, (size_t)len) != 0)) {
            // symbols of a different build would name the wrong functions
            m->dm = NULL;
            m->pub->status = SYMBOLIZE_MODULE_CHANGED;
        }
    }
}

symbolize_t *symbolize_new(const reader_t *r) {
    symbolize_t *s = xcalloc(1, sizeof *s);
    hmap_init(&s->cache, sizeof(chain_t *));
    hmap_init(&s->cus, sizeof(cu_index_t *));
    hmap_init(&s->strings, sizeof(const char *));
    hmap_init(&s->forwarders, 1);
    hmap_init(&s->starts, sizeof(uint64_t));
    s->cb.find_elf = dwfl_build_id_find_elf;
    s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
    s->cb.debuginfo_path = &s->debuginfo_path; // NULL: the default search path
    s->dwfl = dwfl_begin(&s->cb);
    size_t n = 0;
    const reader_module_t *rm = r ? reader_modules(r, &n) : NULL;
    s->rm_base = rm;
    s->mods = xcalloc(n, sizeof *s->mods);
    s->pub = xcalloc(n, sizeof *s->pub);
    s->n_mods = n;
    for (size_t i = 0; i < n; i++) {
        s->mods[i].rm = &rm[i];
        s->mods[i].pub = &s->pub[i];
        s->pub[i].path = rm[i].path;
    }
    if (s->dwfl)
        report_modules(s);
    const hpt_file_hdr_t *h = r ? reader_header(r) : NULL;
    char *map = h ? perfmap_path_for(reader_path(r), h->pid, h->start_unix_ns,
                                     h->flags & HPT_FILE_ATTACHED)
                  : NULL;
    if (map)
        s->jit = perfmap_load(map);
    free(map);
    return s;
}

void symbolize_free(symbolize_t *s) {
    if (!s)
        return;
    size_t it = 0;
    uint64_t key;
    chain_t **c;
    while ((c = hmap_next(&s->cache, &it, &key)))
        free(*c);
    cu_index_t **ci;
    it = 0;
    while ((ci = hmap_next(&s->cus, &it, &key))) {
        free((*ci)->r);
        free(*ci);
    }
    hmap_fini(&s->cache);
    hmap_fini(&s->cus);
    hmap_fini(&s->strings);
    hmap_fini(&s->forwarders);
    hmap_fini(&s->starts);
    perfmap_free(s->jit);
    arena_free(&s->arena);
    if (s->dwfl)
        dwfl_end(s->dwfl);
    for (size_t i = 0; i < s->n_mods; i++) {
        funcbounds_fini(&s->mods[i].bounds);
        symindex_fini(&s->mods[i].syms);
        if (s->mods[i].syms_read)
            hmap_fini(&s->mods[i].gap_names);
    }
    free(s->mods);
    free(s->pub);
    free(s);
}

// The module that held pc: the latest loaded one whose range contains it (an address range
// can be reused after a dlclose).
static module_t *module_of(symbolize_t *s, uint64_t pc) {
    for (size_t i = s->n_mods; i-- > 0;) {
        const reader_module_t *rm = s->mods[i].rm;
        if (pc >= rm->base && pc - rm->base < rm->size)
            return &s->mods[i];
    }
    return NULL;
}

// ---- DWARF ----

static const char *die_name(symbolize_t *s, Dwarf_Die *die) {
    Dwarf_Attribute a;
    // through DW_AT_abstract_origin and DW_AT_specification to the declaration
    const char *linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_linkage_name, &a));
    if (!linkage)
        linkage = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a));
    if (linkage)
        return intern_demangled(s, linkage);
    const char *name = dwarf_formstring(dwarf_attr_integrate(die, DW_AT_name, &a));
    return name ? intern_demangled(s, name) : NULL;
}

// The size of the type parameter named T (Rust) or _Tp (libstdc++) among die's children; 0 if
// there is none; -1 when there is one whose size is unknown.
static int64_t param_size(Dwarf_Die *die) {
    Dwarf_Die child;
    if (dwarf_child(die, &child) != 0)
        return 0;
    do {
        if (dwarf_tag(&child) != DW_TAG_template_type_parameter)
            continue;
        const char *n = dwarf_diename(&child);
        if (!n || (strcmp(n, "T") != 0 && strcmp(n, "_Tp") != 0))
            continue;
        Dwarf_Attribute a;
        Dwarf_Die type;
        Dwarf_Word size;
        if (!dwarf_formref_die(dwarf_attr(&child, DW_AT_type, &a), &type) ||
            dwarf_aggregate_size(&type, &size) != 0 || size == 0 || size > UINT32_MAX)
            return -1;
        return (int64_t)size;
    } while (dwarf_siblingof(&child, &child) == 0);
    return 0;
}

// The size of a generic function's element type: its template type parameter T (Rust: the
// function's own) or _Tp (libstdc++: the class's, the scope around the member's declaration),
// on the DIE or on the instance or declaration it is a copy of. What growth advice divides a
// container's bytes by (docs/growth.md#advice); 0 when there is none.
static uint32_t elem_size(Dwarf_Die *die) {
    Dwarf_Die d = *die;
    bool declared_in_class = false; // reached through DW_AT_specification: a member's declaration
    for (int hop = 0; hop < 4; hop++) {
        int64_t own = param_size(&d);
        if (own)
            return own > 0 ? (uint32_t)own : 0;
        Dwarf_Attribute a;
        Dwarf_Die next;
        if (dwarf_formref_die(dwarf_attr(&d, DW_AT_abstract_origin, &a), &next)) {
            d = next;
            continue;
        }
        if (dwarf_formref_die(dwarf_attr(&d, DW_AT_specification, &a), &next)) {
            d = next;
            declared_in_class = true;
            continue;
        }
        if (!declared_in_class)
            return 0; // a plain function: no class around it (and no walk of its unit)
        // a member function's declaration: the class around it holds the type parameters.
        // dwarf_getscopes_die walks the unit from its start: only for members, once per address
        Dwarf_Die *scopes = NULL;
        int n = dwarf_getscopes_die(&d, &scopes);
        int64_t cls = n > 1 ? param_size(&scopes[1]) : 0;
        free(scopes);
        return cls > 0 ? (uint32_t)cls : 0;
    }
    return 0;
}

static int cmp_range(const void *a, const void *b) {
    const sub_range_t *x = a, *y = b;
    return x->lo < y->lo ? -1 : x->lo > y->lo;
}

static void index_dies(Dwarf_Die *parent, sub_range_t **r, size_t *n, size_t *cap, int depth) {
    Dwarf_Die child;
    if (depth > 64 || dwarf_child(parent, &child) != 0)
        return;
    do {
        int tag = dwarf_tag(&child);
        if (tag == DW_TAG_subprogram) {
            Dwarf_Addr base, lo, hi;
            ptrdiff_t off = 0;
            while ((off = dwarf_ranges(&child, off, &base, &lo, &hi)) > 0) {
                if (hi <= lo)
                    continue;
                *r = xgrow(*r, cap, *n + 1, sizeof **r);
                (*r)[(*n)++] = (sub_range_t){lo, hi, child};
            }
        }
        // subprograms hide in namespaces, types (Rust impls, C++ classes) and other subprograms
        if (dwarf_haschildren(&child) && tag != DW_TAG_inlined_subroutine &&
            tag != DW_TAG_lexical_block && tag != DW_TAG_formal_parameter &&
            tag != DW_TAG_variable)
            index_dies(&child, r, n, cap, depth + 1);
    } while (dwarf_siblingof(&child, &child) == 0);
}

static cu_index_t *cu_index(symbolize_t *s, Dwarf_Die *cudie) {
    uint64_t key = (uint64_t)(uintptr_t)cudie->addr;
    bool existed;
    cu_index_t **slot = hmap_put(&s->cus, key, &existed);
    if (existed)
        return *slot;
    cu_index_t *ci = xcalloc(1, sizeof *ci);
    size_t cap = 0;
    index_dies(cudie, &ci->r, &ci->n, &cap, 0);
    if (ci->n)
        sort_items(ci->r, ci->n, sizeof *ci->r, cmp_range);
    *slot = ci;
    return ci;
}

// The innermost subprogram whose ranges contain addr, or NULL.
static Dwarf_Die *find_subprogram(cu_index_t *ci, Dwarf_Addr addr) {
    size_t lo = 0, hi = ci->n;
    while (lo < hi) { // first entry with r.lo > addr
        size_t mid = lo + (hi - lo) / 2;
        if (ci->r[mid].lo <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    Dwarf_Die *best = NULL;
    Dwarf_Addr best_size = 0;
    // ranges may nest (a nested function's code inside its parent's range): take the smallest
    for (size_t i = lo, seen = 0; i-- > 0 && seen < 16; seen++) {
        sub_range_t *r = &ci->r[i];
        if (addr < r->hi && (!best || r->hi - r->lo < best_size)) {
            best = &r->die;
            best_size = r->hi - r->lo;
        }
    }
    return best;
}

static bool has_pc_attrs(Dwarf_Die *die) {
    return dwarf_hasattr(die, DW_AT_low_pc) || dwarf_hasattr(die, DW_AT_ranges);
}

// Appends to chain the inlined_subroutine DIEs under die that contain addr, outermost first.
static size_t inline_chain(Dwarf_Die *die, Dwarf_Addr addr, Dwarf_Die *chain, size_t n) {
    Dwarf_Die child;
    if (n >= MAX_INLINE_DEPTH || dwarf_child(die, &child) != 0)
        return n;
    do {
        int tag = dwarf_tag(&child);
        if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_lexical_block &&
            tag != DW_TAG_try_block && tag != DW_TAG_catch_block)
            continue;
        if (has_pc_attrs(&child)) {
            if (dwarf_haspc(&child, addr) <= 0)
                continue;
            if (tag == DW_TAG_inlined_subroutine)
                chain[n++] = child;
            return inline_chain(&child, addr, chain, n);
        }
        // a block without addresses of its own may still hold inlined calls
        size_t deeper = inline_chain(&child, addr, chain, n);
        if (deeper > n)
            return deeper;
    } while (dwarf_siblingof(&child, &child) == 0);
    return n;
}

// Resolves "." and ".." in an absolute path, in place, without asking the file system (the
// file need not exist here: the program was built elsewhere).
static void normalize_path(char *path) {
    char *out = path, *p = path;
    while (*p) {
        while (*p == '/')
            p++;
        char *seg = p;
        while (*p && *p != '/')
            p++;
        size_t len = (size_t)(p - seg);
        if (len == 0 || (len == 1 && seg[0] == '.'))
            continue;
        if (len == 2 && seg[0] == '.' && seg[1] == '.') {
            while (out > path && *--out != '/')
                ; // drop the last segment kept (never above the root)
            continue;
        }
        *out++ = '/';
        memmove(out, seg, len);
        out += len;
    }
    if (out == path)
        *out++ = '/';
    *out = '\0';
}

// A source path as the compiler saw it may be relative to the unit's directory
// (DW_AT_comp_dir: Rust's "src/lib.rs", glibc's "../sysdeps/..."): made absolute, so two
// crates' src/lib.rs are two files. Interned.
static const char *source_path(symbolize_t *s, Dwarf_Die *cudie, const char *file) {
    if (!file || file[0] == '/' || !cudie)
        return intern(s, file);
    Dwarf_Attribute a;
    const char *dir = dwarf_formstring(dwarf_attr(cudie, DW_AT_comp_dir, &a));
    char buf[PATH_MAX];
    if (!dir || dir[0] != '/' || (size_t)snprintf(buf, sizeof buf, "%s/%s", dir, file) >= sizeof buf)
        return intern(s, file);
    normalize_path(buf);
    return intern(s, buf);
}

static const char *call_file(symbolize_t *s, Dwarf_Die *cudie, Dwarf_Die *inl, uint32_t *line) {
    Dwarf_Attribute a;
    Dwarf_Word w = 0;
    *line = 0;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_line, &a), &w) == 0)
        *line = (uint32_t)w;
    Dwarf_Files *files;
    size_t nfiles;
    if (dwarf_formudata(dwarf_attr(inl, DW_AT_call_file, &a), &w) != 0 ||
        dwarf_getsrcfiles(cudie, &files, &nfiles) != 0 || w >= nfiles)
        return NULL;
    return source_path(s, cudie, dwarf_filesrc(files, w, NULL, NULL));
}

// ---- lookup ----

static chain_t *new_chain(size_t n) {
    chain_t *c = xcalloc(1, sizeof *c + n * sizeof c->f[0]);
    c->n = n;
    return c;
}

// The symbol-table symbol holding at (the Dwfl's addresses): its name and [lo, hi), from the
// module's sorted index where it can tell (symindex.h), else from libdwfl's scan of the whole
// table. hi == lo: a sizeless symbol. NULL: none.
static const char *symbol_at(module_t *m, uint64_t at, uint64_t *lo, uint64_t *hi) {
    if (!m->syms_read) {
        m->syms_read = true;
        symindex_build(&m->syms, m->dm);
        hmap_init(&m->gap_names, sizeof(const char *));
    }
    const char *name = NULL;
    uint64_t gap;
    symindex_answer_t k = symindex_find(&m->syms, at, &name, lo, hi, &gap);
    if (k != SYMINDEX_ASK)
        return name;
    // in a gap between symbols libdwfl can only name a sizeless label below it: one answer
    // for every address there (symindex_find). Only its name is kept: a sizeless symbol's
    // bounds are given as empty at `at`, which no caller takes for a function's
    const char **known = gap != UINT64_MAX ? hmap_get(&m->gap_names, gap) : NULL;
    if (known) {
        *lo = *hi = at;
        return *known;
    }
    GElf_Off off;
    GElf_Sym sym;
    name = dwfl_module_addrinfo(m->dm, at, &off, &sym, NULL, NULL, NULL);
    if (name) {
        *lo = at - off;
        *hi = *lo + sym.st_size;
    }
    if (gap != UINT64_MAX)
        *(const char **)hmap_put(&m->gap_names, gap, NULL) = name;
    return name;
}

static chain_t *lookup(symbolize_t *s, uint64_t pc) {
    module_t *m = module_of(s, pc);
    symbolize_frame_t base = {.pc = pc};
    if (m) {
        base.module = m->rm->path;
        base.module_offset = pc - m->rm->base;
    }
    if (!m || !m->dm || pc == 0) {
        chain_t *c = new_chain(1);
        c->m = m;
        c->f[0] = base;
        // code in no module: a JIT's, named by its perf map (the call ends before pc)
        if (!m && pc && s->jit) {
            const char *name = perfmap_find(s->jit, pc - 1);
            if (name)
                c->f[0].function = intern(s, name);
        }
        return c;
    }
    // a return address points after the call; the call itself is the byte before
    Dwarf_Addr at = pc - 1;

    Dwarf_Addr bias = 0;
    Dwarf_Die *cudie = dwfl_module_addrdie(m->dm, at, &bias);
    Dwarf_Die chain[MAX_INLINE_DEPTH + 1];
    size_t depth = 0; // chain[0] the subprogram, then inlined calls, outermost first
    Dwarf_Die cu_copy;
    if (cudie) {
        cu_copy = *cudie;
        cudie = &cu_copy;
        Dwarf_Die *sub = find_subprogram(cu_index(s, cudie), at - bias);
        if (sub) {
            chain[0] = *sub;
            depth = inline_chain(sub, at - bias, chain, 1);
        }
    }

    // without a CU covering the address (startup code, hand-written assembly) the line table's
    // nearest row belongs to some other function: no line then
    Dwfl_Line *ln = cudie ? dwfl_module_getsrc(m->dm, at) : NULL;
    int lineno = 0;
    const char *file = ln ? dwfl_lineinfo(ln, NULL, &lineno, NULL, NULL, NULL) : NULL;

    size_t n = depth ? depth : 1;
    chain_t *c = new_chain(n);
    c->m = m;
    c->dwarf = cudie != NULL;
    for (size_t k = 0; k < n; k++)
        c->f[k] = base;
    // innermost frame: the line table's location
    c->f[0].file = source_path(s, cudie, file);
    c->f[0].line = lineno > 0 ? (uint32_t)lineno : 0;
    // frame k (innermost first) is chain[depth-1-k]; its caller's location is the call site
    // recorded on the inlined DIE
    for (size_t k = 0; k < n; k++) {
        size_t d = n - 1 - k;
        if (depth) {
            c->f[k].function = die_name(s, &chain[d]);
            c->f[k].elem_size = elem_size(&chain[d]);
        }
        c->f[k].inlined = k + 1 < n;
        if (k + 1 < n)
            c->f[k + 1].file = call_file(s, cudie, &chain[d], &c->f[k + 1].line);
    }
    // the outermost (real) function: the DIE's name, else the symbol table's (symbol_at)
    if (!c->f[n - 1].function) {
        uint64_t lo, hi;
        const char *sym_name = symbol_at(m, at, &lo, &hi);
        if (sym_name)
            c->f[n - 1].function = intern_demangled(s, sym_name);
    }
    return c;
}

static chain_t *cached(symbolize_t *s, uint64_t pc) {
    chain_t **slot = hmap_get(&s->cache, pc);
    if (slot)
        return *slot;
    chain_t *c = lookup(s, pc);
    *(chain_t **)hmap_put(&s->cache, pc, NULL) = c;
    return c;
}

const symbolize_frame_t *symbolize_addr(symbolize_t *s, uint64_t pc, size_t *n) {
    chain_t *c = cached(s, pc);
    if (!c->counted) {
        // the first time it is asked for, whether or not symbolize_warm looked it up before
        c->counted = true;
        s->n_addresses++;
        module_t *m = c->m;
        if (!m && pc) {
            s->n_outside++;
            s->n_jit_named += c->f[0].function != NULL;
        }
        if (m) {
            m->pub->n_addresses++;
            if (m->pub->status == SYMBOLIZE_MODULE_UNUSED)
                m->pub->status = SYMBOLIZE_MODULE_NO_DEBUG;
            if (c->dwarf && !m->dwarf_checked) {
                m->dwarf_checked = true;
                m->pub->status = SYMBOLIZE_MODULE_OK;
            }
        }
    }
    *n = c->n;
    return c->f;
}

void symbolize_warm(symbolize_t *s, uint64_t pc) { cached(s, pc); }

bool symbolize_current(const symbolize_t *s, const reader_t *r) {
    size_t n = 0;
    const reader_module_t *rm = reader_modules(r, &n);
    return s->n_mods == n && (n == 0 || s->rm_base == rm);
}

const symbolize_module_t *symbolize_modules(const symbolize_t *s, size_t *n) {
    *n = s->n_mods;
    return s->pub;
}

size_t symbolize_n_addresses(const symbolize_t *s) { return s->n_addresses; }

const char *symbolize_jit(const symbolize_t *s, size_t *n_outside, size_t *n_named) {
    *n_outside = s->n_outside;
    *n_named = s->n_jit_named;
    return perfmap_path(s->jit);
}

const char *symbolize_short_path(const char *path, int n_components) {
    if (!path)
        return NULL;
    const char *p = path + strlen(path);
    int seen = 0;
    while (p > path) {
        if (p[-1] == '/' && ++seen == n_components)
            return p;
        p--;
    }
    return path;
}

// ---- allocator wrappers ----

// One module's code for forwarder_check, in the ELF file's addresses: its executable sections
// (present in a stripped file too) and its functions' bounds from .eh_frame, which stripping
// keeps, else from the symbol table.
typedef struct module_code {
    module_t *m;
    Elf *elf;
    GElf_Addr bias; // the ELF file's addresses + bias = the process's
    uint64_t sec_lo, sec_hi; // the last section found
    const uint8_t *sec_bytes;
} module_code_t;

static const uint8_t *code_bytes(void *ctx, uint64_t addr, size_t *avail) {
    module_code_t *mc = ctx;
    if (!(addr >= mc->sec_lo && addr < mc->sec_hi)) {
        mc->sec_bytes = NULL;
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(mc->elf, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
                !(sh.sh_flags & SHF_EXECINSTR) || addr < sh.sh_addr ||
                addr - sh.sh_addr >= sh.sh_size)
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            if (!d || !d->d_buf || d->d_size < sh.sh_size)
                return NULL;
            mc->sec_lo = sh.sh_addr;
            mc->sec_hi = sh.sh_addr + sh.sh_size;
            mc->sec_bytes = d->d_buf;
            break;
        }
        if (!mc->sec_bytes)
            return NULL;
    }
    *avail = (size_t)(mc->sec_hi - addr);
    return mc->sec_bytes + (addr - mc->sec_lo);
}

static bool code_bounds(void *ctx, uint64_t addr, uint64_t *lo, uint64_t *hi) {
    module_code_t *mc = ctx;
    if (!mc->m->bounds_read) {
        mc->m->bounds_read = true;
        funcbounds_init(&mc->m->bounds, mc->elf);
    }
    if (funcbounds_find(&mc->m->bounds, addr, lo, hi))
        return true;
    // no .eh_frame entry (hand-written assembly, -fno-asynchronous-unwind-tables): the symbol
    uint64_t slo, shi;
    if (!symbol_at(mc->m, addr + mc->bias, &slo, &shi) || shi <= addr + mc->bias)
        return false;
    *lo = slo - mc->bias;
    *hi = shi - mc->bias;
    return true;
}

// Bits of a forwarders entry: the strict rule's verdict is known / yes, the loose rule's.
enum { FWD_STRICT_KNOWN = 1, FWD_STRICT = 2, FWD_LOOSE_KNOWN = 4, FWD_LOOSE = 8 };

// mc for the module holding pc, with its ELF file; false when there is none to read.
static bool module_code(symbolize_t *s, uint64_t pc, module_code_t *mc) {
    *mc = (module_code_t){.m = module_of(s, pc)};
    return mc->m && mc->m->dm && (mc->elf = dwfl_module_getelf(mc->m->dm, &mc->bias)) &&
           pc > mc->bias;
}

bool symbolize_forwards_to_allocator(symbolize_t *s, uint64_t pc, bool loose) {
    uint8_t known_bit = loose ? FWD_LOOSE_KNOWN : FWD_STRICT_KNOWN;
    uint8_t yes_bit = loose ? FWD_LOOSE : FWD_STRICT;
    const uint8_t *known = hmap_get(&s->forwarders, pc);
    if (known && (*known & known_bit))
        return *known & yes_bit;
    uint8_t v = known ? *known : 0;
    module_code_t mc;
    if (module_code(s, pc, &mc)) {
        forwarder_code_t code = {.bytes = code_bytes, .bounds = code_bounds, .ctx = &mc};
        if (forwarder_check(&code, pc - mc.bias, loose))
            v |= yes_bit;
    }
    *(uint8_t *)hmap_put(&s->forwarders, pc, NULL) = v | known_bit;
    return v & yes_bit;
}

// Asked once per return address: sites.c asks it for every frame of every site's stack (the
// wrapper rule's caller counts), and a function without an .eh_frame entry costs a search of
// its module's whole symbol table (dwfl_module_addrinfo): clang++'s trace of 16 K stacks took
// over 12 minutes in `heapprof dhat` before this cache.
uint64_t symbolize_function_start(symbolize_t *s, uint64_t pc) {
    if (pc == 0)
        return 0;
    const uint64_t *known = hmap_get(&s->starts, pc);
    if (known)
        return *known;
    module_code_t mc;
    uint64_t lo, hi, start = 0;
    if (module_code(s, pc, &mc) && code_bounds(&mc, pc - 1 - mc.bias, &lo, &hi))
        start = lo + mc.bias;
    *(uint64_t *)hmap_put(&s->starts, pc, NULL) = start;
    return start;
}
