// SPDX-License-Identifier: MIT
// GOT/PLT slot rewriting (got_patch.h): walks each module's dynamic relocations
// (DT_JMPREL and DT_RELA) for JUMP_SLOT/GLOB_DAT entries naming a hooked
// symbol. A slot inside PT_GNU_RELRO (full RELRO, -z now) is made writable for
// the one store and read-only again. Runs inside a live program: no allocation,
// no stdio; a module it cannot read is skipped, never fatal.
#include "got_patch.h"

#include <elf.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#define SLOTS_MAX 8192 // ~40 modules x 11 names x 2 relocation kinds, many times over

typedef struct slot {
    _Atomic(void *) *addr; // the GOT word
    void *orig;            // what the loader (or lazy binding's stub) had put there
    void *hook;
    uintptr_t base;   // the module's load bias and program headers: its identity, since a
    const void *phdr; // module unloaded and another loaded at its place differs in one
} slot_t;

static slot_t slots[SLOTS_MAX];
static size_t n_slots, n_skipped;
static pthread_mutex_t slots_lock = PTHREAD_MUTEX_INITIALIZER;

typedef struct patch_ctx {
    const hp_got_hook_t *hooks;
    size_t n_hooks;
    uintptr_t own_base;
    size_t n_done;
} patch_ctx_t;

static bool is_skipped_module(const struct dl_phdr_info *info, uintptr_t own_base) {
    const char *name = info->dlpi_name ? info->dlpi_name : "";
    // the shim's own calls go to the real functions already; the loader binds its
    // allocator through pointers of its own, not relocations; the vDSO has no
    // allocator calls
    return info->dlpi_addr == own_base || strstr(name, "linux-vdso") || strstr(name, "/ld-linux") ||
           strstr(name, "ld-linux-x86-64.so");
}

// Dynamic-section pointers are relocated in place by glibc on x86-64, but not
// in every module (the vDSO, loaders that keep the section read-only): a value
// below the load bias is still an offset.
static uintptr_t dyn_ptr(uintptr_t base, uintptr_t v) { return v < base ? base + v : v; }

// Writes v into a slot, opening a read-only (RELRO) page for the store. False
// if the page cannot be made writable.
static bool store_slot(_Atomic(void *) *addr, void *v, bool relro) {
    long page = sysconf(_SC_PAGESIZE);
    uintptr_t start = (uintptr_t)addr & ~(uintptr_t)(page - 1);
    if (relro && mprotect((void *)start, (size_t)page, PROT_READ | PROT_WRITE) != 0)
        return false;
    atomic_store_explicit(addr, v, memory_order_release);
    if (relro)
        mprotect((void *)start, (size_t)page, PROT_READ);
    return true;
}

static bool in_relro(const struct dl_phdr_info *info, uintptr_t a) {
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_GNU_RELRO)
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (a >= lo && a < lo + ph->p_memsz)
            return true;
    }
    return false;
}

static void patch_relocs(const struct dl_phdr_info *info, patch_ctx_t *c, const ElfW(Rela) * rel,
                         size_t n_rel, const ElfW(Sym) * symtab, const char *strtab, size_t strsz) {
    for (size_t i = 0; i < n_rel; i++) {
        unsigned type = ELF64_R_TYPE(rel[i].r_info);
        if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT)
            continue;
        size_t si = ELF64_R_SYM(rel[i].r_info);
        if (!si || symtab[si].st_name >= strsz)
            continue;
        const char *name = strtab + symtab[si].st_name;
        for (size_t h = 0; h < c->n_hooks; h++) {
            if (strcmp(name, c->hooks[h].name) != 0)
                continue;
            _Atomic(void *) *addr = (_Atomic(void *) *)(info->dlpi_addr + rel[i].r_offset);
            void *old = atomic_load_explicit(addr, memory_order_acquire);
            if (old == c->hooks[h].hook)
                break; // patched before (an earlier call, or the same slot twice)
            if (n_slots == SLOTS_MAX) {
                n_skipped++;
                break;
            }
            bool relro = in_relro(info, (uintptr_t)addr);
            // remembered before the store: a restore never misses a slot that holds a
            // hook
            slots[n_slots] =
                (slot_t){addr, old, c->hooks[h].hook, info->dlpi_addr, info->dlpi_phdr};
            if (store_slot(addr, c->hooks[h].hook, relro)) {
                n_slots++;
                c->n_done++;
            } else {
                n_skipped++;
            }
            break;
        }
    }
}

