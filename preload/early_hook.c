// SPDX-License-Identifier: MIT
// An executable that defines malloc itself (jemalloc or tcmalloc linked in, and exported, as
// rustc does) is first in the loader's symbol order, so its libraries' calls never reach the
// shim's malloc: the shim sees them only once hp_allocscan_run has patched the executable's
// entries, in set-up. Set-up starts at the shim's first call or in its constructor, and the
// loader runs the program's libraries' constructors before a preloaded module's: what they
// allocate (LLVM's static initialisers: 431 blocks in rustc) was missing, and their later frees
// were "frees of unknown addresses". DHAT sees them.
//
// So, earlier still: while the loader relocates this module (an IFUNC resolver; no constructor
// has run, the executable is not relocated yet, no other thread exists), the executable's
// exported allocator entries get a jump to a stub of ours (or, where the executable has no
// malloc, those of a library preloaded ahead of this module, whose malloc the program gets).
// Whichever is called first puts every entry back as it was and starts set-up
// (hp_lifecycle_start_early), which patches them the ordinary way (allocscan.c, patch.c), then
// goes on to the entry it was called for. Set-up puts
// them back itself first where it starts before any was called (in our constructor), and where
// it cannot start yet at the first call (ld.so allocating before libc's early initialisation)
// they stay as they were and set-up waits for the constructor, as before.
//
// The resolver runs before this module's own PLT is bound: it calls nothing outside this file
// (raw system calls; the build compiles it without builtins, stack protector or LTO, so the
// compiler adds no call of its own), and reads the loader's structures only.
#include "early_hook.h"

#include "lifecycle.h"

#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>

#if defined(__x86_64__)

// jmp *0(%rip) followed by the target: 14 bytes, reaching anywhere, touching no register
#define JUMP_BYTES 14
#define PAGE 4096u

// The entries tried: any one called first starts set-up, which hooks them all properly.
static const char *const early_names[] = {
    "malloc", "calloc", "realloc", "free", "posix_memalign", "aligned_alloc", "memalign",
    "valloc", "pvalloc", "_Znwm", "_Znam", "_ZdlPv", "_ZdaPv", "_ZdlPvm", "_ZdaPvm",
    "_ZnwmRKSt9nothrow_t", "_ZnamRKSt9nothrow_t", "_ZnwmSt11align_val_t", "_ZnamSt11align_val_t",
    "_ZnwmSt11align_val_tRKSt9nothrow_t", "_ZnamSt11align_val_tRKSt9nothrow_t",
    "_ZdlPvRKSt9nothrow_t", "_ZdaPvRKSt9nothrow_t", "_ZdlPvSt11align_val_t",
    "_ZdaPvSt11align_val_t", "_ZdlPvmSt11align_val_t", "_ZdaPvmSt11align_val_t",
    "_ZdlPvSt11align_val_tRKSt9nothrow_t", "_ZdaPvSt11align_val_tRKSt9nothrow_t",
};
#define N_EARLY (sizeof early_names / sizeof early_names[0])

typedef struct early_entry {
    uint8_t *fn;
    uint8_t saved[JUMP_BYTES];
} early_entry_t;

static early_entry_t entries[N_EARLY];
static atomic_flag hit_lock = ATOMIC_FLAG_INIT;
static bool disarmed;

extern ElfW(Dyn) _DYNAMIC[] __attribute__((visibility("hidden")));

// A system call of up to three arguments, without libc (whose wrappers the resolver cannot call).
static long raw3(long nr, long a, long b, long c) {
    long r;
    __asm__ volatile("syscall"
                     : "=a"(r)
                     : "a"(nr), "D"(a), "S"(b), "d"(c)
                     : "rcx", "r11", "memory");
    return r;
}

// mprotect of the whole pages that hold [p, p + n)
static bool pages_protect(const uint8_t *p, size_t n, int prot) {
    uintptr_t lo = (uintptr_t)p & ~(uintptr_t)(PAGE - 1);
    uintptr_t hi = ((uintptr_t)p + n + PAGE - 1) & ~(uintptr_t)(PAGE - 1);
    return raw3(SYS_mprotect, (long)lo, (long)(hi - lo), prot) == 0;
}

// Makes the bytes [p, p + n) writable (and still executable where the kernel allows), or false.
static bool text_writable(const uint8_t *p, size_t n) {
    return pages_protect(p, n, PROT_READ | PROT_WRITE | PROT_EXEC) ||
           pages_protect(p, n, PROT_READ | PROT_WRITE);
}

