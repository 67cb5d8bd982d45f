// SPDX-License-Identifier: MIT
// ptrace function calls in another process (remote.h). x86-64 only: the
// registers and the calling convention are that ABI's. The syscall-restart rule
// matters: a thread stopped inside a system call has orig_rax >= 0 and rax =
// -ERESTART*, and the kernel restarts the call when it resumes with those
// registers; the borrowed call runs with orig_rax = -1 so nothing is restarted
// in the middle of it, and the saved registers restore the original call
// exactly.
#include "inject/remote.h"

#include "inject/target.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define SCRATCH_BYTES 4096u
#define RED_ZONE 128u

int remote_read(pid_t pid, uint64_t addr, void *out, size_t n) {
    struct iovec local = {out, n}, remote = {(void *)(uintptr_t)addr, n};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static int remote_write(pid_t pid, uint64_t addr, const void *data, size_t n) {
    struct iovec local = {(void *)data, n}, remote = {(void *)(uintptr_t)addr, n};
    return process_vm_writev(pid, &local, 1, &remote, 1, 0) == (ssize_t)n ? 0 : -1;
}

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static long ptrace_scope(void) {
    FILE *f = fopen("/proc/sys/kernel/yama/ptrace_scope", "r");
    long v = -1;
    if (f) {
        if (fscanf(f, "%ld", &v) != 1)
            v = -1;
        fclose(f);
    }
    return v;
}

static void seize_refused(pid_t pid, int e, errmsg_t *err) {
    long scope = ptrace_scope();
    if (e == EPERM && scope == 1)
        errmsg_set(
            err,
            "ptrace of process %d refused: kernel.yama.ptrace_scope is 1 (only a parent may "
            "trace); run heapprof as root or set it to 0 (sysctl kernel.yama.ptrace_scope=0)",
            (int)pid);
    else if (e == EPERM && scope == 2)
        errmsg_set(err,
                   "ptrace of process %d refused: kernel.yama.ptrace_scope is 2 (admin only); run "
                   "heapprof as root (CAP_SYS_PTRACE)",
                   (int)pid);
    else if (e == EPERM && scope == 3)
        errmsg_set(err,
                   "ptrace of process %d refused: kernel.yama.ptrace_scope is 3 (no attaching "
                   "until reboot); restart the program under `heapprof run`",
                   (int)pid);
    else if (e == EPERM)
        errmsg_set(
            err,
            "ptrace of process %d refused (not permitted: another user's process, a setuid "
            "program, or a seccomp/container policy); run heapprof as the program's owner or root",
            (int)pid);
    else
        errmsg_set(err, "ptrace of process %d failed: %s", (int)pid, strerror(e));
}

// Waits for the seized thread's next stop. Returns the stop's signal (SIGTRAP
// for our interrupt), 0 if it exited, -1 on timeout.
static int wait_stop(pid_t tid, int timeout_ms, int *status_out) {
    for (int waited = 0;; waited++) {
        int status;
        pid_t w = waitpid(tid, &status, __WALL | WNOHANG);
        if (w == tid) {
            *status_out = status;
            if (WIFEXITED(status) || WIFSIGNALED(status))
                return 0;
            if (WIFSTOPPED(status))
                return WSTOPSIG(status);
        } else if (w < 0 && errno != EINTR) {
            return 0;
        }
        if (waited >= timeout_ms)
            return -1;
        sleep_ms(1);
    }
}

// Whether a stopped thread may call into libc now. Blocked in one of these
// system calls it holds no allocator or loader lock (a thread in futex may; one
// in mmap/brk is inside malloc).
static bool is_safe_syscall(long nr) {
    static const long safe[] = {
        SYS_read,          SYS_poll,        SYS_select,  SYS_nanosleep,       SYS_pause,
        SYS_accept,        SYS_recvfrom,    SYS_recvmsg, SYS_wait4,           SYS_rt_sigtimedwait,
        SYS_rt_sigsuspend, SYS_epoll_wait,  SYS_waitid,  SYS_clock_nanosleep, SYS_pselect6,
        SYS_ppoll,         SYS_epoll_pwait, SYS_accept4,
    };
    for (size_t i = 0; i < sizeof safe / sizeof safe[0]; i++)
        if (nr == safe[i])
            return true;
    return false;
}

typedef struct range {
    uint64_t lo, hi;
} range_t;

// Executable mappings of libc and the dynamic loader: a thread running there
// may hold their locks.
static size_t unsafe_ranges(pid_t pid, range_t *out, size_t cap) {
    char maps[64], line[PATH_MAX + 256];
    snprintf(maps, sizeof maps, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(maps, "r");
    size_t n = 0;
    while (f && fgets(line, sizeof line, f) && n < cap) {
        uint64_t lo, hi;
        char perms[8];
        if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %7s", &lo, &hi, perms) == 3 && perms[2] == 'x' &&
            (strstr(line, "/libc.so") || strstr(line, "/ld-linux")))
            out[n++] = (range_t){lo, hi};
    }
    if (f)
        fclose(f);
    return n;
}

// Seizes tid and stops it. 1: stopped (r filled); 0: thread gone; -1: ptrace
// refused (err).
static int seize_stop(remote_t *r, pid_t pid, pid_t tid, errmsg_t *err) {
    if (ptrace(PTRACE_SEIZE, tid, NULL, NULL) != 0) {
        if (errno == ESRCH)
            return 0;
        seize_refused(pid, errno, err);
        return -1;
    }
    r->pid = pid;
    r->tid = tid;
    r->pending_sig = 0;
    r->held = true;
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) != 0) {
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        r->held = false;
        return 0;
    }
    int status = 0;
    int sig = wait_stop(tid, 2000, &status);
    if (sig <= 0) {
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        r->held = false;
        return 0;
    }
    // A signal-delivery stop before our interrupt's stop: hold the signal, hand
    // it back later. The thread is stopped all the same, in the same place our
    // interrupt would have stopped it.
    if (!(sig == SIGTRAP && (status >> 16) == PTRACE_EVENT_STOP))
        r->pending_sig = sig;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &r->saved) != 0) {
        ptrace(PTRACE_DETACH, tid, NULL, (void *)(uintptr_t)r->pending_sig);
        r->held = false;
        return 0;
    }
    return 1;
}

