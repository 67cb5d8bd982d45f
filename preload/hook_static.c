// SPDX-License-Identifier: MIT
// The wrappers of allocators the shim is not preloaded over (allocscan.c): what a patched entry
// jumps to, and mimalloc's mi_* names, exported so that a program importing them from
// libmimalloc binds to these first. Each one: take the guard, call the original (a trampoline,
// or the library's function), record as what it is; the original's result and errno reach the
// caller untouched. A nested call (one allocator calling another: a Rust shim calling mallocx
// calling nothing we see, or libc's malloc inside a GlobalAlloc) finds the guard held and only
// passes through, so a block is recorded once, by the outermost entry (DHAT's rule).
// In the preloaded module, with frame pointers: HP_CALLER_FRAME names the wrapper's caller.
#include "allocscan.h"
#include "compiler.h"
#include "format/hpt_format.h"
#include "guard.h"
#include "real.h"
#include "record.h"
#include "sample.h"
#include "state.h"

#include <dlfcn.h>
#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

// The guard taken for recording; false: pass straight through (nested in the shim or in another
// hooked allocator, or not recording). Always inlined: HP_GUARD_HERE names the wrapper's frame.
static inline __attribute__((always_inline)) bool enter(void) {
    if (HP_LIKELY(!hp_tls_guard && hp_state_is_on())) {
        hp_tls_guard = HP_GUARD_HERE();
        return true;
    }
    if (!hp_tls_guard || !hp_record_guard_slow(HP_GUARD_HERE()))
        return false;
    hp_tls_guard = HP_GUARD_HERE();
    return true;
}

static inline __attribute__((always_inline)) void leave(void) {
    hp_tls_guard = 0;
}

// Records block p of size bytes (nothing for NULL), then gives the guard back.
static inline __attribute__((always_inline)) void alloc_done(uint8_t tag, const void *p,
                                                             size_t size, size_t align) {
    // the sampling decision first (sample.h), as interpose.c's entry points take it
    if (p && hp_sample_alloc(size)) {
        int e = errno;
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        if (align > 16 && tag == HPT_REC_MALLOC)
            tag = HPT_REC_ALIGNED;
        hp_record_alloc_foreign(tag, p, size, tag == HPT_REC_ALIGNED ? align : 0, &from);
        errno = e;
    }
    leave();
}

static inline __attribute__((always_inline)) void free_start(const void *p) {
    if (!hp_sample_free(p))
        return;
    int e = errno;
    hp_record_free_foreign(p);
    errno = e;
}

// A free that names the block's size (and alignment, 0 if it does not): recorded with them, so
// the analyzer can tell a size that differs from the block's (a Rust Layout mismatch).
static inline __attribute__((always_inline)) void sized_free_start(const void *p, size_t size,
                                                                   size_t align) {
    if (!hp_sample_free(p))
        return;
    int e = errno;
    hp_record_free_sized_foreign(p, size, align);
    errno = e;
}

static inline __attribute__((always_inline)) uint64_t realloc_start(const void *old,
                                                                   size_t size) {
    int e = errno;
    uint64_t t0 = hp_record_realloc_begin_foreign(old, size);
    errno = e;
    return t0;
}

static inline __attribute__((always_inline)) void realloc_done(uint64_t t0, const void *old,
                                                               const void *p, size_t size) {
    int e = errno;
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    hp_record_realloc_end_foreign(t0, old, p, size, &from);
    errno = e;
    leave();
}

// A patched entry's callers may have been compiled knowing which registers the original
// clobbers (GCC's -fipa-ra, for a caller in the allocator's own translation unit): the wrappers
// clobber no general register but the return value's, whatever they call. Vector registers are
// not kept (the file is built with -mgeneral-regs-only so its own code uses none).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HOOK_ENTRY __attribute__((no_caller_saved_registers))
#else
#define HOOK_ENTRY
#endif

// One original per role: a trampoline, or (mimalloc by name) the library's function.
#define ORIG(name, ret, params) static ret(*orig_##name) params

// ---- libc's names, defined by the executable itself ------------------------------------------

ORIG(malloc, void *, (size_t));
ORIG(free, void, (void *));
ORIG(calloc, void *, (size_t, size_t));
ORIG(realloc, void *, (void *, size_t));
ORIG(posix_memalign, int, (void **, size_t, size_t));
ORIG(aligned_alloc, void *, (size_t, size_t));
ORIG(memalign, void *, (size_t, size_t));
ORIG(valloc, void *, (size_t));
ORIG(pvalloc, void *, (size_t));

