// SPDX-License-Identifier: MIT
// The attach and detach sequences (inject.h). Each step that changed the target
// has its undo on the failure paths below: the borrowed thread is always
// released, a library loaded for a recording that did not start is closed
// again.
#include "inject/inject.h"

#include "inject/remote.h"
#include "inject/target.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 20000
#define WHY_BYTES 512

// Copies lib_path into the target's file system (its root differs: a container)
// and returns the path the target sees it at. -1 on failure.
static int copy_into_root(pid_t pid, const char *lib_path, char *target_path, size_t cap,
                          char *local_path, size_t local_cap, errmsg_t *err) {
    snprintf(target_path, cap, "/tmp/libheapprof-attach.%d.so", (int)getpid());
    snprintf(local_path, local_cap, "/proc/%d/root%s", (int)pid, target_path);
    int in = open(lib_path, O_RDONLY | O_CLOEXEC);
    int out = open(local_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0755);
    bool ok = in >= 0 && out >= 0;
    char buf[1 << 16];
    ssize_t n;
    while (ok && (n = read(in, buf, sizeof buf)) > 0)
        ok = write(out, buf, (size_t)n) == n;
    if (in >= 0)
        close(in);
    if (out >= 0 && close(out) != 0)
        ok = false;
    if (!ok) {
        if (out >= 0)
            unlink(local_path);
        errmsg_set(err,
                   "process %d has another root directory (a container) and heapprof could not "
                   "copy its library into it (%s): %s",
                   (int)pid, local_path, strerror(errno));
        return -1;
    }
    return 0;
}

static int find_libc_fn(pid_t pid, const char *sym, uint64_t *addr, errmsg_t *err) {
    uint64_t start;
    char path[PATH_MAX], file[PATH_MAX + 64];
    if (target_find_module(pid, "/libc.so.6", NULL, &start, path, sizeof path) != 0) {
        errmsg_set(err, "process %d has no glibc (libc.so.6) loaded", (int)pid);
        return -1;
    }
    target_file_path(pid, path, start, file, sizeof file);
    return target_symbol(file, start, sym, addr, err);
}

// The text of dlerror() in the target, for the message of a failed dlopen.
static void remote_dlerror(remote_t *r, char *out, size_t cap) {
    uint64_t fn, msg = 0, a[6] = {0};
    snprintf(out, cap, "unknown reason");
    if (find_libc_fn(r->pid, "dlerror", &fn, NULL) != 0 ||
        remote_call(r, fn, a, &msg, CALL_TIMEOUT_MS, NULL) != 0 || !msg)
        return;
    char buf[512];
    for (size_t i = 0; i < sizeof buf; i++) {
        if (remote_read(r->pid, msg + i, &buf[i], 1) != 0 || !buf[i]) {
            buf[i] = '\0';
            break;
        }
        buf[sizeof buf - 1] = '\0';
    }
    buf[cap - 1 < sizeof buf ? cap - 1 : sizeof buf - 1] = '\0';
    memcpy(out, buf, strlen(buf) + 1);
}

