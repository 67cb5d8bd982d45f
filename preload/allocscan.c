// SPDX-License-Identifier: MIT
// Finds the allocators the dynamic linker will not route through the shim, hooks them, and
// keeps what it found for the trace (docs/trace-format.md#allocators). Runs once per process
// image at start, single-threaded, under the recursion guard; never on the event path. Reads
// symbol tables from the module files with libelf (the executable's local symbols are not in
// memory). Never aborts: what cannot be hooked is said, once, and the program runs on.
#include "allocscan.h"

#include "config.h"
#include "diag.h"
#include "format/hpt_format.h"
#include "got_patch.h"
#include "guard.h"
#include "patch.h"
#include "record.h"
#include "state.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <unistd.h>

// The wrappers (hook_static.c, in the preloaded module only). Weak: absent in the unit tests.
extern const hp_hook_table_t hp_hook_table __attribute__((weak, visibility("default")));

enum family { FAM_MALLOC, FAM_RUST, FAM_JEMALLOC, FAM_MIMALLOC, FAM_TCMALLOC, FAM_AHEAD, FAM_N };

static const char *const family_names[FAM_N] = {
    [FAM_MALLOC] = "malloc defined by the program",
    [FAM_RUST] = "Rust #[global_allocator]",
    [FAM_JEMALLOC] = "jemalloc",
    [FAM_MIMALLOC] = "mimalloc",
    [FAM_TCMALLOC] = "tcmalloc",
    [FAM_AHEAD] = "malloc of a library loaded ahead of heapprof",
};

#define NO_ROLE 0xff
#define MARK_RUST_DEFAULT 0xfe // std's __rdl_alloc: the shims call libc's malloc, already seen
#define MARK_TCMALLOC 0xfd     // tc_malloc: names the family of the executable's malloc

static const struct {
    const char *name;
    uint8_t role;
} libc_names[] = {
    {"malloc", HP_HOOK_MALLOC},
    {"free", HP_HOOK_FREE},
    {"calloc", HP_HOOK_CALLOC},
    {"realloc", HP_HOOK_REALLOC},
    {"posix_memalign", HP_HOOK_POSIX_MEMALIGN},
    {"aligned_alloc", HP_HOOK_ALIGNED_ALLOC},
    {"memalign", HP_HOOK_MEMALIGN},
    {"valloc", HP_HOOK_VALLOC},
    {"pvalloc", HP_HOOK_PVALLOC},
    {"_Znwm", HP_HOOK_NEW},
    {"_Znam", HP_HOOK_NEW_ARRAY},
    {"_ZdlPv", HP_HOOK_DELETE},
    {"_ZdaPv", HP_HOOK_DELETE_ARRAY},
    {"_ZdlPvm", HP_HOOK_DELETE_SIZED},
    {"_ZdaPvm", HP_HOOK_DELETE_ARRAY_SIZED},
    {"_ZnwmRKSt9nothrow_t", HP_HOOK_NEW_NOTHROW},
    {"_ZnamRKSt9nothrow_t", HP_HOOK_NEW_ARRAY_NOTHROW},
    {"_ZnwmSt11align_val_t", HP_HOOK_NEW_ALIGNED},
    {"_ZnamSt11align_val_t", HP_HOOK_NEW_ARRAY_ALIGNED},
    {"_ZnwmSt11align_val_tRKSt9nothrow_t", HP_HOOK_NEW_ALIGNED_NOTHROW},
    {"_ZnamSt11align_val_tRKSt9nothrow_t", HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW},
    {"_ZdlPvRKSt9nothrow_t", HP_HOOK_DELETE_NOTHROW},
    {"_ZdaPvRKSt9nothrow_t", HP_HOOK_DELETE_ARRAY_NOTHROW},
    {"_ZdlPvSt11align_val_t", HP_HOOK_DELETE_ALIGNED},
    {"_ZdaPvSt11align_val_t", HP_HOOK_DELETE_ARRAY_ALIGNED},
    {"_ZdlPvmSt11align_val_t", HP_HOOK_DELETE_SIZED_ALIGNED},
    {"_ZdaPvmSt11align_val_t", HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED},
    {"_ZdlPvSt11align_val_tRKSt9nothrow_t", HP_HOOK_DELETE_ALIGNED_NOTHROW},
    {"_ZdaPvSt11align_val_tRKSt9nothrow_t", HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW},
},
  rust_names[] = {
      // v0 mangling since Rust 1.80 ends in <len><name>: _RNvCs..._7___rustc12___rust_alloc
      {"__rust_alloc", HP_HOOK_RUST_ALLOC},
      {"__rust_dealloc", HP_HOOK_RUST_DEALLOC},
      {"__rust_realloc", HP_HOOK_RUST_REALLOC},
      {"__rust_alloc_zeroed", HP_HOOK_RUST_ALLOC_ZEROED},
      {"__rdl_alloc", MARK_RUST_DEFAULT},
  },
  je_names[] = {
      {"mallocx", HP_HOOK_MALLOCX},
      {"rallocx", HP_HOOK_RALLOCX},
      {"sdallocx", HP_HOOK_SDALLOCX},
      {"dallocx", HP_HOOK_DALLOCX},
  },
  // only with a prefix: bare, these are libc's names
  je_prefixed_names[] = {
      {"malloc", HP_HOOK_JE_MALLOC},
      {"calloc", HP_HOOK_JE_CALLOC},
      {"realloc", HP_HOOK_JE_REALLOC},
      {"free", HP_HOOK_JE_FREE},
  },
  mi_names[] = {
      {"mi_malloc", HP_HOOK_MI_MALLOC},
      {"mi_calloc", HP_HOOK_MI_CALLOC},
      {"mi_zalloc", HP_HOOK_MI_ZALLOC},
      {"mi_realloc", HP_HOOK_MI_REALLOC},
      {"mi_free", HP_HOOK_MI_FREE},
      {"mi_malloc_aligned", HP_HOOK_MI_MALLOC_ALIGNED},
      {"mi_zalloc_aligned", HP_HOOK_MI_ZALLOC_ALIGNED},
      {"mi_realloc_aligned", HP_HOOK_MI_REALLOC_ALIGNED},
      {"mi_free_size", HP_HOOK_MI_FREE_SIZE},
      {"mi_free_aligned", HP_HOOK_MI_FREE_ALIGNED},
      {"mi_free_size_aligned", HP_HOOK_MI_FREE_SIZE_ALIGNED},
  };

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static const char *role_name(uint8_t role) {
    for (size_t i = 0; i < N_OF(libc_names); i++)
        if (libc_names[i].role == role)
            return libc_names[i].name;
    for (size_t i = 0; i < N_OF(rust_names); i++)
        if (rust_names[i].role == role)
            return rust_names[i].name;
    for (size_t i = 0; i < N_OF(je_names); i++)
        if (je_names[i].role == role)
            return je_names[i].name;
    static const char *const prefixed[] = {"je_/_rjem_malloc", "je_/_rjem_calloc",
                                           "je_/_rjem_realloc", "je_/_rjem_free"};
    if (role >= HP_HOOK_JE_MALLOC && role <= HP_HOOK_JE_FREE)
        return prefixed[role - HP_HOOK_JE_MALLOC];
    for (size_t i = 0; i < N_OF(mi_names); i++)
        if (mi_names[i].role == role)
            return mi_names[i].name;
    return "?";
}