HOOK_ENTRY static void *w_malloc(size_t n) {
    if (!enter())
        return orig_malloc(n);
    void *p = orig_malloc(n);
    alloc_done(HPT_REC_MALLOC, p, n, 0);
    return p;
}

HOOK_ENTRY static void w_free(void *p) {
    if (!p || !enter()) {
        orig_free(p);
        return;
    }
    free_start(p);
    orig_free(p);
    leave();
}

HOOK_ENTRY static void *w_calloc(size_t n, size_t m) {
    if (!enter())
        return orig_calloc(n, m);
    void *p = orig_calloc(n, m);
    alloc_done(HPT_REC_CALLOC, p, n * m, 0); // p: n * m did not overflow
    return p;
}

HOOK_ENTRY static void *w_realloc(void *old, size_t n) {
    if (!enter())
        return orig_realloc(old, n);
    uint64_t t0 = realloc_start(old, n);
    void *p = orig_realloc(old, n);
    realloc_done(t0, old, p, n);
    return p;
}

HOOK_ENTRY static int w_posix_memalign(void **out, size_t align, size_t n) {
    if (!enter())
        return orig_posix_memalign(out, align, n);
    int rc = orig_posix_memalign(out, align, n);
    alloc_done(HPT_REC_ALIGNED, rc == 0 ? *out : NULL, n, align);
    return rc;
}

HOOK_ENTRY static void *w_aligned_alloc(size_t align, size_t n) {
    if (!enter())
        return orig_aligned_alloc(align, n);
    void *p = orig_aligned_alloc(align, n);
    alloc_done(HPT_REC_ALIGNED, p, n, align);
    return p;
}

HOOK_ENTRY static void *w_memalign(size_t align, size_t n) {
    if (!enter())
        return orig_memalign(align, n);
    void *p = orig_memalign(align, n);
    alloc_done(HPT_REC_ALIGNED, p, n, align);
    return p;
}

// valloc and pvalloc: blocks aligned to the page, recorded as the size asked for (as DHAT and
// the shim's own valloc, interpose.c, do)
static size_t page_bytes(void) {
    static size_t page;
    if (!page) {
        long p = sysconf(_SC_PAGESIZE);
        page = p > 0 ? (size_t)p : 4096;
    }
    return page;
}

#define PAGE_WRAPPER(name)                                                                         \
    HOOK_ENTRY static void *w_##name(size_t n) {                                                   \
        if (!enter())                                                                              \
            return orig_##name(n);                                                                 \
        void *p = orig_##name(n);                                                                  \
        alloc_done(HPT_REC_ALIGNED, p, n, page_bytes());                                           \
        return p;                                                                                  \
    }
PAGE_WRAPPER(valloc)
PAGE_WRAPPER(pvalloc)

// ---- C++'s operator new and delete, defined by the executable (tcmalloc linked in) ---------------
// A failed new throws through the wrapper: the guard it held is found abandoned by the next
// entry (guard.h) and recording goes on.

ORIG(new, void *, (size_t));
ORIG(new_array, void *, (size_t));
ORIG(delete, void, (void *));
ORIG(delete_array, void, (void *));
ORIG(delete_sized, void, (void *, size_t));
ORIG(delete_array_sized, void, (void *, size_t));

#define NEW_WRAPPER(name)                                                                          \
    HOOK_ENTRY static void *w_##name(size_t n) {                                                   \
        if (!enter())                                                                              \
            return orig_##name(n);                                                                 \
        void *p = orig_##name(n);                                                                  \
        alloc_done(HPT_REC_MALLOC, p, n, 0);                                                       \
        return p;                                                                                  \
    }
NEW_WRAPPER(new)
NEW_WRAPPER(new_array)

#define DELETE_WRAPPER(name, params, args)                                                         \
    HOOK_ENTRY static void w_##name params {                                                       \
        if (!p || !enter()) {                                                                      \
            orig_##name args;                                                                      \
            return;                                                                                \
        }                                                                                          \
        free_start(p);                                                                             \
        orig_##name args;                                                                          \
        leave();                                                                                   \
    }
DELETE_WRAPPER(delete, (void *p), (p))
DELETE_WRAPPER(delete_array, (void *p), (p))
// A delete that names the block's size n (and, aligned, its alignment al).
#define SIZED_DELETE_WRAPPER(name, params, args, align)                                            \
    HOOK_ENTRY static void w_##name params {                                                       \
        if (!p || !enter()) {                                                                      \
            orig_##name args;                                                                      \
            return;                                                                                \
        }                                                                                          \
        sized_free_start(p, n, align);                                                             \
        orig_##name args;                                                                          \
        leave();                                                                                   \
    }