int inject_attach(pid_t pid, const char *lib_path, const char *out_path, inject_result_t *res,
                  errmsg_t *err) {
    if (target_check(pid, err) != 0)
        return -1;
    struct stat lib_st;
    if (stat(lib_path, &lib_st) != 0) {
        errmsg_set(err, "cannot find heapprof's library %s", lib_path);
        return -1;
    }
    // The library and the trace as the target names them: the same paths, unless
    // it lives under another root (a container), which gets a copy of the library
    // and writes its trace into its own /tmp.
    char lib_target[PATH_MAX], lib_copy[PATH_MAX + 64] = "", out_target[PATH_MAX + 64];
    bool same_root = target_same_root(pid);
    uint64_t ino_of_lib = (uint64_t)lib_st.st_ino;
    if (same_root) {
        snprintf(lib_target, sizeof lib_target, "%s", lib_path);
        snprintf(out_target, sizeof out_target, "%s", out_path);
        snprintf(res->trace, sizeof res->trace, "%s", out_path);
    } else {
        if (copy_into_root(pid, lib_path, lib_target, sizeof lib_target, lib_copy, sizeof lib_copy,
                           err) != 0)
            return -1;
        snprintf(out_target, sizeof out_target, "/tmp/heapprof.%d.hpt", (int)pid);
        snprintf(res->trace, sizeof res->trace, "/proc/%d/root/tmp/heapprof.%d.hpt", (int)pid,
                 (int)pid);
    }
    // Another libheapprof.so in the process (preloaded from elsewhere, another version): two
    // shims would fight over the same slots. The same file is fine: heapprof_attach_start
    // refuses a preloaded one that records already, and starts a loaded idle one again.
    uint64_t other_start;
    char other[PATH_MAX];
    if (target_find_module(pid, "libheapprof", NULL, &other_start, other, sizeof other) == 0 &&
        target_find_module(pid, "libheapprof", &ino_of_lib, &other_start, other, sizeof other) !=
            0 &&
        same_root) {
        errmsg_set(err,
                   "process %d already has another libheapprof.so loaded (preloaded?); end that "
                   "recording instead of attaching",
                   (int)pid);
        goto fail_copy;
    }
    struct stat out_st;
    if (lstat(res->trace, &out_st) == 0) {
        errmsg_set(err, "%s exists; remove it or choose another -o", res->trace);
        goto fail_copy;
    }
    uint64_t dlopen_fn, dlclose_fn;
    if (find_libc_fn(pid, "dlopen", &dlopen_fn, err) != 0 ||
        find_libc_fn(pid, "dlclose", &dlclose_fn, err) != 0)
        goto fail_copy;

    remote_t r;
    if (remote_borrow(&r, pid, err) != 0)
        goto fail_copy;
    uint64_t lib_at, out_at, why_at, handle = 0, state = 0;
    char why[WHY_BYTES] = "";
    if (remote_push(&r, lib_target, strlen(lib_target) + 1, &lib_at, err) != 0 ||
        remote_push(&r, out_target, strlen(out_target) + 1, &out_at, err) != 0 ||
        remote_push(&r, why, sizeof why, &why_at, err) != 0)
        goto fail_release;
    uint64_t a_open[6] = {lib_at, RTLD_NOW | RTLD_LOCAL};
    if (remote_call(&r, dlopen_fn, a_open, &handle, CALL_TIMEOUT_MS, err) != 0)
        goto fail_release;
    if (!handle) {
        char msg[512];
        remote_dlerror(&r, msg, sizeof msg);
        errmsg_set(err, "process %d could not load %s: %s", (int)pid, lib_target, msg);
        goto fail_release;
    }
    if (lib_copy[0])
        unlink(lib_copy); // mapped now; nothing is left behind in the container's /tmp
    uint64_t start, start_fn;
    char mapped[PATH_MAX];
    uint64_t ino = (uint64_t)lib_st.st_ino;
    if (target_find_module(pid, "libheapprof", same_root ? &ino : NULL, &start, mapped,
                           sizeof mapped) != 0 ||
        target_symbol(lib_path, start, "heapprof_attach_start", &start_fn, err) != 0) {
        errmsg_set(err, "process %d loaded %s but heapprof cannot find it in its maps", (int)pid,
                   lib_target);
        goto fail_close;
    }
    uint64_t a_start[6] = {out_at, why_at, sizeof why};
    if (remote_call(&r, start_fn, a_start, &state, CALL_TIMEOUT_MS, err) != 0)
        goto fail_close;
    if (!state) {
        if (remote_read(pid, why_at, why, sizeof why) != 0)
            snprintf(why, sizeof why, "unknown reason");
        why[sizeof why - 1] = '\0';
        errmsg_set(err, "heapprof could not start recording in process %d: %s", (int)pid, why);
        goto fail_close;
    }
    remote_release(&r);
    res->state_addr = state;
    return 0;

fail_close:;
    // no slot was left rewritten (heapprof_attach_start undoes its own steps):
    // the library may go
    uint64_t a_close[6] = {handle}, ignored;
    remote_call(&r, dlclose_fn, a_close, &ignored, CALL_TIMEOUT_MS, NULL);
fail_release:
    remote_release(&r);
fail_copy:
    if (lib_copy[0])
        unlink(lib_copy);
    return -1;
}

int inject_detach(pid_t pid, long *n_restored, errmsg_t *err) {
    if (target_check(pid, err) != 0)
        return -1;
    uint64_t start, stop_fn;
    char mapped[PATH_MAX], file[PATH_MAX + 64];
    if (target_find_module(pid, "libheapprof", NULL, &start, mapped, sizeof mapped) != 0) {
        errmsg_set(err, "heapprof is not loaded in process %d: nothing to detach", (int)pid);
        return -1;
    }
    target_file_path(pid, mapped, start, file, sizeof file);
    if (target_symbol(file, start, "heapprof_attach_stop", &stop_fn, err) != 0)
        return -1;
    remote_t r;
    if (remote_borrow(&r, pid, err) != 0)
        return -1;
    uint64_t a[6] = {0}, ret = 0;
    int rc = remote_call(&r, stop_fn, a, &ret, CALL_TIMEOUT_MS, err);
    remote_release(&r);
    if (rc != 0)
        return -1;
    if ((long)ret < 0) {
        errmsg_set(err,
                   "heapprof is not recording in process %d (detached already, or loaded by "
                   "LD_PRELOAD): nothing to detach",
                   (int)pid);
        return -1;
    }
    *n_restored = (long)ret;
    return 0;
}

long inject_state(pid_t pid, uint64_t state_addr) {
    long v;
    return remote_read(pid, state_addr, &v, sizeof v) == 0 ? v : -1;
}