static enum family role_family(uint8_t role) {
    if (role <= HP_HOOK_CXX_LAST)
        return FAM_MALLOC;
    if (role <= HP_HOOK_RUST_ALLOC_ZEROED)
        return FAM_RUST;
    if (role <= HP_HOOK_JE_FREE)
        return FAM_JEMALLOC;
    return FAM_MIMALLOC;
}

// Is name "<len>_<want>" at its end, as v0 mangling writes the last path segment of an
// identifier that starts with '_' (_RNvCs..._7___rustc12___rust_alloc)?
static bool v0_ends_with(const char *name, size_t len, const char *want) {
    size_t wl = strlen(want);
    char num[8];
    int nl = 0;
    for (size_t v = wl; v; v /= 10)
        num[nl++] = (char)('0' + v % 10);
    if (len < wl + (size_t)nl + 1 || strncmp(name, "_R", 2) != 0)
        return false;
    const char *tail = name + len - wl - 1 - (size_t)nl;
    for (int i = 0; i < nl; i++)
        if (tail[i] != num[nl - 1 - i])
            return false;
    return tail[nl] == '_' && memcmp(tail + nl + 1, want, wl) == 0;
}

// Whether name may be one of the names below, from its first bytes alone. A big library's
// symbols are nearly all turned away here, before any comparison: C++'s _ZN... (operator new
// and delete are _Zn... and _Zd...), C names outside the few first letters below. Without it the
// scan of rustc's two libraries (300,000 symbols) spent ~30 ms in strcmp, the most of what the
// shim added to `rustc -V`.
static bool could_be_ours(const char *name) {
    switch (name[0]) {
    case '_':
        return (name[1] == 'Z' && (name[2] == 'n' || name[2] == 'd')) || name[1] == 'R' ||
               name[1] == '_' || name[1] == 'r';
    case 'a': // aligned_alloc
    case 'c': // calloc
    case 'd': // dallocx
    case 'f': // free
    case 'j': // je_...
    case 'm': // malloc, memalign, mallocx, mi_...
    case 'p': // posix_memalign, pvalloc
    case 'r': // realloc, rallocx
    case 's': // sdallocx
    case 't': // tc_malloc
    case 'v': // valloc
        return true;
    default:
        return false;
    }
}

// The role (or marker) a symbol name stands for; NO_ROLE for anything else.
static uint8_t classify(const char *name) {
    if (!could_be_ours(name))
        return NO_ROLE;
    if (name[0] == '_' && name[1] == 'R') {
        size_t len = strlen(name);
        // every Rust name of ours ends in alloc or alloc_zeroed
        if (name[len - 1] != 'c' && name[len - 1] != 'd')
            return NO_ROLE;
        for (size_t i = 0; i < N_OF(rust_names); i++)
            if (v0_ends_with(name, len, rust_names[i].name))
                return rust_names[i].role;
        return NO_ROLE;
    }
    if (name[0] == '_' && name[1] == 'Z') {
        // C++'s operator new and delete, in any module (an allocator's shared library defines
        // them: decide); nothing else of ours is C++-mangled
        for (size_t i = 0; i < N_OF(libc_names); i++)
            if (libc_names[i].role >= HP_HOOK_NEW && strcmp(name, libc_names[i].name) == 0)
                return libc_names[i].role;
        return NO_ROLE;
    }
    if (name[0] == '_' && name[1] == '_') {
        for (size_t i = 0; i < N_OF(rust_names); i++)
            if (strcmp(name, rust_names[i].name) == 0)
                return rust_names[i].role;
        return NO_ROLE;
    }
    if (name[0] == 'm' && name[1] == 'i' && name[2] == '_') {
        for (size_t i = 0; i < N_OF(mi_names); i++)
            if (strcmp(name, mi_names[i].name) == 0)
                return mi_names[i].role;
        return NO_ROLE;
    }
    if (strcmp(name, "tc_malloc") == 0)
        return MARK_TCMALLOC;
    const char *je = name;
    if (strncmp(je, "je_", 3) == 0)
        je += 3;
    else if (strncmp(je, "_rjem_", 6) == 0)
        je += 6;
    for (size_t i = 0; i < N_OF(je_names); i++)
        if (strcmp(je, je_names[i].name) == 0)
            return je_names[i].role;
    for (size_t i = 0; je != name && i < N_OF(je_prefixed_names); i++)
        if (strcmp(je, je_prefixed_names[i].name) == 0)
            return je_prefixed_names[i].role;
    // libc's own names: hooked where the executable defines them (decide), and in an
    // allocator's library along with its C++ names (hook_library_cxx)
    for (size_t i = 0; i < N_OF(libc_names) && libc_names[i].role < HP_HOOK_NEW; i++)
        if (strcmp(name, libc_names[i].name) == 0)
            return libc_names[i].role;
    return NO_ROLE;
}

