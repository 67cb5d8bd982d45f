// SPDX-License-Identifier: MIT
// The shim's top: start-up (constructor, or the first allocation), the start of each trace, fork,
// exec and exit. It drives the state (state.h) and calls every module below it; nothing but the
// entry points (interpose.c) includes this header: the lower modules reach it only through the
// hooks it registers (the record layer's trace hook).
#ifndef HEAPPROF_PRELOAD_LIFECYCLE_H
#define HEAPPROF_PRELOAD_LIFECYCLE_H

#include <stdbool.h>

// Called by an entry point while the state is still OFF: starts recording early if that is safe
// now. Returns whether recording is on. Cold.
bool hp_lifecycle_start_early(void);

// Flushes everything recorded so far before the image is replaced; waits at most ~2 s. Nothing
// in a vfork child: what it would flush and stop is the parent's.
void hp_lifecycle_before_exec(void);

// After a failed exec (the image goes on): resumes what hp_lifecycle_before_exec stopped (timer
// sampling). errno preserved. Cold.
void hp_lifecycle_exec_failed(void);

// Around unshare and setns calls that the kernel refuses to a process with more than one thread
// (a new user namespace; entering a user, mount or time namespace): begin stops the shim's
// threads (the sampler, the flusher, the pipeline's workers) and waits until the kernel no
// longer counts them; end starts them again. Recording goes on meanwhile (a full ring is drained
// by its owner). begin returns false where it stopped nothing: then end must not be called.
// Never inside the shim or in a vfork or raw clone child. Cold; end preserves errno.
bool hp_lifecycle_solo_begin(void);
void hp_lifecycle_solo_end(void);

// pthread_exit: where the main thread calls it, the process must end when the program's last
// thread does, whatever threads of ours are left (writer.h, hp_writer_main_thread_gone). Cold.
void hp_lifecycle_pthread_exit(void);

// _exit/_Exit: the exit flush and trailer the destructor would write, which _exit skips; does
// nothing in a vfork child (the parent's writer is not its own) or where this thread is inside
// the shim (a signal handler interrupted it). Waits for the writer. Cold.
void hp_lifecycle_before_exit_now(void);

// Whether this is a vfork child (or another clone sharing the memory of the image that set the
// shim up): getpid() is not the pid recorded at set-up or by the last fork handler. Such a child
// must touch nothing the parent owns. Cold (a system call).
bool hp_lifecycle_is_vfork_child(void);

// Attached mode (preload/attach.c; docs/design.md#attach): starts this process's trace at
// out_path, with CPU sampling off and nothing said on the program's stderr. False, with *why
// set to a static reason, if recording cannot start or already ran in this process. Cold.
bool hp_lifecycle_attach_start(const char *out_path, const char **why);

// Ends attached recording: state FINISHED, final flush and TRAILER, the shim's threads joined.
// The caller has already put the program's slots back. Cold; waits for the writer.
void hp_lifecycle_attach_stop(void);

#endif