SIZED_DELETE_WRAPPER(delete_sized, (void *p, size_t n), (p, n), 0)
SIZED_DELETE_WRAPPER(delete_array_sized, (void *p, size_t n), (p, n), 0)

// The nothrow forms (a failure is NULL: alloc_done records nothing) and C++17's aligned ones
// (align_val_t is a size_t). The nothrow tag is a reference nothing reads: passed on as it came.
typedef struct nothrow_tag nothrow_tag_t;
ORIG(new_nothrow, void *, (size_t, const nothrow_tag_t *));
ORIG(new_array_nothrow, void *, (size_t, const nothrow_tag_t *));
ORIG(new_aligned, void *, (size_t, size_t));
ORIG(new_array_aligned, void *, (size_t, size_t));
ORIG(new_aligned_nothrow, void *, (size_t, size_t, const nothrow_tag_t *));
ORIG(new_array_aligned_nothrow, void *, (size_t, size_t, const nothrow_tag_t *));
ORIG(delete_nothrow, void, (void *, const nothrow_tag_t *));
ORIG(delete_array_nothrow, void, (void *, const nothrow_tag_t *));
ORIG(delete_aligned, void, (void *, size_t));
ORIG(delete_array_aligned, void, (void *, size_t));
ORIG(delete_sized_aligned, void, (void *, size_t, size_t));
ORIG(delete_array_sized_aligned, void, (void *, size_t, size_t));
ORIG(delete_aligned_nothrow, void, (void *, size_t, const nothrow_tag_t *));
ORIG(delete_array_aligned_nothrow, void, (void *, size_t, const nothrow_tag_t *));

#define NEW_FORM_WRAPPER(name, params, args, align)                                                \
    HOOK_ENTRY static void *w_##name params {                                                      \
        if (!enter())                                                                              \
            return orig_##name args;                                                               \
        void *p = orig_##name args;                                                                \
        alloc_done(HPT_REC_MALLOC, p, n, align);                                                   \
        return p;                                                                                  \
    }
NEW_FORM_WRAPPER(new_nothrow, (size_t n, const nothrow_tag_t *nt), (n, nt), 0)
NEW_FORM_WRAPPER(new_array_nothrow, (size_t n, const nothrow_tag_t *nt), (n, nt), 0)
NEW_FORM_WRAPPER(new_aligned, (size_t n, size_t al), (n, al), al)
NEW_FORM_WRAPPER(new_array_aligned, (size_t n, size_t al), (n, al), al)
NEW_FORM_WRAPPER(new_aligned_nothrow, (size_t n, size_t al, const nothrow_tag_t *nt),
                 (n, al, nt), al)
NEW_FORM_WRAPPER(new_array_aligned_nothrow, (size_t n, size_t al, const nothrow_tag_t *nt),
                 (n, al, nt), al)

DELETE_WRAPPER(delete_nothrow, (void *p, const nothrow_tag_t *nt), (p, nt))
DELETE_WRAPPER(delete_array_nothrow, (void *p, const nothrow_tag_t *nt), (p, nt))
DELETE_WRAPPER(delete_aligned, (void *p, size_t al), (p, al))
DELETE_WRAPPER(delete_array_aligned, (void *p, size_t al), (p, al))
DELETE_WRAPPER(delete_aligned_nothrow, (void *p, size_t al, const nothrow_tag_t *nt), (p, al, nt))
DELETE_WRAPPER(delete_array_aligned_nothrow, (void *p, size_t al, const nothrow_tag_t *nt),
               (p, al, nt))
SIZED_DELETE_WRAPPER(delete_sized_aligned, (void *p, size_t n, size_t al), (p, n, al), al)
SIZED_DELETE_WRAPPER(delete_array_sized_aligned, (void *p, size_t n, size_t al), (p, n, al), al)

// ---- Rust's allocator shims: a dealloc and a realloc carry the layout ------------------------

ORIG(rust_alloc, void *, (size_t, size_t));
ORIG(rust_dealloc, void, (void *, size_t, size_t));
ORIG(rust_realloc, void *, (void *, size_t, size_t, size_t));
ORIG(rust_alloc_zeroed, void *, (size_t, size_t));

HOOK_ENTRY static void *w_rust_alloc(size_t size, size_t align) {
    if (!enter())
        return orig_rust_alloc(size, align);
    void *p = orig_rust_alloc(size, align);
    alloc_done(HPT_REC_MALLOC, p, size, align);
    return p;
}