// ---- what one module defines -------------------------------------------------------------------

typedef struct hit {
    uintptr_t addr;
    size_t size;
} hit_t;

typedef struct module {
    char path[1024];
    bool exe, has_symtab, rust_default, tcmalloc;
    hit_t hits[HP_HOOK_N]; // addr 0: not defined here
} module_t;

static void scan_symbols(Elf *e, Elf_Scn *scn, const GElf_Shdr *sh, uintptr_t bias, module_t *m) {
    Elf_Data *d = elf_getdata(scn, NULL);
    if (!d || sh->sh_entsize == 0)
        return;
    size_t n = sh->sh_size / sh->sh_entsize;
    for (size_t i = 0; i < n; i++) {
        GElf_Sym s;
        if (!gelf_getsym(d, (int)i, &s) || s.st_shndx == SHN_UNDEF || s.st_value == 0 ||
            GELF_ST_TYPE(s.st_info) != STT_FUNC) // an IFUNC's value is its resolver
            continue;
        const char *name = elf_strptr(e, sh->sh_link, s.st_name);
        if (!name || !name[0])
            continue;
        uint8_t role = classify(name);
        if (role == MARK_RUST_DEFAULT)
            m->rust_default = true;
        else if (role == MARK_TCMALLOC)
            m->tcmalloc = true;
        else if (role != NO_ROLE && !m->hits[role].addr)
            m->hits[role] = (hit_t){.addr = bias + (uintptr_t)s.st_value, .size = s.st_size};
    }
}

// False when the file could not be read (*open_errno: why open failed, else 0).
static bool scan_file(module_t *m, uintptr_t bias, int *open_errno) {
    *open_errno = 0;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        *open_errno = errno;
        return false;
    }
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (e) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
                continue;
            m->has_symtab |= sh.sh_type == SHT_SYMTAB;
            scan_symbols(e, scn, &sh, bias, m);
        }
        elf_end(e);
    }
    close(fd);
    return e != NULL;
}

// ---- findings ----------------------------------------------------------------------------------

#define MAX_FINDINGS 64
typedef struct finding {
    uint8_t status; // enum hpt_alloc_status
    char family[64];
    char detail[1024]; // C++'s twenty names of operator new and delete and a path fit
} finding_t;

static finding_t findings[MAX_FINDINGS];
static int n_findings;
static bool scanned;
static const void *hooked_at[HP_HOOK_N]; // the entry each role's wrapper stands for
static uint64_t hooked_now; // the roles hooked by the module being decided (bit per role)
_Static_assert(HP_HOOK_N <= 64, "hooked_now has a bit per role");

static void append(char *buf, size_t cap, const char *s) {
    size_t l = strnlen(buf, cap);
    if (l + 1 < cap) {
        size_t n = strnlen(s, cap - l - 1);
        memcpy(buf + l, s, n);
        buf[l + n] = 0;
    }
}

static void add_finding(uint8_t status, const char *family, const char *detail) {
    if (n_findings == MAX_FINDINGS)
        return;
    finding_t *f = &findings[n_findings++];
    f->status = status;
    f->family[0] = f->detail[0] = 0;
    append(f->family, sizeof f->family, family);
    append(f->detail, sizeof f->detail, detail);
    // Blocks of a hooked allocator are not libc's: the exit-time measure of live blocks reads
    // glibc's chunk header (touch_live.h), which such a block does not have. Set before
    // recording starts, so the drainers' table of live blocks never fills.
    if (status != HPT_ALLOC_UNHOOKED)
        hp_config.touch_live = false;
    if (status == HPT_ALLOC_UNHOOKED)
        hp_diag_line("warning: ", family, ": ", detail,
                     "; its allocations are missing from the trace", (char *)NULL);
    else if (!hp_config.quiet)
        hp_diag_line(family, ": ", detail, (char *)NULL);
}

// The executable's malloc belongs to jemalloc, tcmalloc or mimalloc when the same module has
// their own entry points too; otherwise it is the program's.
static enum family malloc_family(const module_t *m) {
    if (m->hits[HP_HOOK_MALLOCX].addr)
        return FAM_JEMALLOC;
    if (m->tcmalloc)
        return FAM_TCMALLOC;
    if (m->hits[HP_HOOK_MI_MALLOC].addr)
        return FAM_MIMALLOC;
    return FAM_MALLOC;
}

