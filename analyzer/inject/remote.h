// SPDX-License-Identifier: MIT
// Borrowing one thread of another process with ptrace to call a function there
// (x86-64): seize a thread that stands at a safe point, save its registers, run
// `fn(args)` on its stack with a return address of 0 (the return faults, which
// stops it again), read the result, put the registers back and let it go. No
// gdb; the other threads run on. A signal that arrives for the borrowed thread
// meanwhile is held and handed back when the thread is let go.
#ifndef HEAPPROF_ANALYZER_INJECT_REMOTE_H
#define HEAPPROF_ANALYZER_INJECT_REMOTE_H

#include "core/errmsg.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/user.h>

typedef struct remote {
    pid_t pid, tid;                // the process and the thread borrowed
    struct user_regs_struct saved; // its registers when it stopped
    int pending_sig;               // a signal held while borrowed, handed back at release
    uint64_t scratch;              // bottom of the stack area strings are written into
    uint64_t scratch_top;          // below the thread's red zone
    bool held;
} remote_t;

// Seizes a thread of pid that is at a safe point to call into libc: blocked in
// a system call that holds no allocator lock (sleep, poll, read, accept, wait,
// ...), or running outside libc and the dynamic loader. Tries each thread for
// up to ~2 s. libc_lo/hi and ld_lo/hi: the executable ranges to avoid. -1 with
// err set (ptrace refused: the reason, with ptrace_scope's value where it is
// the cause).
int remote_borrow(remote_t *r, pid_t pid, errmsg_t *err);

// Copies n bytes into the borrowed thread's scratch area (below its stack
// pointer), 16-byte aligned; *at gets their address in the target. -1 when the
// area (4 KiB) is full.
int remote_push(remote_t *r, const void *data, size_t n, uint64_t *at, errmsg_t *err);

// Calls fn(a[0..5]) on the borrowed thread; *ret gets rax. Waits up to
// timeout_ms. -1 with err set if the call faulted or did not return (the
// registers are put back either way).
int remote_call(remote_t *r, uint64_t fn, const uint64_t a[6], uint64_t *ret, int timeout_ms,
                errmsg_t *err);

// Reads n bytes of the target's memory (process_vm_readv). -1 on failure.
int remote_read(pid_t pid, uint64_t addr, void *out, size_t n);

// Puts the registers back and lets the thread go (with the held signal, if
// any).
void remote_release(remote_t *r);

#endif