static void text_sealed(const uint8_t *p, size_t n) {
    pages_protect(p, n, PROT_READ | PROT_EXEC);
}

// Byte loops the compiler must not turn into memcpy/strcmp calls (the file is built with
// -fno-builtin -fno-tree-loop-distribute-patterns as well).
static void copy_bytes(volatile uint8_t *dst, const volatile uint8_t *src, size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = src[i];
}

static bool same_name(const char *a, const char *b) {
    for (;; a++, b++) {
        if (*a != *b)
            return false;
        if (!*a)
            return true;
    }
}

// The executable's dynamic symbol tables, from its .dynamic (whose pointers the loader has
// already moved by the load bias, or not: an address below the bias is one it has not).
typedef struct dynsyms {
    const ElfW(Sym) *sym;
    const char *str;
    const uint32_t *gnu_hash;
    const uint32_t *sysv_hash;
    uintptr_t bias;
} dynsyms_t;

static const void *dyn_addr(const dynsyms_t *d, ElfW(Addr) v) {
    return (const void *)(v < d->bias ? v + d->bias : v);
}

static bool dynsyms_of(const struct link_map *m, dynsyms_t *out) {
    *out = (dynsyms_t){.bias = m->l_addr};
    for (const ElfW(Dyn) *d = m->l_ld; d && d->d_tag != DT_NULL; d++) {
        switch (d->d_tag) {
        case DT_SYMTAB:
            out->sym = dyn_addr(out, d->d_un.d_ptr);
            break;
        case DT_STRTAB:
            out->str = dyn_addr(out, d->d_un.d_ptr);
            break;
        case DT_GNU_HASH:
            out->gnu_hash = dyn_addr(out, d->d_un.d_ptr);
            break;
        case DT_HASH:
            out->sysv_hash = dyn_addr(out, d->d_un.d_ptr);
            break;
        default:
            break;
        }
    }
    return out->sym && out->str && (out->gnu_hash || out->sysv_hash);
}

static const ElfW(Sym) *lookup(const dynsyms_t *d, const char *name) {
    if (d->gnu_hash) {
        uint32_t h = 5381;
        for (const char *c = name; *c; c++)
            h = h * 33 + (uint8_t)*c;
        uint32_t nbuckets = d->gnu_hash[0], symoffset = d->gnu_hash[1];
        uint32_t bloom_words = d->gnu_hash[2];
        if (!nbuckets)
            return NULL;
        const uint32_t *buckets =
            (const uint32_t *)((const ElfW(Addr) *)(d->gnu_hash + 4) + bloom_words);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t i = buckets[h % nbuckets];
        if (i < symoffset)
            return NULL;
        for (;; i++) {
            uint32_t h2 = chain[i - symoffset];
            if ((h | 1) == (h2 | 1) && same_name(name, d->str + d->sym[i].st_name))
                return &d->sym[i];
            if (h2 & 1)
                return NULL;
        }
    }
    uint32_t h = 0;
    for (const char *c = name; *c; c++) {
        h = (h << 4) + (uint8_t)*c;
        uint32_t g = h & 0xf0000000u;
        if (g)
            h ^= g >> 24;
        h &= ~g;
    }
    uint32_t nbucket = d->sysv_hash[0];
    if (!nbucket)
        return NULL;
    const uint32_t *bucket = d->sysv_hash + 2, *chain = bucket + nbucket;
    for (uint32_t i = bucket[h % nbucket]; i; i = chain[i])
        if (same_name(name, d->str + d->sym[i].st_name))
            return &d->sym[i];
    return NULL;
}

// The stubs: keep every general register (a caller in the allocator's own file may count on
// what the original leaves alone: GCC's -fipa-ra, as hook_static.c's wrappers do), ask
// hp_early_hit(k) where to go, and go there through a slot that the last pop leaves in the red
// zone. endbr64 first: the patched entry reaches them by an indirect jump.
#define EARLY_STUB(k)                                                                             \
    __asm__(".text\n"                                                                            \
            ".p2align 4\n"                                                                       \
            "hp_early_stub_" #k ":\n"                                                            \
            "  endbr64\n"                                                                        \
            "  sub $16, %rsp\n"                                                                  \
            "  push %rax\n  push %rcx\n  push %rdx\n  push %rsi\n  push %rdi\n"                   \
            "  push %r8\n  push %r9\n  push %r10\n  push %r11\n"                                \
            "  mov $" #k ", %edi\n"                                                              \
            "  call hp_early_hit\n"                                                              \
            "  mov %rax, 72(%rsp)\n"                                                             \
            "  pop %r11\n  pop %r10\n  pop %r9\n  pop %r8\n"                                      \
            "  pop %rdi\n  pop %rsi\n  pop %rdx\n  pop %rcx\n  pop %rax\n"                       \
            "  add $16, %rsp\n"                                                                  \
            "  jmp *-16(%rsp)\n");                                                               \
    void hp_early_stub_##k(void) __attribute__((visibility("hidden")));