HOOK_ENTRY static void w_rust_dealloc(void *p, size_t size, size_t align) {
    if (!enter()) {
        orig_rust_dealloc(p, size, align);
        return;
    }
    sized_free_start(p, size, align);
    orig_rust_dealloc(p, size, align);
    leave();
}

HOOK_ENTRY static void *w_rust_realloc(void *old, size_t old_size, size_t align, size_t size) {
    if (!enter())
        return orig_rust_realloc(old, old_size, align, size);
    uint64_t t0 = realloc_start(old, size);
    void *p = orig_rust_realloc(old, old_size, align, size);
    realloc_done(t0, old, p, size);
    return p;
}

HOOK_ENTRY static void *w_rust_alloc_zeroed(size_t size, size_t align) {
    if (!enter())
        return orig_rust_alloc_zeroed(size, align);
    void *p = orig_rust_alloc_zeroed(size, align);
    alloc_done(align > 16 ? HPT_REC_ALIGNED : HPT_REC_CALLOC, p, size, align);
    return p;
}

// ---- jemalloc's mallocx family: flags hold lg(alignment) and MALLOCX_ZERO -----------------------

#define MALLOCX_LG_ALIGN_MASK 0x3f
#define MALLOCX_ZERO 0x40

ORIG(mallocx, void *, (size_t, int));
ORIG(rallocx, void *, (void *, size_t, int));
ORIG(sdallocx, void, (void *, size_t, int));
ORIG(dallocx, void, (void *, int));

static size_t mallocx_align(int flags) {
    unsigned lg = (unsigned)flags & MALLOCX_LG_ALIGN_MASK;
    return lg ? (size_t)1 << (lg < 63 ? lg : 63) : 0;
}

HOOK_ENTRY static void *w_mallocx(size_t size, int flags) {
    if (!enter())
        return orig_mallocx(size, flags);
    void *p = orig_mallocx(size, flags);
    size_t align = mallocx_align(flags);
    alloc_done(align > 16 ? HPT_REC_ALIGNED
                          : (flags & MALLOCX_ZERO) ? HPT_REC_CALLOC : HPT_REC_MALLOC,
               p, size, align);
    return p;
}

HOOK_ENTRY static void *w_rallocx(void *old, size_t size, int flags) {
    if (!enter())
        return orig_rallocx(old, size, flags);
    uint64_t t0 = realloc_start(old, size);
    void *p = orig_rallocx(old, size, flags);
    // rallocx never frees: a failure (NULL) leaves old alone, whatever the size
    realloc_done(t0, old, p, p || size ? size : 1);
    return p;
}

HOOK_ENTRY static void w_sdallocx(void *p, size_t size, int flags) {
    if (!enter()) {
        orig_sdallocx(p, size, flags);
        return;
    }
    sized_free_start(p, size, mallocx_align(flags));
    orig_sdallocx(p, size, flags);
    leave();
}

HOOK_ENTRY static void w_dallocx(void *p, int flags) {
    if (!enter()) {
        orig_dallocx(p, flags);
        return;
    }
    free_start(p);
    orig_dallocx(p, flags);
    leave();
}

// jemalloc's standard names with its prefix: as libc's above, each with its own original.
ORIG(je_malloc, void *, (size_t));
ORIG(je_calloc, void *, (size_t, size_t));
ORIG(je_realloc, void *, (void *, size_t));
ORIG(je_free, void, (void *));

HOOK_ENTRY static void *w_je_malloc(size_t n) {
    if (!enter())
        return orig_je_malloc(n);
    void *p = orig_je_malloc(n);
    alloc_done(HPT_REC_MALLOC, p, n, 0);
    return p;
}

HOOK_ENTRY static void *w_je_calloc(size_t n, size_t m) {
    if (!enter())
        return orig_je_calloc(n, m);
    void *p = orig_je_calloc(n, m);
    alloc_done(HPT_REC_CALLOC, p, n * m, 0);
    return p;
}

HOOK_ENTRY static void *w_je_realloc(void *old, size_t n) {
    if (!enter())
        return orig_je_realloc(old, n);
    uint64_t t0 = realloc_start(old, n);
    void *p = orig_je_realloc(old, n);
    realloc_done(t0, old, p, n);
    return p;
}

HOOK_ENTRY static void w_je_free(void *p) {
    if (!p || !enter()) {
        orig_je_free(p);
        return;
    }
    free_start(p);
    orig_je_free(p);
    leave();
}