static bool at_safe_point(const remote_t *r, const range_t *bad, size_t n_bad) {
    long nr = (long)r->saved.orig_rax;
    if (nr >= 0)
        return is_safe_syscall(nr);
    for (size_t i = 0; i < n_bad; i++)
        if (r->saved.rip >= bad[i].lo && r->saved.rip < bad[i].hi)
            return false;
    return true;
}

int remote_borrow(remote_t *r, pid_t pid, errmsg_t *err) {
    memset(r, 0, sizeof *r);
    range_t bad[16];
    size_t n_bad = unsafe_ranges(pid, bad, 16);
    char task[64];
    snprintf(task, sizeof task, "/proc/%d/task", (int)pid);
    for (int round = 0; round < 100; round++) {
        // the main thread first: in a server it is the one most often asleep in a
        // safe call
        pid_t tids[256];
        size_t n = 0;
        tids[n++] = pid;
        DIR *d = opendir(task);
        struct dirent *de;
        while (d && (de = readdir(d)) && n < 256) {
            pid_t t = (pid_t)atoi(de->d_name);
            if (t > 0 && t != pid)
                tids[n++] = t;
        }
        if (d)
            closedir(d);
        for (size_t i = 0; i < n; i++) {
            int rc = seize_stop(r, pid, tids[i], err);
            if (rc < 0)
                return -1;
            if (rc == 0)
                continue;
            if (at_safe_point(r, bad, n_bad)) {
                uint64_t top = (r->saved.rsp - RED_ZONE) & ~(uint64_t)15;
                r->scratch_top = top;
                r->scratch = top;
                return 0;
            }
            remote_release(r);
        }
        if (!target_alive(pid))
            break;
        sleep_ms(20);
    }
    errmsg_set(err,
               "no thread of process %d reached a safe point (blocked in sleep, poll, read or "
               "wait, or outside libc) within 2 s; try again, or restart it under `heapprof run`",
               (int)pid);
    return -1;
}