static uintptr_t fn_addr(hp_hook_fn_t f) {
    uintptr_t a;
    memcpy(&a, &f, sizeof a); // POSIX: function and object pointers share a representation
    return a;
}

static bool any_of(const module_t *m, int from, int to) {
    for (int r = from; r <= to; r++)
        if (m->hits[r].addr)
            return true;
    return false;
}

// Whether role's entry is the same function as an earlier role's among those in mask (an alias:
// tcmalloc's malloc is tc_malloc, its free operator delete): patched once, under the first.
static bool is_alias(const module_t *m, uint64_t mask, int role) {
    for (int r = 0; r < role; r++)
        if ((mask >> r & 1) && m->hits[r].addr == m->hits[role].addr)
            return true;
    return false;
}

// C++'s forms of operator new and delete that a wrapper reads more of than the first argument:
// the alignment of an aligned new, the size of a sized delete.
static bool reads_more_args(int role) {
    switch (role) {
    case HP_HOOK_NEW_ALIGNED:
    case HP_HOOK_NEW_ARRAY_ALIGNED:
    case HP_HOOK_NEW_ALIGNED_NOTHROW:
    case HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW:
    case HP_HOOK_DELETE_SIZED:
    case HP_HOOK_DELETE_ARRAY_SIZED:
    case HP_HOOK_DELETE_SIZED_ALIGNED:
    case HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED:
        return true;
    default:
        return false;
    }
}

// Whether two roles take their arguments alike: a form's plain and array names do.
static bool same_args(int a, int b) {
    static const int8_t array_of[HP_HOOK_N] = {
        [HP_HOOK_NEW_ARRAY] = HP_HOOK_NEW,
        [HP_HOOK_DELETE_ARRAY] = HP_HOOK_DELETE,
        [HP_HOOK_DELETE_ARRAY_SIZED] = HP_HOOK_DELETE_SIZED,
        [HP_HOOK_NEW_ARRAY_NOTHROW] = HP_HOOK_NEW_NOTHROW,
        [HP_HOOK_NEW_ARRAY_ALIGNED] = HP_HOOK_NEW_ALIGNED,
        [HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW] = HP_HOOK_NEW_ALIGNED_NOTHROW,
        [HP_HOOK_DELETE_ARRAY_NOTHROW] = HP_HOOK_DELETE_NOTHROW,
        [HP_HOOK_DELETE_ARRAY_ALIGNED] = HP_HOOK_DELETE_ALIGNED,
        [HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED] = HP_HOOK_DELETE_SIZED_ALIGNED,
        [HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW] = HP_HOOK_DELETE_ALIGNED_NOTHROW,
    };
    int pa = array_of[a] ? array_of[a] : a, pb = array_of[b] ? array_of[b] : b;
    return pa == pb;
}

// A function patched once serves every name it has (is_alias): its wrapper is the first role's,
// which must read nothing that another name's callers pass differently (an aligned new's
// alignment read from a plain new's call would be whatever the register held). The plainer
// forms come first in enum hp_hook_role, so a plain name with a sized one is fine. The role
// whose arguments differ, or -1.
static int alias_conflict(const module_t *m, uint64_t mask, int role) {
    if (!reads_more_args(role))
        return -1;
    for (int r = role + 1; r < HP_HOOK_N; r++)
        if ((mask >> r & 1) && m->hits[r].addr == m->hits[role].addr && !same_args(role, r))
            return r;
    return -1;
}

// Why role's entry in m cannot be patched before its bytes are even looked at (why_not: set
// when patching is out of the question), or NULL.
static const char *refusal(const module_t *m, uint64_t mask, int role, const char *why_not,
                           const hp_hook_table_t *t) {
    if (why_not)
        return why_not;
    if (alias_conflict(m, mask, role) >= 0)
        return "the same function under another name that takes other arguments";
    if (!t)
        return "no wrappers in this build";
    if (hooked_at[role])
        return "already hooked in another module";
    if (m->hits[role].size == 0)
        return "its symbol has no size";
    return NULL;
}

// The roles of libc's malloc family, and of C++'s operator new and delete.
#define ROLES_LIBC ((2ull << HP_HOOK_PVALLOC) - 1)
#define ROLES_CXX ((2ull << HP_HOOK_CXX_LAST) - (1ull << HP_HOOK_NEW))

// "C++ operator new and delete (n names)", after a list: C++ has twenty, too many to list.
static void append_cxx_count(char *buf, size_t cap, int n) {
    char num[21];
    append(buf, cap, buf[0] ? ", " : "");
    append(buf, cap, "C++ operator new and delete (");
    append(buf, cap, hp_diag_u64(num, (uint64_t)n));
    append(buf, cap, n == 1 ? " name)" : " names)");
}

