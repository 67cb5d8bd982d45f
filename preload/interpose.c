// SPDX-License-Identifier: MIT
// Every exported libc entry point: guard, call the real function, record. No logic of its own:
// the real result and errno reach the caller untouched; recording happens after an allocation
// returns and before a free runs (docs/trace-format.md#records).
#include "compiler.h"
#include "cpu_timer.h"
#include "format/hpt_format.h"
#include "guard.h"
#include "lifecycle.h"
#include "real.h"
#include "record.h"
#include "state.h"

#include <errno.h>
#include <malloc.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

extern char **environ;

// True when this call should be recorded; otherwise the caller passes straight through. here:
// the entry point's frame (HP_GUARD_HERE), which it stores in the guard when it records.
static inline int should_record(uintptr_t here) {
    if (HP_LIKELY(!hp_tls_guard && hp_state_is_on()))
        return 1;
    if (hp_tls_guard) // nested, or the holder was abandoned by a longjmp (guard.h)
        return hp_record_guard_slow(here);
    return atomic_load_explicit(&hp_state, memory_order_relaxed) == HP_STATE_OFF &&
           hp_lifecycle_start_early();
}

// Before the real functions are known (dlsym is running), serve from the bootstrap arena.
static inline int ready(void) {
    return HP_LIKELY(hp_real.free != NULL) || hp_real_resolve();
}

HP_EXPORT void *malloc(size_t n) {
    if (!ready())
        return hp_real_boot_alloc(n, 16);
    if (!should_record(HP_GUARD_HERE()))
        return hp_real.malloc(n);
    hp_tls_guard = HP_GUARD_HERE();
    void *p = hp_real.malloc(n);
    if (p) {
        int e = errno;
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        hp_record_alloc(HPT_REC_MALLOC, p, n, 0, &from);
        errno = e;
    }
    hp_tls_guard = 0;
    return p;
}

HP_EXPORT void free(void *p) {
    if (!p || hp_real_is_boot(p))
        return;
    if (!ready())
        return; // cannot happen: only the boot arena exists before resolution
    if (!should_record(HP_GUARD_HERE())) {
        hp_real.free(p);
        return;
    }
    hp_tls_guard = HP_GUARD_HERE();
    int e = errno;
    hp_record_free(p);
    errno = e;
    hp_real.free(p);
    hp_tls_guard = 0;
}

HP_EXPORT void *calloc(size_t n, size_t m) {
    if (!ready()) {
        size_t total;
        if (__builtin_mul_overflow(n, m, &total))
            return NULL;
        return hp_real_boot_alloc(total, 16); // static memory: already zero
    }
    if (!should_record(HP_GUARD_HERE()))
        return hp_real.calloc(n, m);
    hp_tls_guard = HP_GUARD_HERE();
    void *p = hp_real.calloc(n, m);
    if (p) {
        int e = errno;
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        hp_record_alloc(HPT_REC_CALLOC, p, n * m, 0, &from);
        errno = e;
    }
    hp_tls_guard = 0;
    return p;
}

// realloc of a bootstrap block: move it into the real heap (the arena never frees).
static void *realloc_from_boot(void *old, size_t n) {
    void *p = malloc(n);
    if (p) {
        size_t have = hp_real_boot_size(old);
        memcpy(p, old, have < n ? have : n);
    }
    return p;
}

HP_EXPORT void *realloc(void *old, size_t n) {
    if (!ready()) {
        void *p = hp_real_boot_alloc(n, 16);
        if (p && old)
            memcpy(p, old, hp_real_boot_size(old) < n ? hp_real_boot_size(old) : n);
        return p;
    }
    if (old && hp_real_is_boot(old))
        return realloc_from_boot(old, n);
    if (!should_record(HP_GUARD_HERE()))
        return hp_real.realloc(old, n);
    hp_tls_guard = HP_GUARD_HERE();
    int e = errno;
    size_t old_usable;
    uint64_t t0 = hp_record_realloc_begin(old, &old_usable);
    errno = e;
    void *p = hp_real.realloc(old, n);
    e = errno;
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    hp_record_realloc_end(t0, old_usable, old, p, n, &from);
    errno = e;
    hp_tls_guard = 0;
    return p;
}

HP_EXPORT void *reallocarray(void *old, size_t n, size_t m) {
    size_t total;
    if (!ready() || (old && hp_real_is_boot(old))) {
        if (__builtin_mul_overflow(n, m, &total)) {
            errno = ENOMEM;
            return NULL;
        }
        return realloc(old, total);
    }
    if (!should_record(HP_GUARD_HERE()))
        return hp_real.reallocarray(old, n, m);
    hp_tls_guard = HP_GUARD_HERE();
    int e = errno;
    size_t old_usable;
    uint64_t t0 = hp_record_realloc_begin(old, &old_usable);
    errno = e;
    void *p = hp_real.reallocarray(old, n, m);
    e = errno;
    hp_frame_t from;
    HP_CALLER_FRAME(from);
    // on overflow the real call fails and records nothing, so n * m is exact here
    hp_record_realloc_end(t0, old_usable, old, p,
                          p || !__builtin_mul_overflow(n, m, &total) ? n * m : 1, &from);
    errno = e;
    hp_tls_guard = 0;
    return p;
}

HP_EXPORT int posix_memalign(void **out, size_t align, size_t n) {
    if (!ready()) {
        void *p = hp_real_boot_alloc(n, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    if (!should_record(HP_GUARD_HERE()))
        return hp_real.posix_memalign(out, align, n);
    hp_tls_guard = HP_GUARD_HERE();
    int rc = hp_real.posix_memalign(out, align, n);
    if (rc == 0) {
        // keep errno as the real call left it: glibc's sets ENOMEM as a side effect on failure
        int e = errno;
        hp_frame_t from;
        HP_CALLER_FRAME(from);
        hp_record_alloc(HPT_REC_ALIGNED, *out, n, align, &from);
        errno = e;
    }
    hp_tls_guard = 0;
    return rc;
}

// aligned_alloc, memalign, valloc and pvalloc share one shape.
#define ALIGNED_ENTRY(name, params, args, align_expr)                                              \
    HP_EXPORT void *name params {                                                                  \
        if (!ready())                                                                              \
            return hp_real_boot_alloc(n, (align_expr));                                            \
        if (!should_record(HP_GUARD_HERE()))                                                       \
            return hp_real.name args;                                                              \
        hp_tls_guard = HP_GUARD_HERE();                                                            \
        void *p = hp_real.name args;                                                               \
        if (p) {                                                                                   \
            int e = errno;                                                                         \
            hp_frame_t from;                                                                       \
            HP_CALLER_FRAME(from);                                                                 \
            hp_record_alloc(HPT_REC_ALIGNED, p, n, (align_expr), &from);                           \
            errno = e;                                                                             \
        }                                                                                          \
        hp_tls_guard = 0;                                                                          \
        return p;                                                                                  \
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