// ---- mimalloc: patched in an executable, or exported here and interposed by name ---------------
// Before allocscan found the library (or in a program without it, which a library might probe
// for with a weak reference), the exports serve from libc's allocator through the shim's own
// entry points, so nothing is lost and nothing crashes.

// mimalloc's API as its mimalloc.h declares it (the shim does not need mimalloc to build)
HP_EXPORT HOOK_ENTRY void *mi_malloc(size_t n);
HP_EXPORT HOOK_ENTRY void *mi_calloc(size_t n, size_t m);
HP_EXPORT HOOK_ENTRY void *mi_zalloc(size_t n);
HP_EXPORT HOOK_ENTRY void *mi_realloc(void *p, size_t n);
HP_EXPORT HOOK_ENTRY void mi_free(void *p);
HP_EXPORT HOOK_ENTRY void *mi_malloc_aligned(size_t n, size_t align);
HP_EXPORT HOOK_ENTRY void *mi_zalloc_aligned(size_t n, size_t align);
HP_EXPORT HOOK_ENTRY void *mi_realloc_aligned(void *p, size_t n, size_t align);
HP_EXPORT HOOK_ENTRY void mi_free_size(void *p, size_t size);
HP_EXPORT HOOK_ENTRY void mi_free_aligned(void *p, size_t align);
HP_EXPORT HOOK_ENTRY void mi_free_size_aligned(void *p, size_t size, size_t align);

ORIG(mi_malloc, void *, (size_t));
ORIG(mi_calloc, void *, (size_t, size_t));
ORIG(mi_zalloc, void *, (size_t));
ORIG(mi_realloc, void *, (void *, size_t));
ORIG(mi_free, void, (void *));
ORIG(mi_malloc_aligned, void *, (size_t, size_t));
ORIG(mi_zalloc_aligned, void *, (size_t, size_t));
ORIG(mi_realloc_aligned, void *, (void *, size_t, size_t));
ORIG(mi_free_size, void, (void *, size_t));
ORIG(mi_free_aligned, void, (void *, size_t));
ORIG(mi_free_size_aligned, void, (void *, size_t, size_t));