// Patches the roles in mask defined in m as family fam's and reports the outcome.
static void hook_roles(const module_t *m, enum family fam, uint64_t mask, const char *why_not) {
    char done[768] = "", failed[1024] = "";
    const hp_hook_table_t *t = &hp_hook_table ? &hp_hook_table : NULL;
    uint64_t patched = 0; // roles patched here, aliases not counted
    for (int role = 0; role < HP_HOOK_N; role++) {
        const hit_t *h = &m->hits[role];
        if (!(mask >> role & 1) || !h->addr || is_alias(m, mask, role))
            continue;
        const char *why = refusal(m, mask, role, why_not, t);
        if (!why)
            why = hp_patch_entry((void *)h->addr, h->size, fn_addr(t->wrapper[role]),
                                 t->orig[role]);
        if (!why) {
            hooked_at[role] = (const void *)h->addr;
            hooked_now |= 1ull << role;
            patched |= 1ull << role;
            if (!(ROLES_CXX >> role & 1)) {
                append(done, sizeof done, done[0] ? ", " : "");
                append(done, sizeof done, role_name((uint8_t)role));
            }
        } else {
            append(failed, sizeof failed, failed[0] ? "; " : "");
            append(failed, sizeof failed, role_name((uint8_t)role));
            append(failed, sizeof failed, ": ");
            append(failed, sizeof failed, why);
        }
    }
    // C++'s names patched, with those that share a patched function (tcmalloc's delete is free)
    int cxx_names = 0;
    for (int role = HP_HOOK_NEW; role <= HP_HOOK_CXX_LAST; role++) {
        if (!(mask >> role & 1) || !m->hits[role].addr)
            continue;
        for (int r = 0; r < HP_HOOK_N; r++)
            if ((patched >> r & 1) && m->hits[r].addr == m->hits[role].addr) {
                cxx_names++;
                break;
            }
    }
    if (cxx_names)
        append_cxx_count(done, sizeof done, cxx_names);
    char detail[1536] = "";
    if (done[0]) {
        append(detail, sizeof detail, done);
        append(detail, sizeof detail, " in ");
        append(detail, sizeof detail, m->path);
        append(detail, sizeof detail, ", patched at their entry");
        add_finding(HPT_ALLOC_PATCHED, family_names[fam], detail);
    }
    if (failed[0]) {
        detail[0] = 0;
        append(detail, sizeof detail, m->path);
        append(detail, sizeof detail, " defines ");
        append(detail, sizeof detail, failed);
        add_finding(HPT_ALLOC_UNHOOKED, family_names[fam], detail);
    }
}

// Patches every role of family fam defined in m (libc's names count as the family that owns
// them, and only where the executable defines malloc's).
static void hook_family(const module_t *m, enum family fam, const char *why_not) {
    bool libc_named = m->exe && any_of(m, HP_HOOK_MALLOC, HP_HOOK_PVALLOC);
    uint64_t mask = 0;
    for (int role = 0; role < HP_HOOK_N; role++) {
        enum family rf = role_family((uint8_t)role);
        if (rf == FAM_MALLOC) {
            if (!libc_named)
                continue;
            rf = malloc_family(m);
        }
        if (rf == fam)
            mask |= 1ull << role;
    }
    hook_roles(m, fam, mask, why_not);
}

// The library's new and delete reached through their callers' GOT slots instead, where an entry
// cannot be patched (one that starts with a jrcxz or a call, say: tests/e2e/progs/
// got_alloc_lib.c; libjemalloc 5.3's sized delete, a conditional branch, was one before the
// trampoline moved such branches): every
// module loaded now gets its slots for them pointed at the wrappers, which call the library's
// functions. Modules loaded later by dlopen are not (the loader relocates them after telling
// us they are there: hp_allocscan_dl_state). The shim's own module keeps libstdc++'s.
static hp_got_hook_t cxx_got_hooks[HP_HOOK_CXX_LAST - HP_HOOK_NEW + 1];
static uintptr_t self_base; // the shim's own load address: never scanned, its slots left alone

static bool cxx_through_got(const module_t *m, enum family fam, const char *refused) {
    const hp_hook_table_t *t = &hp_hook_table ? &hp_hook_table : NULL;
    if (!t)
        return false;
    size_t n = 0;
    for (int role = HP_HOOK_NEW; role <= HP_HOOK_CXX_LAST; role++) {
        if (!m->hits[role].addr || hooked_at[role])
            continue;
        // the library's function itself, as the symbol table gives it (as interpose_mimalloc)
        void *lib_fn = (void *)m->hits[role].addr;
        memcpy(t->orig[role], &lib_fn, sizeof lib_fn);
        cxx_got_hooks[n++] = (hp_got_hook_t){role_name((uint8_t)role),
                                             (void *)fn_addr(t->wrapper[role])};
    }
    char names[64] = "";
    append_cxx_count(names, sizeof names, (int)n);
    if (!n || hp_got_patch(cxx_got_hooks, n, (const void *)self_base) == 0)
        return false;
    for (int role = HP_HOOK_NEW; role <= HP_HOOK_CXX_LAST; role++)
        if (m->hits[role].addr && !hooked_at[role]) {
            hooked_at[role] = (const void *)m->hits[role].addr;
            hooked_now |= 1ull << role;
        }
    char detail[1536] = "";
    append(detail, sizeof detail, names);
    append(detail, sizeof detail, " of ");
    append(detail, sizeof detail, m->path);
    append(detail, sizeof detail, ", through its callers' GOT slots (its entry cannot be patched: ");
    append(detail, sizeof detail, refused);
    append(detail, sizeof detail, ")");
    add_finding(HPT_ALLOC_INTERPOSED, family_names[fam], detail);
    return true;
}

// Whether the module of a comes before b's in the loader's order (or they cannot be told).
static bool comes_first(void *a, void *b) {
    Dl_info info;
    struct link_map *la = NULL, *lb = NULL;
    if (!dladdr1(a, &info, (void **)&la, RTLD_DL_LINKMAP) ||
        !dladdr1(b, &info, (void **)&lb, RTLD_DL_LINKMAP))
        return true;
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (l == la)
            return true;
        if (l == lb)
            return false;
    }
    return true;
}

