// SPDX-License-Identifier: MIT
// Every exported libc entry point: prologue (the guard, the state), call the real function,
// record. No logic of its own: the real result and errno reach the caller untouched; recording
// happens after an allocation returns and before a free runs (docs/trace-format.md#records).
#include "compiler.h"
#include "cpu_timer.h"
#include "debug.h"
#include "format/hpt_format.h"
#include "guard.h"
#include "lifecycle.h"
#include "real.h"
#include "record.h"
#include "sample.h"
#include "state.h"

#include <errno.h>
#include <linux/nsfs.h>
#include <malloc.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

// What an allocation entry point does with a call (prologue).
enum call {
    CALL_RECORD, // the guard is taken: call the real function, record, give the guard back
    CALL_PASS,   // straight to the real function: nested in the shim, or not recording
    CALL_BOOT,   // the real functions are not known yet (dlsym is running): the bootstrap arena
};

// Before the real functions are known, serve from the bootstrap arena.
static inline int ready(void) {
    return HP_LIKELY(hp_real.free != NULL) || hp_real_resolve();
}

// The one prologue of every allocation entry point (always inlined: HP_GUARD_HERE and
// HP_CALLER_FRAME then name the entry point's frame). The common case is two loads: the guard
// and the state; recording is on only once the real functions are known (lifecycle.c), so
// readiness is asked only on the way to passing through.
static inline __attribute__((always_inline)) enum call prologue(void) {
    if (HP_LIKELY(!hp_tls_guard && hp_state_is_on())) {
        HP_ASSERT(hp_real.free != NULL);
        hp_tls_guard = HP_GUARD_HERE();
        return CALL_RECORD;
    }
    if (!ready())
        return CALL_BOOT;
    if (hp_tls_guard) {
        // nested in the shim, or the holder was abandoned by a longjmp (guard.h)
        if (!hp_record_guard_slow(HP_GUARD_HERE()))
            return CALL_PASS;
    } else if (atomic_load_explicit(&hp_state, memory_order_relaxed) != HP_STATE_OFF ||
               !hp_lifecycle_start_early()) {
        return CALL_PASS; // disabled or finished, or too early to start (lifecycle.c)
    }
    HP_ASSERT(!hp_tls_guard);
    hp_tls_guard = HP_GUARD_HERE();
    return CALL_RECORD;
}

// Gives back the guard the prologue took; nothing below the entry point has kept it.
static inline __attribute__((always_inline)) void epilogue(void) {
    HP_ASSERT(hp_tls_guard == HP_GUARD_HERE());
    hp_tls_guard = 0;
}

// After the real call returned block p (NULL: nothing to record): records it, from the entry
// point's caller, with errno as the real call left it; then the epilogue.
static inline __attribute__((always_inline)) void alloc_done(uint8_t tag, const void *p,
                                                             size_t size, size_t align) {
    // the sampling decision first: an unsampled block costs no errno save and no call
    if (p && hp_sample_alloc(size)) {
        int e = errno;
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        hp_record_alloc(tag, p, size, align, &from);
        errno = e;
    }
    epilogue();
}

// Records a free, before the real one runs, with errno untouched; in sampled mode only a
// sampled block's.
static inline __attribute__((always_inline)) void free_start(const void *p) {
    if (!hp_sample_free(p))
        return;
    int e = errno;
    hp_record_free(p);
    errno = e;
}

// realloc brackets the real call (record.h); errno stays the host's on both sides.
static inline __attribute__((always_inline)) uint64_t realloc_start(const void *old, size_t n,
                                                                    size_t *old_usable) {
    int e = errno;
    uint64_t t0 = hp_record_realloc_begin(old, n, old_usable);
    errno = e;
    return t0;
}

static inline __attribute__((always_inline)) void
realloc_done(uint64_t t0, size_t old_usable, const void *old, const void *p, size_t size) {
    int e = errno;
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    hp_record_realloc_end(t0, old_usable, old, p, size, &from);
    errno = e;
    epilogue();
}

// Every allocation entry point is split in two. The exported function first asks whether
// sampled mode records nothing of this call (sample.h: hp_sample_skip_*) and if so tail-calls
// the real function: no guard, no frame, no errno, no saved registers on the path taken by all
// but about one allocation in N bytes (callgrind: bench/sampled_instr.sh). Otherwise it
// tail-calls <name>_entry, out of line, which holds the frame (HP_GUARD_HERE, HP_CALLER_FRAME):
// at -O2 that frame sits where the exported function's would (a sibling call); where the
// compiler keeps the call (-O0), the extra frame is the shim's and the unwinder drops it.