EARLY_STUB(0)
EARLY_STUB(1)
EARLY_STUB(2)
EARLY_STUB(3)
EARLY_STUB(4)
EARLY_STUB(5)
EARLY_STUB(6)
EARLY_STUB(7)
EARLY_STUB(8)
EARLY_STUB(9)
EARLY_STUB(10)
EARLY_STUB(11)
EARLY_STUB(12)
EARLY_STUB(13)
EARLY_STUB(14)
EARLY_STUB(15)
EARLY_STUB(16)
EARLY_STUB(17)
EARLY_STUB(18)
EARLY_STUB(19)
EARLY_STUB(20)
EARLY_STUB(21)
EARLY_STUB(22)
EARLY_STUB(23)
EARLY_STUB(24)
EARLY_STUB(25)
EARLY_STUB(26)
EARLY_STUB(27)
EARLY_STUB(28)
static void (*const stubs[])(void) = {
    hp_early_stub_0, hp_early_stub_1, hp_early_stub_2,  hp_early_stub_3,  hp_early_stub_4,
    hp_early_stub_5, hp_early_stub_6, hp_early_stub_7,  hp_early_stub_8,  hp_early_stub_9,
    hp_early_stub_10, hp_early_stub_11, hp_early_stub_12, hp_early_stub_13, hp_early_stub_14,
    hp_early_stub_15, hp_early_stub_16, hp_early_stub_17, hp_early_stub_18, hp_early_stub_19,
    hp_early_stub_20, hp_early_stub_21, hp_early_stub_22, hp_early_stub_23, hp_early_stub_24,
    hp_early_stub_25, hp_early_stub_26, hp_early_stub_27, hp_early_stub_28,
};
_Static_assert(sizeof stubs / sizeof stubs[0] == N_EARLY, "a stub for every name");

// Puts every armed entry back. Under hit_lock.
static void disarm(void) {
    for (unsigned k = 0; k < N_EARLY; k++) {
        early_entry_t *e = &entries[k];
        if (e->fn && text_writable(e->fn, JUMP_BYTES)) {
            copy_bytes(e->fn, e->saved, JUMP_BYTES);
            text_sealed(e->fn, JUMP_BYTES);
        }
    }
    disarmed = true;
}

void hp_early_hook_disarm(void) {
    while (atomic_flag_test_and_set_explicit(&hit_lock, memory_order_acquire))
        __builtin_ia32_pause();
    if (!disarmed)
        disarm();
    atomic_flag_clear_explicit(&hit_lock, memory_order_release);
}

__attribute__((used)) void *hp_early_hit(unsigned k) {
    hp_early_hook_disarm();
    // Set-up patches the entries the ordinary way now (or, before libc's early initialisation,
    // declines: the constructor does it then). Its own calls of the host's malloc find the
    // entries as they were.
    hp_lifecycle_start_early();
    return entries[k].fn;
}