// The malloc the loader binds a program's calls to. Programs ask for malloc@GLIBC_2.2.5, which
// the first module in the loader's order with an unversioned malloc (the shim, jemalloc) or
// with that version answers: glibc's libc_malloc_debug.so defines only the latter, not as the
// default version, so an unversioned dlsym passes over it and dlvsym over the unversioned ones;
// the earlier of the two is the program's.
static uintptr_t program_malloc(void) {
    void *any = dlsym(RTLD_DEFAULT, "malloc");
#if defined(__x86_64__)
    void *exact = dlvsym(RTLD_DEFAULT, "malloc", "GLIBC_2.2.5");
#elif defined(__aarch64__)
    void *exact = dlvsym(RTLD_DEFAULT, "malloc", "GLIBC_2.17");
#else
    void *exact = NULL;
#endif
    if (!any || !exact)
        return (uintptr_t)(any ? any : exact);
    return (uintptr_t)(comes_first(any, exact) ? any : exact);
}

// Whether m is a library whose malloc the loader gives the program instead of the shim's (one
// preloaded ahead of it): then the shim's malloc is never called, not even by the shim.
static bool malloc_ahead(const module_t *m) {
    return !m->exe && m->hits[HP_HOOK_MALLOC].addr &&
           program_malloc() == m->hits[HP_HOOK_MALLOC].addr;
}

// C++'s operator new and delete defined by an allocator's shared library (libjemalloc,
// libtcmalloc and libmimalloc define them): where the loader binds the program's `new` to that
// library's, ahead of libstdc++'s (linked before it, or preloaded), its blocks never pass
// through a malloc, and the shim's malloc saw none of them (a C++ program with libjemalloc:
// 2 blocks of 380,794). Hooked at their entries like the executable's. The library's malloc
// and free themselves stay below the shim's, which the loader finds first.
static void hook_library_cxx(const module_t *m, const char *why_not) {
    enum family fam = m->tcmalloc                                         ? FAM_TCMALLOC
                      : any_of(m, HP_HOOK_MALLOCX, HP_HOOK_JE_FREE)       ? FAM_JEMALLOC
                      : any_of(m, HP_HOOK_MI_MALLOC, HP_HOOK_MI_FREE_SIZE_ALIGNED) ? FAM_MIMALLOC
                                                                          : FAM_N;
    if (fam == FAM_N || !m->hits[HP_HOOK_NEW].addr ||
        (uintptr_t)dlsym(RTLD_DEFAULT, "_Znwm") != m->hits[HP_HOOK_NEW].addr)
        return; // not an allocator's, or not the `new` the program gets
    // All or none: new hooked with a delete left out would turn every block into a leak.
    const hp_hook_table_t *t = &hp_hook_table ? &hp_hook_table : NULL;
    const uint64_t cxx = ROLES_CXX, libc = ROLES_LIBC;
    // The library's malloc family too, where it can be: the shim's own malloc is ahead of it
    // for every other module, but the library's calls of its own functions reach them directly
    // (tcmalloc's constructor frees two tc_malloc blocks through tc_free, which is also its
    // operator delete: two "frees of unknown addresses" once delete was hooked). The shim's own
    // calls of it come with the guard held and pass through, except in sampled mode, where the
    // shim's malloc passes an allocation it does not sample straight to it, unguarded: the
    // wrapper would then decide a second time.
    char refused[768] = "";
    bool libc_ok = !why_not && (malloc_ahead(m) || !hp_config.sample_bytes);
    for (int role = 0; role <= HP_HOOK_CXX_LAST; role++) {
        const hit_t *h = &m->hits[role];
        bool in_cxx = cxx >> role & 1;
        if (!h->addr || (in_cxx && refused[0]) || (!in_cxx && !libc_ok))
            continue;
        const char *why = refusal(m, cxx | libc, role, why_not, t);
        if (!why)
            why = hp_patch_check((const void *)h->addr, h->size);
        if (why && !in_cxx) {
            libc_ok = false;
        } else if (why && !is_alias(m, cxx, role)) {
            append(refused, sizeof refused, role_name((uint8_t)role));
            append(refused, sizeof refused, ": ");
            append(refused, sizeof refused, why);
        }
    }
    if (!refused[0]) {
        hook_roles(m, fam, libc_ok ? cxx | libc : cxx, why_not);
        return;
    }
    if (!why_not && !hp_config.attached && cxx_through_got(m, fam, refused))
        return;
    char detail[1536] = "";
    append(detail, sizeof detail, m->path);
    append(detail, sizeof detail, " defines the C++ operator new and delete that the program's "
                                  "calls reach, none hooked (");
    append(detail, sizeof detail, refused);
    append(detail, sizeof detail, "): blocks of `new`");
    add_finding(HPT_ALLOC_UNHOOKED, family_names[fam], detail);
}