// The library's functions, looked up past this module the first time an export is called before
// allocscan set them (a library's constructor that runs before the shim's). False: there is no
// mimalloc in the process.
static bool mi_resolve(void) {
    static _Atomic int state; // 0 not looked, 1 found, 2 absent
    int st = atomic_load_explicit(&state, memory_order_acquire);
    if (st)
        return st == 1;
    int entered = hp_guard_enter(); // dlsym may allocate: not the program's
    // POSIX: dlsym's pointer converts to a function pointer; ISO C does not say so: copy bits
#define LOOK(name)                                                                                 \
    do {                                                                                           \
        void *sym_ = dlsym(RTLD_NEXT, #name);                                                      \
        memcpy(&orig_##name, &sym_, sizeof sym_);                                                  \
    } while (0)
    if (!orig_mi_malloc) {
        LOOK(mi_calloc);
        LOOK(mi_zalloc);
        LOOK(mi_realloc);
        LOOK(mi_free);
        LOOK(mi_malloc_aligned);
        LOOK(mi_zalloc_aligned);
        LOOK(mi_realloc_aligned);
        LOOK(mi_free_size);
        LOOK(mi_free_aligned);
        LOOK(mi_free_size_aligned);
        LOOK(mi_malloc); // last: the others are set when this one is
    }
#undef LOOK
    if (entered)
        hp_guard_leave();
    bool found = orig_mi_malloc != NULL;
    atomic_store_explicit(&state, found ? 1 : 2, memory_order_release);
    return found;
}

static void *libc_aligned(size_t size, size_t align, bool zero) {
    void *p = NULL;
    if (posix_memalign(&p, align < sizeof(void *) ? sizeof(void *) : align, size) != 0)
        return NULL;
    if (zero)
        memset(p, 0, size);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_malloc(size_t n) {
    if (!orig_mi_malloc && (!mi_resolve() || !orig_mi_malloc))
        return malloc(n);
    if (!enter())
        return orig_mi_malloc(n);
    void *p = orig_mi_malloc(n);
    alloc_done(HPT_REC_MALLOC, p, n, 0);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_calloc(size_t n, size_t m) {
    if (!orig_mi_calloc && (!mi_resolve() || !orig_mi_calloc))
        return calloc(n, m);
    if (!enter())
        return orig_mi_calloc(n, m);
    void *p = orig_mi_calloc(n, m);
    alloc_done(HPT_REC_CALLOC, p, n * m, 0);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_zalloc(size_t n) {
    if (!orig_mi_zalloc && (!mi_resolve() || !orig_mi_zalloc))
        return calloc(1, n);
    if (!enter())
        return orig_mi_zalloc(n);
    void *p = orig_mi_zalloc(n);
    alloc_done(HPT_REC_CALLOC, p, n, 0);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_realloc(void *old, size_t n) {
    if (!orig_mi_realloc && (!mi_resolve() || !orig_mi_realloc))
        return realloc(old, n);
    if (!enter())
        return orig_mi_realloc(old, n);
    uint64_t t0 = realloc_start(old, n);
    void *p = orig_mi_realloc(old, n);
    realloc_done(t0, old, p, n);
    return p;
}

HP_EXPORT HOOK_ENTRY void mi_free(void *p) {
    if (!orig_mi_free && (!mi_resolve() || !orig_mi_free)) {
        free(p);
        return;
    }
    if (!p || !enter()) {
        orig_mi_free(p);
        return;
    }
    free_start(p);
    orig_mi_free(p);
    leave();
}

HP_EXPORT HOOK_ENTRY void *mi_malloc_aligned(size_t n, size_t align) {
    if (!orig_mi_malloc_aligned && (!mi_resolve() || !orig_mi_malloc_aligned))
        return libc_aligned(n, align, false);
    if (!enter())
        return orig_mi_malloc_aligned(n, align);
    void *p = orig_mi_malloc_aligned(n, align);
    alloc_done(HPT_REC_MALLOC, p, n, align);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_zalloc_aligned(size_t n, size_t align) {
    if (!orig_mi_zalloc_aligned && (!mi_resolve() || !orig_mi_zalloc_aligned))
        return libc_aligned(n, align, true);
    if (!enter())
        return orig_mi_zalloc_aligned(n, align);
    void *p = orig_mi_zalloc_aligned(n, align);
    alloc_done(align > 16 ? HPT_REC_ALIGNED : HPT_REC_CALLOC, p, n, align);
    return p;
}

HP_EXPORT HOOK_ENTRY void *mi_realloc_aligned(void *old, size_t n, size_t align) {
    if (!orig_mi_realloc_aligned && (!mi_resolve() || !orig_mi_realloc_aligned)) {
        if (align <= 16)
            return realloc(old, n);
        void *p = libc_aligned(n, align, false);
        if (p && old) {
            size_t have = malloc_usable_size(old);
            memcpy(p, old, have < n ? have : n);
            free(old);
        }
        return p;
    }
    if (!enter())
        return orig_mi_realloc_aligned(old, n, align);
    uint64_t t0 = realloc_start(old, n);
    void *p = orig_mi_realloc_aligned(old, n, align);
    realloc_done(t0, old, p, n);
    return p;
}

HP_EXPORT HOOK_ENTRY void mi_free_size(void *p, size_t size) {
    if (!orig_mi_free_size && (!mi_resolve() || !orig_mi_free_size)) {
        free(p);
        return;
    }
    if (!p || !enter()) {
        orig_mi_free_size(p, size);
        return;
    }
    sized_free_start(p, size, 0);
    orig_mi_free_size(p, size);
    leave();
}

HP_EXPORT HOOK_ENTRY void mi_free_aligned(void *p, size_t align) {
    if (!orig_mi_free_aligned && (!mi_resolve() || !orig_mi_free_aligned)) {
        free(p);
        return;
    }
    if (!p || !enter()) {
        orig_mi_free_aligned(p, align);
        return;
    }
    free_start(p);
    orig_mi_free_aligned(p, align);
    leave();
}

HP_EXPORT HOOK_ENTRY void mi_free_size_aligned(void *p, size_t size, size_t align) {
    if (!orig_mi_free_size_aligned && (!mi_resolve() || !orig_mi_free_size_aligned)) {
        free(p);
        return;
    }
    if (!p || !enter()) {
        orig_mi_free_size_aligned(p, size, align);
        return;
    }
    sized_free_start(p, size, align);
    orig_mi_free_size_aligned(p, size, align);
    leave();
}

// ---- the loader's notice that modules were added: new allocators to look for ---------------------

HOOK_ENTRY static void w_dl_state(void) {
    hp_allocscan_dl_state();
}

// ---- the table allocscan.c patches from ----------------------------------------------------------

#define HOOK(role, name) [role] = (hp_hook_fn_t)w_##name
#define SLOT(role, name) [role] = (void *)&orig_##name

const hp_hook_table_t hp_hook_table = {
    .wrapper =
        {
            HOOK(HP_HOOK_MALLOC, malloc),
            HOOK(HP_HOOK_FREE, free),
            HOOK(HP_HOOK_CALLOC, calloc),
            HOOK(HP_HOOK_REALLOC, realloc),
            HOOK(HP_HOOK_POSIX_MEMALIGN, posix_memalign),
            HOOK(HP_HOOK_ALIGNED_ALLOC, aligned_alloc),
            HOOK(HP_HOOK_MEMALIGN, memalign),
            HOOK(HP_HOOK_VALLOC, valloc),
            HOOK(HP_HOOK_PVALLOC, pvalloc),
            HOOK(HP_HOOK_NEW, new),
            HOOK(HP_HOOK_NEW_ARRAY, new_array),
            HOOK(HP_HOOK_DELETE, delete),
            HOOK(HP_HOOK_DELETE_ARRAY, delete_array),
            HOOK(HP_HOOK_DELETE_SIZED, delete_sized),
            HOOK(HP_HOOK_DELETE_ARRAY_SIZED, delete_array_sized),
            HOOK(HP_HOOK_NEW_NOTHROW, new_nothrow),
            HOOK(HP_HOOK_NEW_ARRAY_NOTHROW, new_array_nothrow),
            HOOK(HP_HOOK_NEW_ALIGNED, new_aligned),
            HOOK(HP_HOOK_NEW_ARRAY_ALIGNED, new_array_aligned),
            HOOK(HP_HOOK_NEW_ALIGNED_NOTHROW, new_aligned_nothrow),
            HOOK(HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW, new_array_aligned_nothrow),
            HOOK(HP_HOOK_DELETE_NOTHROW, delete_nothrow),
            HOOK(HP_HOOK_DELETE_ARRAY_NOTHROW, delete_array_nothrow),
            HOOK(HP_HOOK_DELETE_ALIGNED, delete_aligned),
            HOOK(HP_HOOK_DELETE_ARRAY_ALIGNED, delete_array_aligned),
            HOOK(HP_HOOK_DELETE_SIZED_ALIGNED, delete_sized_aligned),
            HOOK(HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED, delete_array_sized_aligned),
            HOOK(HP_HOOK_DELETE_ALIGNED_NOTHROW, delete_aligned_nothrow),
            HOOK(HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW, delete_array_aligned_nothrow),
            HOOK(HP_HOOK_RUST_ALLOC, rust_alloc),
            HOOK(HP_HOOK_RUST_DEALLOC, rust_dealloc),
            HOOK(HP_HOOK_RUST_REALLOC, rust_realloc),
            HOOK(HP_HOOK_RUST_ALLOC_ZEROED, rust_alloc_zeroed),
            HOOK(HP_HOOK_MALLOCX, mallocx),
            HOOK(HP_HOOK_RALLOCX, rallocx),
            HOOK(HP_HOOK_SDALLOCX, sdallocx),
            HOOK(HP_HOOK_DALLOCX, dallocx),
            HOOK(HP_HOOK_JE_MALLOC, je_malloc),
            HOOK(HP_HOOK_JE_CALLOC, je_calloc),
            HOOK(HP_HOOK_JE_REALLOC, je_realloc),
            HOOK(HP_HOOK_JE_FREE, je_free),
            [HP_HOOK_MI_MALLOC] = (hp_hook_fn_t)mi_malloc,
            [HP_HOOK_MI_CALLOC] = (hp_hook_fn_t)mi_calloc,
            [HP_HOOK_MI_ZALLOC] = (hp_hook_fn_t)mi_zalloc,
            [HP_HOOK_MI_REALLOC] = (hp_hook_fn_t)mi_realloc,
            [HP_HOOK_MI_FREE] = (hp_hook_fn_t)mi_free,
            [HP_HOOK_MI_MALLOC_ALIGNED] = (hp_hook_fn_t)mi_malloc_aligned,
            [HP_HOOK_MI_ZALLOC_ALIGNED] = (hp_hook_fn_t)mi_zalloc_aligned,
            [HP_HOOK_MI_REALLOC_ALIGNED] = (hp_hook_fn_t)mi_realloc_aligned,
            [HP_HOOK_MI_FREE_SIZE] = (hp_hook_fn_t)mi_free_size,
            [HP_HOOK_MI_FREE_ALIGNED] = (hp_hook_fn_t)mi_free_aligned,
            [HP_HOOK_MI_FREE_SIZE_ALIGNED] = (hp_hook_fn_t)mi_free_size_aligned,
        },
    .orig =
        {
            SLOT(HP_HOOK_MALLOC, malloc),
            SLOT(HP_HOOK_FREE, free),
            SLOT(HP_HOOK_CALLOC, calloc),
            SLOT(HP_HOOK_REALLOC, realloc),
            SLOT(HP_HOOK_POSIX_MEMALIGN, posix_memalign),
            SLOT(HP_HOOK_ALIGNED_ALLOC, aligned_alloc),
            SLOT(HP_HOOK_MEMALIGN, memalign),
            SLOT(HP_HOOK_VALLOC, valloc),
            SLOT(HP_HOOK_PVALLOC, pvalloc),
            SLOT(HP_HOOK_NEW, new),
            SLOT(HP_HOOK_NEW_ARRAY, new_array),
            SLOT(HP_HOOK_DELETE, delete),
            SLOT(HP_HOOK_DELETE_ARRAY, delete_array),
            SLOT(HP_HOOK_DELETE_SIZED, delete_sized),
            SLOT(HP_HOOK_DELETE_ARRAY_SIZED, delete_array_sized),
            SLOT(HP_HOOK_NEW_NOTHROW, new_nothrow),
            SLOT(HP_HOOK_NEW_ARRAY_NOTHROW, new_array_nothrow),
            SLOT(HP_HOOK_NEW_ALIGNED, new_aligned),
            SLOT(HP_HOOK_NEW_ARRAY_ALIGNED, new_array_aligned),
            SLOT(HP_HOOK_NEW_ALIGNED_NOTHROW, new_aligned_nothrow),
            SLOT(HP_HOOK_NEW_ARRAY_ALIGNED_NOTHROW, new_array_aligned_nothrow),
            SLOT(HP_HOOK_DELETE_NOTHROW, delete_nothrow),
            SLOT(HP_HOOK_DELETE_ARRAY_NOTHROW, delete_array_nothrow),
            SLOT(HP_HOOK_DELETE_ALIGNED, delete_aligned),
            SLOT(HP_HOOK_DELETE_ARRAY_ALIGNED, delete_array_aligned),
            SLOT(HP_HOOK_DELETE_SIZED_ALIGNED, delete_sized_aligned),
            SLOT(HP_HOOK_DELETE_ARRAY_SIZED_ALIGNED, delete_array_sized_aligned),
            SLOT(HP_HOOK_DELETE_ALIGNED_NOTHROW, delete_aligned_nothrow),
            SLOT(HP_HOOK_DELETE_ARRAY_ALIGNED_NOTHROW, delete_array_aligned_nothrow),
            SLOT(HP_HOOK_RUST_ALLOC, rust_alloc),
            SLOT(HP_HOOK_RUST_DEALLOC, rust_dealloc),
            SLOT(HP_HOOK_RUST_REALLOC, rust_realloc),
            SLOT(HP_HOOK_RUST_ALLOC_ZEROED, rust_alloc_zeroed),
            SLOT(HP_HOOK_MALLOCX, mallocx),
            SLOT(HP_HOOK_RALLOCX, rallocx),
            SLOT(HP_HOOK_SDALLOCX, sdallocx),
            SLOT(HP_HOOK_DALLOCX, dallocx),
            SLOT(HP_HOOK_JE_MALLOC, je_malloc),
            SLOT(HP_HOOK_JE_CALLOC, je_calloc),
            SLOT(HP_HOOK_JE_REALLOC, je_realloc),
            SLOT(HP_HOOK_JE_FREE, je_free),
            SLOT(HP_HOOK_MI_MALLOC, mi_malloc),
            SLOT(HP_HOOK_MI_CALLOC, mi_calloc),
            SLOT(HP_HOOK_MI_ZALLOC, mi_zalloc),
            SLOT(HP_HOOK_MI_REALLOC, mi_realloc),
            SLOT(HP_HOOK_MI_FREE, mi_free),
            SLOT(HP_HOOK_MI_MALLOC_ALIGNED, mi_malloc_aligned),
            SLOT(HP_HOOK_MI_ZALLOC_ALIGNED, mi_zalloc_aligned),
            SLOT(HP_HOOK_MI_REALLOC_ALIGNED, mi_realloc_aligned),
            SLOT(HP_HOOK_MI_FREE_SIZE, mi_free_size),
            SLOT(HP_HOOK_MI_FREE_ALIGNED, mi_free_aligned),
            SLOT(HP_HOOK_MI_FREE_SIZE_ALIGNED, mi_free_size_aligned),
        },
    .on_dl_state = w_dl_state,
};