// The executable's program headers, from the auxiliary vector (no libc: getauxval is not bound
// yet). 0 where /proc cannot be read.
static uintptr_t exe_phdr(size_t *phnum) {
    static const char path[] = "/proc/self/auxv";
    ElfW(auxv_t) aux[64];
    long fd = raw3(SYS_open, (long)path, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return 0;
    long n = raw3(SYS_read, fd, (long)aux, (long)sizeof aux);
    raw3(SYS_close, fd, 0, 0);
    uintptr_t phdr = 0;
    *phnum = 0;
    for (long i = 0; n > 0 && i < n / (long)sizeof aux[0]; i++) {
        if (aux[i].a_type == AT_PHDR)
            phdr = aux[i].a_un.a_val;
        else if (aux[i].a_type == AT_PHNUM)
            *phnum = aux[i].a_un.a_val;
    }
    return *phnum ? phdr : 0;
}

// The loader's list of modules, through the executable's DT_DEBUG (set before any module is
// relocated), when this module was preloaded: libc comes after it in the list. A module loaded
// by dlopen (attach) comes after libc, into a running program: nothing is armed then (lifecycle.c's
// loaded_for_attach asks the same of dladdr1).
static const struct link_map *main_map_if_preloaded(void) {
    size_t phnum;
    uintptr_t phdr = exe_phdr(&phnum);
    if (!phdr)
        return NULL;
    const ElfW(Phdr) *ph = (const ElfW(Phdr) *)phdr;
    uintptr_t bias = 0;
    const ElfW(Dyn) *dyn = NULL;
    for (size_t i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_PHDR)
            bias = phdr - ph[i].p_vaddr;
    for (size_t i = 0; i < phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(bias + ph[i].p_vaddr);
    const struct r_debug *r = NULL;
    for (const ElfW(Dyn) *d = dyn; d && d->d_tag != DT_NULL; d++)
        if (d->d_tag == DT_DEBUG)
            r = (const struct r_debug *)d->d_un.d_ptr;
    if (!r || !r->r_map)
        return NULL;
    for (const struct link_map *m = r->r_map; m; m = m->l_next) {
        if (m->l_ld == _DYNAMIC)
            return r->r_map;
        const char *name = m->l_name;
        for (const char *c = name; c && *c; c++)
            if (c[0] == '/' && c[1] == 'l' && c[2] == 'i' && c[3] == 'b' && c[4] == 'c' &&
                c[5] == '.' && c[6] == 's' && c[7] == 'o' && c[8] == '.')
                return NULL; // libc before us: dlopened
    }
    return NULL;
}

// Arms the entries module m defines, of the names no module armed before it.
static void arm_module(const struct link_map *m, const dynsyms_t *d) {
    for (unsigned k = 0; k < N_EARLY; k++) {
        if (entries[k].fn)
            continue;
        const ElfW(Sym) *s = lookup(d, early_names[k]);
        // defined here, an ordinary function long enough for the jump (a smaller one would let
        // the jump run into the next function, which might be called before we put it back)
        if (!s || s->st_shndx == SHN_UNDEF || ELF64_ST_TYPE(s->st_info) != STT_FUNC ||
            s->st_size < JUMP_BYTES || !s->st_value)
            continue;
        uint8_t *fn = (uint8_t *)(m->l_addr + s->st_value);
        // one name of several for the same function (tcmalloc's operator delete and its sized
        // form): armed once, or putting the second back would restore the first one's jump
        bool seen = false;
        for (unsigned j = 0; j < k; j++)
            seen |= entries[j].fn == fn;
        if (seen || !text_writable(fn, JUMP_BYTES))
            continue;
        early_entry_t *e = &entries[k];
        copy_bytes(e->saved, fn, JUMP_BYTES);
        uint8_t jump[JUMP_BYTES];
        uintptr_t to = (uintptr_t)stubs[k];
        jump[0] = 0xff; // jmp *0(%rip)
        jump[1] = 0x25;
        for (unsigned b = 2; b < 6; b++)
            jump[b] = 0;
        for (unsigned b = 0; b < 8; b++)
            jump[6 + b] = (uint8_t)(to >> (8 * b));
        copy_bytes(fn, jump, JUMP_BYTES);
        text_sealed(fn, JUMP_BYTES);
        e->fn = fn;
    }
}

static void arm(void) {
    const struct link_map *exe = main_map_if_preloaded();
    dynsyms_t d;
    if (!exe || !dynsyms_of(exe, &d))
        return;
    const ElfW(Sym) *own = lookup(&d, "malloc");
    arm_module(exe, &d);
    if (own && own->st_shndx != SHN_UNDEF && own->st_value)
        return; // the executable's malloc is the program's, armed or not
    // A library preloaded ahead of this module (LD_PRELOAD="libjemalloc.so.2 libheapprof.so",
    // glibc's libc_malloc_debug.so) gets the program's calls of malloc, this module none of
    // them: its entries are armed as the executable's are, so that what other libraries'
    // constructors allocate through it before set-up is seen (libstdc++'s first block).
    for (const struct link_map *m = exe->l_next; m && m->l_ld != _DYNAMIC; m = m->l_next) {
        if (!dynsyms_of(m, &d))
            continue;
        const ElfW(Sym) *s = lookup(&d, "malloc");
        if (s && s->st_shndx != SHN_UNDEF && s->st_value) {
            arm_module(m, &d);
            return;
        }
    }
}

static void early_nothing(void) {}

static void (*early_resolve(void))(void) {
    arm();
    return early_nothing;
}

// An IFUNC whose address this module keeps: its resolver runs while the loader relocates us.
static void early_anchor_fn(void) __attribute__((ifunc("early_resolve")));
__attribute__((used)) static void (*const early_anchor)(void) = early_anchor_fn;

#endif