// mimalloc's entry points defined by a shared library: the program's calls to them bind to the
// shim's own mi_* (hook_static.c) when those come first in the lookup order, as a preloaded
// module's do. Points each wrapper at the library's function.
static void interpose_mimalloc(const module_t *m) {
    const hp_hook_table_t *t = &hp_hook_table ? &hp_hook_table : NULL;
    char names[512] = "";
    bool ours = t && (uintptr_t)dlsym(RTLD_DEFAULT, "mi_malloc") ==
                         fn_addr(t->wrapper[HP_HOOK_MI_MALLOC]);
    for (int role = HP_HOOK_MI_MALLOC; ours && role <= HP_HOOK_MI_FREE_SIZE_ALIGNED; role++) {
        if (!m->hits[role].addr || hooked_at[role])
            continue;
        // the library's function itself: the address its symbol table gives, not a second
        // lookup that could find the shim's again
        void *lib_fn = (void *)m->hits[role].addr;
        memcpy(t->orig[role], &lib_fn, sizeof lib_fn);
        hooked_at[role] = (const void *)m->hits[role].addr;
        hooked_now |= 1ull << role;
        append(names, sizeof names, names[0] ? ", " : "");
        append(names, sizeof names, role_name((uint8_t)role));
    }
    if (!names[0])
        return;
    char detail[1536] = "";
    append(detail, sizeof detail, names);
    append(detail, sizeof detail, " of ");
    append(detail, sizeof detail, m->path);
    append(detail, sizeof detail, " interposed by name");
    add_finding(HPT_ALLOC_INTERPOSED, family_names[FAM_MIMALLOC], detail);
}

static void decide(module_t *m, const char *why_not) {
    // The loader finds the executable's malloc before the shim's: nothing reaches us. An
    // executable that defines only operator new and delete (over malloc, as most do) is left
    // alone: its blocks reach the shim's malloc, with their bytes-touched measure.
    bool libc_named = m->exe && any_of(m, HP_HOOK_MALLOC, HP_HOOK_PVALLOC);
    enum family owner = libc_named ? malloc_family(m) : FAM_N; // whose libc names they are
    if (libc_named)
        hook_family(m, owner, why_not);
    // The shims call std's __rdl_alloc (libc's malloc, which the shim sees) unless a
    // #[global_allocator] replaced it.
    if (any_of(m, HP_HOOK_RUST_ALLOC, HP_HOOK_RUST_ALLOC_ZEROED) && !m->rust_default)
        hook_family(m, FAM_RUST, why_not);
    // jemalloc's own API, beside libc's malloc or a prefixed build (unless hooked just above)
    if (any_of(m, HP_HOOK_MALLOCX, HP_HOOK_JE_FREE) && owner != FAM_JEMALLOC)
        hook_family(m, FAM_JEMALLOC, why_not);
    if (any_of(m, HP_HOOK_MI_MALLOC, HP_HOOK_MI_FREE_SIZE_ALIGNED)) {
        if (!m->exe)
            interpose_mimalloc(m); // libmimalloc.so: its malloc is below the shim's already
        else if (owner != FAM_MIMALLOC)
            hook_family(m, FAM_MIMALLOC, why_not); // linked in beside another malloc
    }
    if (!m->exe)
        hook_library_cxx(m, why_not);
    // A library preloaded ahead of the shim (LD_PRELOAD="libjemalloc.so.2 libheapprof.so", or
    // glibc's libc_malloc_debug.so): every malloc of the program reaches it and none the shim,
    // whose trace was empty without a word (c_churn: 0 blocks of 100,002). Its malloc family is
    // patched as an executable's is, where hook_library_cxx has not done so with its C++ names.
    if (malloc_ahead(m) && !(hooked_now & ROLES_LIBC)) {
        enum family fam = malloc_family(m);
        hook_roles(m, fam == FAM_MALLOC ? FAM_AHEAD : fam, ROLES_LIBC, why_not);
    }
}

// ---- the scan ----------------------------------------------------------------------------------


static bool skip_module(const char *name) {
    // the C library and the loader are where libc's names should be; the vDSO has no file
    static const char *const skip[] = {"/libc.so", "/ld-linux", "linux-vdso", "/libm.so",
                                       "/libpthread.so", "/libdl.so", "/librt.so"};
    for (size_t i = 0; i < N_OF(skip); i++)
        if (strstr(name, skip[i]))
            return true;
    return false;
}

static const char *errno_text(int e) {
    switch (e) {
    case EPERM:
        return "open: operation not permitted (a seccomp filter?)";
    case EACCES:
        return "open: permission denied";
    case ENOSYS:
        return "open: not implemented (a seccomp filter?)";
    case ENOENT:
        return "open: the file is gone";
    default:
        return "open failed";
    }
}

// Scans one module and hooks what it defines; returns the roles it hooked. later: loaded by
// dlopen after start, where a file that cannot be read is said (its allocators would be
// missing without a word); at start the loader's own list was readable all the same.
static uint64_t scan_module(const char *name, uintptr_t base, bool exe, const char *why_not,
                            bool later) {
    static module_t m; // 1 KiB path plus hits: off the caller's stack
    memset(&m, 0, sizeof m);
    m.exe = exe;
    if (exe) {
        ssize_t n = readlink("/proc/self/exe", m.path, sizeof m.path - 1);
        if (n <= 0)
            return 0;
        m.path[n] = 0;
    } else {
        append(m.path, sizeof m.path, name);
    }
    hooked_now = 0;
    int open_errno;
    if (scan_file(&m, base, &open_errno)) {
        decide(&m, why_not);
    } else if (later && open_errno) {
        char detail[1536] = "";
        append(detail, sizeof detail, m.path);
        append(detail, sizeof detail, " (loaded by dlopen): its symbol table could not be read, ");
        append(detail, sizeof detail, errno_text(open_errno));
        add_finding(HPT_ALLOC_UNHOOKED, "unknown (not looked at)", detail);
    }
    return hooked_now;
}

typedef struct walk {
    const char *why_not;
    int index;
} walk_t;

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    walk_t *w = arg;
    bool exe = w->index++ == 0;
    if (info->dlpi_addr == self_base && !exe)
        return 0;
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    if (!exe && (!name[0] || skip_module(name)))
        return 0;
    scan_module(name, info->dlpi_addr, exe, w->why_not, false);
    return 0;
}

