// SPDX-License-Identifier: MIT
// Attached mode's entry points (`heapprof attach PID`, docs/design.md#attach):
// the injector dlopens this module into a running program and calls
// heapprof_attach_start through ptrace; recording then goes through the
// program's GOT slots, rewritten to this module's own entry points
// (got_patch.h), and through a dlopen hook that patches modules loaded later.
// heapprof_attach_stop puts every slot back and ends the trace; the module
// stays loaded and idle, since a thread may still be returning through its
// code. Part of the module only (exported names must live outside the core's
// archive); no allocation from the host's heap.
#include "compiler.h"
#include "got_patch.h"
#include "guard.h"
#include "lifecycle.h"

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

// The allocation entry points that attached mode hooks: every one interpose.c
// records.
// "free" first: heapprof_attach_start patches it before the others (hooks[0]).
static const char *const hooked_names[] = {
    "free",          "malloc",   "calloc", "realloc", "reallocarray", "posix_memalign",
    "aligned_alloc", "memalign", "valloc", "pvalloc",
};
#define N_HOOKED (sizeof hooked_names / sizeof hooked_names[0])

static hp_got_hook_t hooks[N_HOOKED + 1]; // + dlopen
static size_t n_hooks;
static void *own_base;
static void *(*real_dlopen)(const char *, int);

// 1 while attached; the injector reads it (its address is
// heapprof_attach_start's result) to learn that `heapprof detach` or the
// program's exit ended the recording.
static _Atomic long attach_state;

// Modules loaded while attached are patched as soon as dlopen returns. The
// caller's identity is lost for a DT_RUNPATH lookup of a bare name (known
// limit, as in heaptrack's hook).
static void *hooked_dlopen(const char *file, int mode) {
    void *h = real_dlopen(file, mode);
    if (h && atomic_load(&attach_state) == 1) {
        int entered = hp_guard_enter();
        hp_got_patch(hooks, n_hooks, own_base);
        if (entered)
            hp_guard_leave();
    }
    return h;
}

static void copy_why(char *why, unsigned long why_len, const char *msg) {
    if (!why || !why_len)
        return;
    size_t n = strlen(msg);
    if (n >= why_len)
        n = why_len - 1;
    memcpy(why, msg, n);
    why[n] = '\0';
}

// Looks up this module's own definitions of the hooked names: a plain reference
// from inside a module loaded without RTLD_GLOBAL would bind to libc's.
static bool find_hooks(const char **why) {
    Dl_info info;
    void *self_addr;
    void (*self_fn)(void) = (void (*)(void))hp_lifecycle_attach_stop;
    memcpy(&self_addr, &self_fn, sizeof self_addr);
    if (!dladdr(self_addr, &info) || !info.dli_fname) {
        *why = "heapprof cannot find its own module";
        return false;
    }
    own_base = info.dli_fbase;
    void *self = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
    if (!self) {
        *why = "heapprof cannot reopen its own module";
        return false;
    }
    n_hooks = 0;
    for (size_t i = 0; i < N_HOOKED; i++) {
        void *f = dlsym(self, hooked_names[i]);
        if (f)
            hooks[n_hooks++] = (hp_got_hook_t){hooked_names[i], f};
    }
    dlclose(self); // the injector's own dlopen keeps the module loaded
    void *d = dlsym(RTLD_NEXT, "dlopen");
    if (!d)
        d = dlsym(RTLD_DEFAULT, "dlopen");
    memcpy(&real_dlopen, &d, sizeof d);
    if (real_dlopen) {
        void *hook;
        void *(*fn)(const char *, int) = hooked_dlopen;
        memcpy(&hook, &fn, sizeof hook);
        hooks[n_hooks++] = (hp_got_hook_t){"dlopen", hook};
    }
    if (n_hooks < N_HOOKED) {
        *why = "heapprof's module lacks its allocation entry points";
        return false;
    }
    return true;
}

HP_EXPORT long heapprof_attach_start(const char *out_path, char *why, unsigned long why_len);
HP_EXPORT long heapprof_attach_stop(void);

// Returns the address of the attach state word (non-zero) once recording runs
// and the slots are rewritten, or 0 with the reason in why. Called on a thread
// the injector borrowed.
long heapprof_attach_start(const char *out_path, char *why, unsigned long why_len) {
    const char *reason = NULL;
    if (atomic_load(&attach_state) == 1) {
        copy_why(why, why_len, "heapprof is already attached to this process");
        return 0;
    }
    // our own lookups and set-up are not the program's events
    int entered = hp_guard_enter();
    bool ok = find_hooks(&reason) && hp_lifecycle_attach_start(out_path, &reason);
    if (ok) {
        atomic_store(&attach_state, 1);
        // free first: a block recorded by a patched malloc must never be freed through a slot
        // not patched yet (it would stay "live" in the trace); a block allocated before is an
        // unknown free, which the analyzer expects. Detach undoes it in the other order.
        size_t n = hp_got_patch(hooks, 1, own_base);
        n += hp_got_patch(hooks + 1, n_hooks - 1, own_base);
        if (n == 0) {
            // nothing calls the allocator through a slot: recording would show nothing
            hp_got_restore(NULL);
            hp_lifecycle_attach_stop();
            atomic_store(&attach_state, 2);
            reason = "no loaded module calls malloc through a GOT slot";
            ok = false;
        }
    }
    if (entered)
        hp_guard_leave();
    if (!ok) {
        copy_why(why, why_len, reason ? reason : "unknown failure");
        return 0;
    }
    return (long)(uintptr_t)&attach_state;
}

// Puts every slot back, then writes the rest of the trace and its TRAILER and
// joins the shim's threads. Returns the number of slots put back, or -1 if not
// attached.
long heapprof_attach_stop(void) {
    long expected = 1;
    if (!atomic_compare_exchange_strong(&attach_state, &expected, 2))
        return -1;
    int entered = hp_guard_enter();
    size_t n = hp_got_restore(hooks[0].hook); // the allocation slots first, free's last
    n += hp_got_restore(NULL);
    hp_lifecycle_attach_stop();
    if (entered)
        hp_guard_leave();
    return (long)n;
}
