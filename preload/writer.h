// SPDX-License-Identifier: MIT
// The trace file's life: creation, start (header, META, the flusher thread), flushes on demand
// (exec), the final flush and TRAILER at exit, fork. The flusher writes the merge
// watermarks (SYNC); the records themselves go out through the pipeline (pipeline.h).
#ifndef HEAPPROF_PRELOAD_WRITER_H
#define HEAPPROF_PRELOAD_WRITER_H

#include <stdbool.h>

// Starts this process's trace: creates the file from the HEAPPROF_OUT template (%p -> pid) with
// O_EXCL|O_NOFOLLOW, mode 0600 (if the name is a file or symlink, tries NAME.1.hpt, NAME.2.hpt,
// ... and says so on stderr unless HEAPPROF_QUIET; a character device at the name, /dev/null, is
// opened as is; anything else there, a FIFO, directory or terminal, is refused), writes the file
// header (start: hp_state_start_ns) and the META chunk (PROCESS, the module map now)
// synchronously, starts the flusher thread and says where the trace goes (unless quiet). Returns
// false, after saying why on stderr where the file could not be made, if any step fails. Cold.
bool hp_writer_start(void);

bool hp_writer_running(void);

// Asks the writer to write everything recorded so far (then a TRAILER if with_trailer: the image
// is about to be replaced) and waits for it (at most ~2 s).
void hp_writer_flush_sync(bool with_trailer);

// Final flush, TRAILER, close. Waits for the writer thread to finish. Call once recording is off.
void hp_writer_stop(void);

// The process is to be single-threaded for a moment (lifecycle.c: unshare(CLONE_NEWUSER) and
// setns into a user or mount namespace refuse a process with more than one thread): stops the
// flusher and the pipeline's workers and waits for them, the trace left open; rings that fill
// meanwhile are drained by their owners. Returns how many threads ended (0: the writer does
// not run, and hp_writer_resume must not be called). Cold.
unsigned hp_writer_pause(void);
// After a pause: starts the flusher again (it starts workers as they are needed). If the thread
// cannot start, the trace ends here, complete, and profiling stops. Cold.
void hp_writer_resume(void);

// The shim's threads that are not the writer's (the CPU sampler, lifecycle.c registers it):
// how many run, and a pause that ends them (returns how many ended). Set once, before the
// first trace.
typedef struct hp_writer_others {
    unsigned (*count)(void);
    unsigned (*pause)(void);
} hp_writer_others_t;
void hp_writer_set_others(const hp_writer_others_t *o);

// The main thread called pthread_exit: the process ends when its last thread does, and the
// shim's threads must not be that. From now on the flusher watches the kernel's thread count;
// once only the shim's threads are left it ends the workers and the sampler and returns, and
// glibc calls exit(0) on it (the exit handlers and the trace's end run there). Cold.
void hp_writer_main_thread_gone(void);

// fork: the child must not touch the parent's file or thread.
void hp_writer_fork_prepare(void);
void hp_writer_fork_parent(void);
void hp_writer_fork_child(void);

#endif