// ---- modules loaded later (dlopen) ---------------------------------------------------------------

// The loader's modules as last seen, with the roles each one's entries were hooked for: when a
// module goes (dlclose), its roles are free again for one loaded later.
#define MAX_SEEN 1024
static struct seen {
    const struct link_map *map;
    uintptr_t base;
    uint64_t roles;
} seen[MAX_SEEN];
static int n_seen;
static bool watching; // _dl_debug_state was patched: hp_allocscan_dl_state runs

static struct seen *seen_find(const struct link_map *l) {
    for (int i = 0; i < n_seen; i++)
        if (seen[i].map == l && seen[i].base == (uintptr_t)l->l_addr)
            return &seen[i];
    return NULL;
}

static bool in_list(const struct seen *s) {
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next)
        if (l == s->map && (uintptr_t)l->l_addr == s->base)
            return true;
    return false;
}

// Forgets modules that are gone, and frees their roles.
static void seen_prune(void) {
    int k = 0;
    for (int i = 0; i < n_seen; i++) {
        if (in_list(&seen[i])) {
            seen[k++] = seen[i];
            continue;
        }
        for (int role = 0; role < HP_HOOK_N; role++)
            if (seen[i].roles >> role & 1)
                hooked_at[role] = NULL;
    }
    n_seen = k;
}

static struct seen *seen_add(const struct link_map *l) {
    if (n_seen == MAX_SEEN)
        return NULL;
    seen[n_seen] = (struct seen){.map = l, .base = (uintptr_t)l->l_addr};
    return &seen[n_seen++];
}

static size_t encode_finding(const finding_t *f, uint8_t *buf) {
    uint8_t *p = buf;
    size_t fl = strnlen(f->family, sizeof f->family), dl = strnlen(f->detail, sizeof f->detail);
    *p++ = HPT_REC_ALLOCATOR;
    p = hpt_put_varint(p, f->status);
    p = hpt_put_varint(p, fl);
    memcpy(p, f->family, fl);
    p += fl;
    p = hpt_put_varint(p, dl);
    memcpy(p, f->detail, dl);
    p += dl;
    return (size_t)(p - buf);
}

#define FINDING_REC_MAX (16 + sizeof(((finding_t *)0)->family) + \
                         sizeof(((finding_t *)0)->detail) + 2 * HPT_VARINT_MAX)

void hp_allocscan_dl_state(void) {
    // RT_ADD and RT_DELETE announce a change under way; RT_CONSISTENT: the list is whole again
    // busy: Capstone loaded while a new module is patched (patch.c) is a nested dlopen, whose
    // notices come here again mid-scan; its module is looked at on the next notice
    static bool busy;
    if (!watching || _r_debug.r_state != RT_CONSISTENT || busy)
        return;
    busy = true;
    int saved_errno = errno;
    int entered = hp_guard_enter(); // libelf and Capstone allocate: not the program's
    int first_new = n_findings;
    seen_prune();
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next) {
        if (seen_find(l))
            continue;
        struct seen *s = seen_add(l);
        const char *name = l->l_name ? l->l_name : "";
        if (!s || (uintptr_t)l->l_addr == self_base || !name[0] || skip_module(name))
            continue;
        // dlopen has not returned and the module's constructors have not run: none of its
        // code can be running, so patching it races nothing
        s->roles = scan_module(name, (uintptr_t)l->l_addr, false, NULL, true);
    }
    if (entered && hp_state_is_on()) {
        static uint8_t buf[FINDING_REC_MAX]; // under the loader's lock: one caller at a time
        for (int i = first_new; i < n_findings; i++)
            hp_record_note(buf, encode_finding(&findings[i], buf));
    }
    if (entered)
        hp_guard_leave();
    busy = false;
    errno = saved_errno;
}

// Starts watching for modules loaded later: glibc calls _dl_debug_state (r_debug's r_brk, the
// address a debugger breaks at), an empty function, whenever its list of modules changes. It is
// patched to call hp_allocscan_dl_state instead, while no other thread runs. If it cannot be,
// modules loaded later are not looked at (docs/design.md says so).
static void watch_dlopen(void) {
    const hp_hook_table_t *t = &hp_hook_table ? &hp_hook_table : NULL;
    if (!t || !t->on_dl_state || !_r_debug.r_brk)
        return;
    for (const struct link_map *l = _r_debug.r_map; l; l = l->l_next)
        seen_add(l);
    watching = hp_patch_empty((void *)_r_debug.r_brk, fn_addr(t->on_dl_state)) == NULL;
}

void hp_allocscan_run(void) {
    if (scanned)
        return;
    scanned = true;
    if (elf_version(EV_CURRENT) == EV_NONE)
        return;
    walk_t w = {0};
    Dl_info self;
    if (dladdr(&scanned, &self)) // any object of the shim names its module
        self_base = (uintptr_t)self.dli_fbase;
    // Patching rewrites code another thread could be running; with one thread none can be.
    if (!__libc_single_threaded)
        w.why_not = "threads were already running when heapprof started";
    dl_iterate_phdr(visit, &w);
    if (__libc_single_threaded)
        watch_dlopen();
}

bool hp_allocscan_emit(hp_modmap_emit_fn emit, void *ctx) {
    static uint8_t buf[FINDING_REC_MAX]; // at start, one caller
    for (int i = 0; i < n_findings; i++)
        emit(ctx, buf, encode_finding(&findings[i], buf));
    return scanned;
}