HP_NOINLINE static void *malloc_entry(size_t n) {
    enum call c = prologue();
    if (c != CALL_RECORD)
        return c == CALL_PASS ? hp_real.malloc(n) : hp_real_boot_alloc(n, 16);
    void *p = hp_real.malloc(n);
    alloc_done(HPT_REC_MALLOC, p, n, 0);
    return p;
}

HP_EXPORT void *malloc(size_t n) {
    if (hp_sample_skip_alloc(n))
        return hp_real.malloc(n);
    return malloc_entry(n);
}

HP_NOINLINE static void free_entry(void *p) {
    enum call c = prologue();
    if (c != CALL_RECORD) {
        if (c == CALL_PASS) // CALL_BOOT: before resolution every block is a boot block
            hp_real.free(p);
        return;
    }
    free_start(p);
    hp_real.free(p);
    epilogue();
}

HP_EXPORT void free(void *p) {
    if (!p || hp_real_is_boot(p))
        return;
    if (hp_sample_skip_free(p)) {
        hp_real.free(p);
        return;
    }
    free_entry(p);
}

HP_NOINLINE static void *calloc_entry(size_t n, size_t m) {
    enum call c = prologue();
    if (c != CALL_RECORD) {
        if (c == CALL_PASS)
            return hp_real.calloc(n, m);
        size_t total;
        if (__builtin_mul_overflow(n, m, &total))
            return NULL;
        return hp_real_boot_alloc(total, 16); // static memory: already zero
    }
    void *p = hp_real.calloc(n, m);
    alloc_done(HPT_REC_CALLOC, p, n * m, 0);
    return p;
}

HP_EXPORT void *calloc(size_t n, size_t m) {
    size_t bytes;
    if (!__builtin_mul_overflow(n, m, &bytes) && hp_sample_skip_alloc(bytes))
        return hp_real.calloc(n, m);
    return calloc_entry(n, m);
}

// realloc of a bootstrap block, or any realloc before the real functions are known. Cold.
HP_NOINLINE HP_COLD static void *realloc_boot(void *old, size_t n) {
    void *p = ready() ? malloc(n) : hp_real_boot_alloc(n, 16); // the arena never frees
    if (p && old) {
        size_t have = hp_real_boot_size(old);
        memcpy(p, old, have < n ? have : n);
    }
    return p;
}

HP_NOINLINE static void *realloc_entry(void *old, size_t n) {
    enum call c = prologue();
    if (c != CALL_RECORD)
        return c == CALL_PASS ? hp_real.realloc(old, n) : realloc_boot(old, n);
    size_t old_usable;
    uint64_t t0 = realloc_start(old, n, &old_usable);
    void *p = hp_real.realloc(old, n);
    realloc_done(t0, old_usable, old, p, n);
    return p;
}

HP_EXPORT void *realloc(void *old, size_t n) {
    if (HP_UNLIKELY(old && hp_real_is_boot(old)))
        return realloc_boot(old, n);
    if ((!old || hp_sample_skip_free(old)) && hp_sample_skip_alloc(n))
        return hp_real.realloc(old, n); // neither the old block nor the new one is sampled
    return realloc_entry(old, n);
}