int remote_push(remote_t *r, const void *data, size_t n, uint64_t *at, errmsg_t *err) {
    uint64_t lo = (r->scratch - n) & ~(uint64_t)15;
    if (r->scratch_top - lo > SCRATCH_BYTES || remote_write(r->pid, lo, data, n) != 0) {
        errmsg_set(err, "cannot write into process %d's stack", (int)r->pid);
        return -1;
    }
    r->scratch = lo;
    *at = lo;
    return 0;
}

int remote_call(remote_t *r, uint64_t fn, const uint64_t a[6], uint64_t *ret, int timeout_ms,
                errmsg_t *err) {
    struct user_regs_struct regs = r->saved;
    // below the scratch strings, 16-byte aligned, then the return address: the
    // callee sees the stack as after a `call` (rsp % 16 == 8)
    uint64_t sp = (r->scratch - 256) & ~(uint64_t)15;
    sp -= 8;
    uint64_t zero = 0;
    if (remote_write(r->pid, sp, &zero, sizeof zero) != 0) {
        errmsg_set(err, "cannot write into process %d's stack", (int)r->pid);
        return -1;
    }
    regs.rsp = sp;
    regs.rip = fn;
    regs.rdi = a[0];
    regs.rsi = a[1];
    regs.rdx = a[2];
    regs.rcx = a[3];
    regs.r8 = a[4];
    regs.r9 = a[5];
    regs.rax = 0;
    regs.orig_rax = (unsigned long long)-1; // no syscall restart in the middle of our call
    if (ptrace(PTRACE_SETREGS, r->tid, NULL, &regs) != 0 ||
        ptrace(PTRACE_CONT, r->tid, NULL, NULL) != 0) {
        errmsg_set(err, "cannot run a call in process %d: %s", (int)r->pid, strerror(errno));
        ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved);
        return -1;
    }
    for (;;) {
        int status = 0;
        int sig = wait_stop(r->tid, timeout_ms, &status);
        if (sig == 0) {
            r->held = false;
            errmsg_set(err, "process %d died during heapprof's call into it", (int)r->pid);
            return -1;
        }
        if (sig < 0) {
            // a lock that never comes free: stop the thread and give it back its registers, so it
            // goes on where it was; what the abandoned call had done (a lock it took) stays done
            ptrace(PTRACE_INTERRUPT, r->tid, NULL, NULL);
            wait_stop(r->tid, 2000, &status);
            ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved);
            errmsg_set(err, "heapprof's call into process %d did not return within %d s",
                       (int)r->pid, timeout_ms / 1000);
            return -1;
        }
        struct user_regs_struct now;
        if (ptrace(PTRACE_GETREGS, r->tid, NULL, &now) != 0) {
            errmsg_set(err, "lost process %d's thread during the call", (int)r->pid);
            return -1;
        }
        if (sig == SIGSEGV && now.rip == 0) {
            *ret = now.rax;
            ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved);
            return 0;
        }
        if (sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE) {
            ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved);
            errmsg_set(err, "heapprof's call into process %d faulted (signal %d at 0x%llx)",
                       (int)r->pid, sig, (unsigned long long)now.rip);
            return -1;
        }
        // an ordinary signal for the program (or a group stop): held until we let
        // go
        if (!(sig == SIGTRAP && (status >> 16) == PTRACE_EVENT_STOP) && (status >> 16) == 0 &&
            sig != SIGSTOP && sig != SIGTSTP)
            r->pending_sig = sig;
        ptrace(PTRACE_CONT, r->tid, NULL, NULL);
    }
}

void remote_release(remote_t *r) {
    if (!r->held)
        return;
    ptrace(PTRACE_SETREGS, r->tid, NULL, &r->saved);
    ptrace(PTRACE_DETACH, r->tid, NULL, (void *)(uintptr_t)r->pending_sig);
    r->held = false;
}