static int patch_module(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    patch_ctx_t *c = arg;
    if (is_skipped_module(info, c->own_base))
        return 0;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    if (!dyn)
        return 0; // a static part of the image: nothing is bound through slots
    uintptr_t b = info->dlpi_addr, symtab = 0, strtab = 0, jmprel = 0, rela = 0;
    size_t strsz = 0, pltrelsz = 0, relasz = 0;
    long pltrel = DT_RELA;
    for (; dyn->d_tag != DT_NULL; dyn++) {
        switch (dyn->d_tag) {
        case DT_SYMTAB:
            symtab = dyn_ptr(b, dyn->d_un.d_ptr);
            break;
        case DT_STRTAB:
            strtab = dyn_ptr(b, dyn->d_un.d_ptr);
            break;
        case DT_STRSZ:
            strsz = dyn->d_un.d_val;
            break;
        case DT_JMPREL:
            jmprel = dyn_ptr(b, dyn->d_un.d_ptr);
            break;
        case DT_PLTRELSZ:
            pltrelsz = dyn->d_un.d_val;
            break;
        case DT_PLTREL:
            pltrel = (long)dyn->d_un.d_val;
            break;
        case DT_RELA:
            rela = dyn_ptr(b, dyn->d_un.d_ptr);
            break;
        case DT_RELASZ:
            relasz = dyn->d_un.d_val;
            break;
        default:
            break;
        }
    }
    if (!symtab || !strtab)
        return 0;
    if (jmprel && pltrel == DT_RELA)
        patch_relocs(info, c, (const ElfW(Rela) *)jmprel, pltrelsz / sizeof(ElfW(Rela)),
                     (const ElfW(Sym) *)symtab, (const char *)strtab, strsz);
    if (rela)
        patch_relocs(info, c, (const ElfW(Rela) *)rela, relasz / sizeof(ElfW(Rela)),
                     (const ElfW(Sym) *)symtab, (const char *)strtab, strsz);
    return 0;
}

size_t hp_got_patch(const hp_got_hook_t *hooks, size_t n, const void *own_base) {
    patch_ctx_t c = {hooks, n, (uintptr_t)own_base, 0};
    pthread_mutex_lock(&slots_lock);
    dl_iterate_phdr(patch_module, &c);
    pthread_mutex_unlock(&slots_lock);
    return c.n_done;
}

typedef struct restore_ctx {
    const void *last; // slots holding this hook are left for a later call
    size_t n_restored;
} restore_ctx_t;

static int restore_module(struct dl_phdr_info *info, size_t size, void *arg) {
    (void)size;
    restore_ctx_t *c = arg;
    // newest first, an undo: a slot patched twice gets its first patch's value, then the original
    for (size_t i = n_slots; i-- > 0;) {
        slot_t *s = &slots[i];
        if (!s->addr || s->base != info->dlpi_addr || s->phdr != (const void *)info->dlpi_phdr ||
            (c->last && s->hook == c->last))
            continue;
        // a slot the program (or lazy binding) rewrote since is its own now
        if (atomic_load_explicit(s->addr, memory_order_acquire) == s->hook &&
            store_slot(s->addr, s->orig, in_relro(info, (uintptr_t)s->addr)))
            c->n_restored++;
        s->addr = NULL;
    }
    return 0;
}

size_t hp_got_restore(const void *last) {
    restore_ctx_t c = {last, 0};
    pthread_mutex_lock(&slots_lock);
    // inside the loader's lock: no module can be unmapped between the check and the store
    dl_iterate_phdr(restore_module, &c);
    if (!last) {
        n_slots = 0;
        n_skipped = 0;
    }
    pthread_mutex_unlock(&slots_lock);
    return c.n_restored;
}

size_t hp_got_n_patched(void) { return n_slots; }

size_t hp_got_n_skipped(void) { return n_skipped; }