// reallocarray of a bootstrap block, or before the real functions are known: as realloc.
HP_NOINLINE HP_COLD static void *reallocarray_boot(void *old, size_t n, size_t m) {
    size_t total;
    if (__builtin_mul_overflow(n, m, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, total);
}

HP_NOINLINE static void *reallocarray_entry(void *old, size_t n, size_t m) {
    enum call c = prologue();
    if (c != CALL_RECORD)
        return c == CALL_PASS ? hp_real.reallocarray(old, n, m) : reallocarray_boot(old, n, m);
    size_t old_usable, total;
    uint64_t t0 = realloc_start(old, __builtin_mul_overflow(n, m, &total) ? SIZE_MAX : n * m,
                                &old_usable);
    void *p = hp_real.reallocarray(old, n, m);
    // on overflow the real call fails and records nothing, so n * m is exact here
    realloc_done(t0, old_usable, old, p, p || !__builtin_mul_overflow(n, m, &total) ? n * m : 1);
    return p;
}

HP_EXPORT void *reallocarray(void *old, size_t n, size_t m) {
    if (HP_UNLIKELY(old && hp_real_is_boot(old)))
        return reallocarray_boot(old, n, m);
    size_t bytes;
    if (!__builtin_mul_overflow(n, m, &bytes) && (!old || hp_sample_skip_free(old)) &&
        hp_sample_skip_alloc(bytes))
        return hp_real.reallocarray(old, n, m);
    return reallocarray_entry(old, n, m);
}

HP_NOINLINE static int posix_memalign_entry(void **out, size_t align, size_t n) {
    enum call c = prologue();
    if (c != CALL_RECORD) {
        if (c == CALL_PASS)
            return hp_real.posix_memalign(out, align, n);
        void *p = hp_real_boot_alloc(n, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    // errno as the real call left it: glibc's sets ENOMEM as a side effect on failure
    int rc = hp_real.posix_memalign(out, align, n);
    alloc_done(HPT_REC_ALIGNED, rc == 0 ? *out : NULL, n, align);
    return rc;
}

HP_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (hp_sample_skip_alloc(n))
        return hp_real.posix_memalign(out, align, n);
    return posix_memalign_entry(out, align, n);
}

// aligned_alloc, memalign, valloc and pvalloc share one shape.
#define ALIGNED_ENTRY(name, params, args, align_expr)                                              \
    HP_NOINLINE static void *name##_entry params {                                                 \
        enum call c = prologue();                                                                  \
        if (c != CALL_RECORD)                                                                      \
            return c == CALL_PASS ? hp_real.name args : hp_real_boot_alloc(n, (align_expr));       \
        void *p = hp_real.name args;                                                               \
        alloc_done(HPT_REC_ALIGNED, p, n, (align_expr));                                           \
        return p;                                                                                  \
    }                                                                                              \
    HP_EXPORT void *name params {                                                                  \
        if (hp_sample_skip_alloc(n))                                                               \
            return hp_real.name args;                                                              \
        return name##_entry args;                                                                  \
    }

ALIGNED_ENTRY(aligned_alloc, (size_t align, size_t n), (align, n), align)
ALIGNED_ENTRY(memalign, (size_t align, size_t n), (align, n), align)
ALIGNED_ENTRY(valloc, (size_t n), (n), (size_t)sysconf(_SC_PAGESIZE))
ALIGNED_ENTRY(pvalloc, (size_t n), (n), (size_t)sysconf(_SC_PAGESIZE))

HP_EXPORT size_t malloc_usable_size(void *p) {
    if (!p)
        return 0;
    if (hp_real_is_boot(p))
        return hp_real_boot_size(p);
    if (!ready())
        return 0;
    return hp_real.malloc_usable_size(p);
}

// ---- _exit, _Exit: flush as exit does (which runs our destructor; these do not) ----------------

static _Noreturn void exit_now(int status) {
    if (ready())
        hp_lifecycle_before_exit_now();
    if (hp_real.exit_now)
        hp_real.exit_now(status);
    for (;;)
        syscall(SYS_exit_group, status);
}

HP_EXPORT _Noreturn void _exit(int status) {
    exit_now(status);
}

HP_EXPORT _Noreturn void _Exit(int status) {
    exit_now(status);
}

// ---- signals: the CPU-time timer's signal stays the shim's (cpu_timer.c) -----------------------

HP_EXPORT int sigaction(int s, const struct sigaction *act, struct sigaction *old) {
    int rc;
    if (hp_cpu_timer_sigaction(s, act, old, &rc))
        return rc;
    if (!hp_real.sigaction && !hp_real_resolve()) {
        errno = ENOSYS;
        return -1;
    }
    return hp_real.sigaction(s, act, old);
}

HP_EXPORT void (*signal(int s, void (*handler)(int)))(int) {
    // glibc's signal(): BSD semantics, the signal blocked in its own handler, calls restarted
    struct sigaction act, old;
    memset(&act, 0, sizeof act);
    act.sa_handler = handler;
    act.sa_flags = SA_RESTART;
    sigemptyset(&act.sa_mask);
    sigaddset(&act.sa_mask, s);
    int rc;
    if (s > 0 && s < NSIG && hp_cpu_timer_sigaction(s, &act, &old, &rc))
        return old.sa_handler;
    if (!hp_real.signal && !hp_real_resolve()) {
        errno = ENOSYS;
        return SIG_ERR;
    }
    return hp_real.signal(s, handler);
}

// ---- namespaces: the calls the kernel refuses to a process with more than one thread ----------
// A new user namespace (and what unshare may only do alone: CLONE_THREAD, CLONE_SIGHAND,
// CLONE_VM); entering a user, mount or time namespace. The shim's own threads stop around them
// (hp_lifecycle_solo_begin), so `unshare -U`, `nsenter -m` and sandboxes that call them run as
// without the shim.
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#define SOLO_UNSHARE (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)
#define SOLO_SETNS (CLONE_NEWUSER | CLONE_NEWNS | CLONE_NEWTIME)

HP_EXPORT int unshare(int flags) {
    bool solo = (flags & SOLO_UNSHARE) && hp_lifecycle_solo_begin();
    int rc = ready() && hp_real.unshare ? hp_real.unshare(flags)
                                        : (int)syscall(SYS_unshare, flags);
    if (solo)
        hp_lifecycle_solo_end();
    return rc;
}

HP_EXPORT int setns(int fd, int nstype) {
    int type = nstype;
    if (type == 0) { // any kind: the namespace's own (a pidfd says nothing: assume the worst)
        int e = errno;
        type = ioctl(fd, NS_GET_NSTYPE);
        errno = e;
        if (type <= 0)
            type = SOLO_SETNS;
    }
    bool solo = (type & SOLO_SETNS) && hp_lifecycle_solo_begin();
    int rc = ready() && hp_real.setns ? hp_real.setns(fd, nstype)
                                      : (int)syscall(SYS_setns, fd, nstype);
    if (solo)
        hp_lifecycle_solo_end();
    return rc;
}

// ---- pthread_exit: a main thread that ends before the others ---------------------------------
// glibc ends the process when its last thread ends; the shim's threads must not keep it alive.

HP_EXPORT void pthread_exit(void *ret) {
    hp_lifecycle_pthread_exit();
    if (ready() && hp_real.pthread_exit)
        hp_real.pthread_exit(ret);
    for (;;) // not reached: glibc's pthread_exit is always there
        syscall(SYS_exit, 0);
}

// ---- exec: flush what this image recorded; the new image starts its own trace -----------------

HP_EXPORT int execve(const char *path, char *const argv[], char *const envp[]) {
    if (!ready())
        return -1;
    hp_lifecycle_before_exec();
    int rc = hp_real.execve(path, argv, envp);
    hp_lifecycle_exec_failed(); // it returned: it failed
    return rc;
}

HP_EXPORT int execv(const char *path, char *const argv[]) {
    return execve(path, argv, environ);
}

HP_EXPORT int execvpe(const char *file, char *const argv[], char *const envp[]) {
    if (!ready())
        return -1;
    hp_lifecycle_before_exec();
    int rc = hp_real.execvpe(file, argv, envp);
    hp_lifecycle_exec_failed(); // it returned: it failed
    return rc;
}

HP_EXPORT int execvp(const char *file, char *const argv[]) {
    return execvpe(file, argv, environ);
}

HP_EXPORT int fexecve(int fd, char *const argv[], char *const envp[]) {
    if (!ready())
        return -1;
    hp_lifecycle_before_exec();
    int rc = hp_real.fexecve(fd, argv, envp);
    hp_lifecycle_exec_failed(); // it returned: it failed
    return rc;
}

// execl* collect their variadic arguments into an array; past 4096 of them, E2BIG.
#define EXECL_MAX_ARGS 4096
#define COLLECT_ARGS(first, ap, argv)                                                    \
    do {                                                                                           \
        size_t i_ = 0;                                                                             \
        argv[i_++] = (char *)(first);                                                              \
        while (argv[i_ - 1]) {                                                                     \
            if (i_ == EXECL_MAX_ARGS) {                                                            \
                va_end(ap);                                                                        \
                errno = E2BIG;                                                                     \
                return -1;                                                                         \
            }                                                                                      \
            argv[i_++] = va_arg(ap, char *);                                                       \
        }                                                                                          \
        \
    } while (0)

HP_EXPORT int execl(const char *path, const char *arg, ...) {
    char *argv[EXECL_MAX_ARGS];
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execve(path, argv, environ);
}

HP_EXPORT int execlp(const char *file, const char *arg, ...) {
    char *argv[EXECL_MAX_ARGS];
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execvpe(file, argv, environ);
}

HP_EXPORT int execle(const char *path, const char *arg, ...) {
    char *argv[EXECL_MAX_ARGS];
    char **envp = NULL;
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    envp = va_arg(ap, char **); // execle: the environment follows the terminating NULL
    va_end(ap);
    return execve(path, argv, envp);
}
