// SPDX-License-Identifier: MIT
// Lifecycle: constructor (config, real functions, trace, writer), the start of each process's
// trace, fork (the child gets its own trace on its first event), exec (flush first), exit (final
// flush and trailer). The top of the shim: it may call any module, none calls it except through
// the hooks registered here. Never aborts: failures end in a disabled state.
#include "lifecycle.h"

#include "allocscan.h"
#include "clock.h"
#include "config.h"
#include "cpu.h"
#include "diag.h"
#include "guard.h"
#include "modmap.h"
#include "pipeline.h"
#include "real.h"
#include "record.h"
#include "sample.h"
#include "stacktab.h"
#include "state.h"
#include "tbuf.h"
#include "thread.h"
#include "touch.h"
#include "unwind.h"
#include "writer.h"

#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static _Atomic bool early_started; // recording set up (maybe before our constructor ran)
static bool ctor_done;             // the constructor opened the trace (or gave up)
static bool trace_started;         // this process image has had its trace: never a second one
static pthread_mutex_t start_lock = PTHREAD_MUTEX_INITIALIZER;
static pid_t image_pid; // this image's process; a vfork child (no fork handler runs) differs
// Held from hp_lifecycle_solo_begin to its end: one thread at a time stops and restarts ours.
static pthread_mutex_t solo_lock = PTHREAD_MUTEX_INITIALIZER;
static int solo_cancel; // the cancellation state hp_lifecycle_solo_begin found (under solo_lock)
static bool solo_writer; // the writer was paused (and is resumed by hp_lifecycle_solo_end)

// Starts this process's trace (writer.c) and, with it, CPU sampling. Called with start_lock held.
static bool start_trace(void) {
    trace_started = true;
    bool ok = hp_writer_start();
    if (ok)
        hp_cpu_start(); // from this thread: the events cover the threads it creates from now
    return ok;
}

// The record layer's trace hook (hp_record_set_trace_hook): a thread's first event makes sure
// this process has an open trace and a running writer (a fork child starts its trace then).
// Returns false if profiling cannot go on. Cold; takes a lock.
static bool ensure_trace(void) {
    // Before our constructor runs, events wait in the thread's ring; the constructor opens the
    // trace and starts the writer.
    if (!ctor_done || hp_writer_running())
        return true;
    // Only a fork child starts a trace here. A thread whose first event races exit() finds
    // the writer already stopped: it must not start a second trace (and writer) that the
    // exiting thread would then wait for (docs/design.md#lifecycle).
    pthread_mutex_lock(&start_lock);
    bool ok = hp_writer_running();
    if (!ok && !trace_started && hp_state_is_on())
        ok = start_trace();
    pthread_mutex_unlock(&start_lock);
    if (!ok) {
        int on = HP_STATE_ON;
        hp_state_cas(&on, HP_STATE_DISABLED);
    }
    return ok;
}

// ---- fork, exec, exit ------------------------------------------------------------------------

// A raw child (hp_state_raw_child: made without these handlers) that forks through glibc takes
// none of the shim's locks, which a thread of its parent may have held when it was cloned, and
// its child stays a raw one. Set in prepare, read by the two others: the same in both processes.
static bool fork_skipped;

// Whether this thread runs a signal handler that interrupted the shim: its guard is held by a
// frame below (the shim's own threads hold HP_GUARD_FOREVER; outside the shim it is 0).
static bool inside_shim_below(void) {
    uintptr_t held = hp_tls_guard;
    return held && held != HP_GUARD_FOREVER;
}

static void fork_prepare(void) {
    // A fork from a signal handler that interrupted the shim on this thread (fork is
    // async-signal-safe): the frame below may hold one of the locks taken here, and taking it
    // again waited for good (a SIGALRM handler forking: half the runs hung). No lock is taken
    // and the child is left as a child made without fork handlers is: the kernel wiped its
    // copy of the state (state.h), so it passes every call through, unrecorded.
    fork_skipped = hp_state_raw_child() || inside_shim_below();
    if (fork_skipped)
        return;
    int entered = hp_guard_enter();
    // Lock order matches the other users: stacktab -> pipeline -> trace file -> ring list; none
    // is held for more than one chunk's write, so a fork never waits for a whole round. The unwinder's
    // rule lock is a leaf (held only around libdw), taken first so no thread holds it in the child.
    hp_unwind_fork_prepare();
    hp_stacktab_fork_prepare();
    hp_writer_fork_prepare();
    hp_tbuf_list_lock();
    if (entered)
        hp_guard_leave();
}

static void fork_parent(void) {
    if (fork_skipped)
        return;
    hp_tbuf_list_unlock();
    hp_writer_fork_parent();
    hp_stacktab_fork_parent();
    hp_unwind_fork_parent();
}

static void fork_child(void) {
    if (fork_skipped)
        return;
    // Only this thread survives. Whatever the parent had buffered is the parent's to write;
    // the child starts an empty trace of its own when it first allocates.
    hp_tbuf_list_unlock();
    hp_tbuf_forget_all();
    hp_writer_fork_child();
    hp_stacktab_fork_child();
    hp_unwind_fork_child();
    hp_cpu_fork_child();
    hp_modmap_reset();
    hp_record_fork_child();
    hp_sample_fork_child();
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    start_lock = fresh;
    solo_lock = fresh;
    trace_started = false;
    hp_state_set_start_ns(hp_clock_mono_ns());
    image_pid = getpid();
    // its trace says so (frees of the parent's blocks are expected) and names the parent, which
    // may be gone by the child's first allocation, when the trace starts
    hp_config.fork_parent = (uint32_t)getppid();
    // with HEAPPROF_ONLY_PID the child passes through: no trace, no thread of ours
    int on = HP_STATE_ON;
    if (hp_config.only_pid)
        hp_state_cas(&on, HP_STATE_DISABLED);
    hp_state_after_fork(); // the kernel wiped the entry points' copy of the state: back
}

void hp_lifecycle_before_exec(void) {
    // The trace of this image ends here, cleanly; if exec fails, recording simply goes on and
    // the trailer written at exit supersedes this one.
    if (hp_lifecycle_is_vfork_child() || hp_state_raw_child())
        return; // the writer and the timers are the parent's, which goes on
    int cancel = hp_nocancel_begin(); // the flush's writes (guard.h)
    hp_cpu_before_exec();
    if (hp_state_is_on())
        hp_writer_flush_sync(true);
    hp_nocancel_end(cancel);
}

// Attached mode (`heapprof attach`): the trace path the injector gave, and the settings that
// keep a program that did not ask for us as it was (no CPU-sampling signals, nothing on its
// stderr). Empty: not attached.
static char attach_out[HP_PATH_MAX];

static void apply_attach_config(void) {
    memcpy(hp_config.out, attach_out, sizeof hp_config.out);
    hp_config.quiet = true;
    hp_config.cpu = HP_CPU_OFF;
    hp_config.attached = true;
    hp_config.enabled = true;
}

// early_hook.c's, in the preloaded module on x86-64 only; weak, so that programs linking the
// core without it (the unit tests) see NULL.
extern void hp_early_hook_disarm(void) __attribute__((weak));

// Sets up recording; the first caller wins. Called by the first allocation (libraries
// initialised before ours allocate too: libstdc++'s emergency exception pool, for one) or by
// the constructor.
static void setup_recording(void) {
    if (atomic_exchange(&early_started, true))
        return;
    // The executable's entries armed before any constructor (early_hook.c) go back to what they
    // were before anything reads them, allocscan's patching first: set-up may start before any
    // of them was called (in our constructor), and a jump left there would later undo its patch.
    if (hp_early_hook_disarm)
        hp_early_hook_disarm();
    image_pid = getpid();
    // The lower layers' calls up, registered before any ring exists or any event is recorded
    // (also when profiling is off: unit tests drive the rings of a process that does not record).
    hp_pipeline_attach();
    hp_record_set_trace_hook(ensure_trace);
    static const hp_writer_others_t others = {hp_cpu_thread_count, hp_cpu_pause};
    hp_writer_set_others(&others);
    hp_real_resolve();
    hp_config_load();
    if (attach_out[0])
        apply_attach_config();
    hp_state_set_start_ns(hp_clock_mono_ns());
    hp_clock_start();
    if (!hp_config.enabled || !hp_real.malloc) {
        hp_state_set(HP_STATE_DISABLED);
        return;
    }
    hp_unwind_init();
    if (hp_config.touch)
        hp_touch_init();
    if (hp_config.sample_bytes && !hp_sample_init()) {
        hp_state_disable("out of memory for the set of sampled blocks; profiling stopped");
        return;
    }
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    // Before recording starts, with one thread: allocators the loader does not route through
    // the shim are hooked now, before the program's first call to them (allocscan.h).
    hp_allocscan_run();
    // before the state is on: a child cloned from now on without our fork handlers reads it
    // off and passes through (state.h)
    hp_state_protect();
    hp_state_set(HP_STATE_ON);
}

bool hp_lifecycle_start_early(void) {
    // Only once libc has run its early initialisation (it sets __libc_single_threaded; before
    // that, ld.so itself may be allocating) and while there is one thread, so no other thread
    // can race the set-up. Otherwise pass through until the constructor.
    if (atomic_load_explicit(&hp_state, memory_order_relaxed) != HP_STATE_OFF ||
        !__libc_single_threaded || atomic_load(&early_started))
        return hp_state_is_on();
    int entered = hp_guard_enter();
    setup_recording();
    if (entered)
        hp_guard_leave();
    return hp_state_is_on();
}

// The exported entry of attached mode, defined only in the preloaded module (attach.c); weak,
// so programs that link the core without it (the unit tests) see NULL.
extern long heapprof_attach_start(const char *out_path, char *why, unsigned long why_len)
    __attribute__((weak));

// Whether this module was loaded by dlopen (by `heapprof attach`) rather than preloaded: its
// entry points then get calls only through rewritten slots, and recording waits for the
// injector. A preloaded module is loaded before the program's own dependencies, libc among
// them; a dlopened one after. (Asking where the process's `malloc` resolves does not tell: a
// non-PIE executable that takes malloc's address defines it as its own PLT entry.)
static bool loaded_for_attach(void) {
    if (!heapprof_attach_start)
        return false;
    void *ours;
    long (*fn)(const char *, char *, unsigned long) = heapprof_attach_start;
    memcpy(&ours, &fn, sizeof ours);
    Dl_info info;
    struct link_map *self = NULL;
    if (!dladdr1(ours, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
        return false;
    for (const struct link_map *m = self->l_prev; m; m = m->l_prev)
        if (m->l_name && strstr(m->l_name, "/libc.so."))
            return true;
    return false;
}

static bool attached_before; // an attached recording ran and ended: the next one restarts

// A second attached recording in this process: a new trace file whose META chunk defines the
// stacks interned so far (threads reuse their ids) and lists every module again. Its times go
// on from the first trace's start: the threads' rings and encoders never go back in time.
static bool restart_attached(const char **why) {
    apply_attach_config();
    hp_modmap_reset();
    pthread_mutex_lock(&start_lock);
    trace_started = false;
    hp_state_set(HP_STATE_ON);
    bool ok = start_trace();
    pthread_mutex_unlock(&start_lock);
    if (!ok) {
        hp_state_set(HP_STATE_FINISHED);
        *why = "heapprof could not create the trace file";
    }
    return ok;
}

bool hp_lifecycle_attach_start(const char *out_path, const char **why) {
    int st = atomic_load(&hp_state);
    if (attached_before && st == HP_STATE_FINISHED) {
        size_t n = strlen(out_path);
        if (n == 0 || n >= sizeof attach_out) {
            *why = "the trace path is empty or too long";
            return false;
        }
        memcpy(attach_out, out_path, n + 1);
        return restart_attached(why);
    }
    if (st != HP_STATE_OFF || atomic_load(&early_started)) {
        *why = st == HP_STATE_ON ? "heapprof is already recording in this process"
                                 : "heapprof already recorded a trace in this process";
        return false;
    }
    size_t n = strlen(out_path);
    if (n == 0 || n >= sizeof attach_out) {
        *why = "the trace path is empty or too long";
        return false;
    }
    memcpy(attach_out, out_path, n + 1);
    setup_recording();
    if (!hp_state_is_on()) {
        *why = "heapprof could not set up recording (the allocator's functions were not found)";
        return false;
    }
    pthread_mutex_lock(&start_lock);
    bool ok = start_trace();
    ctor_done = true;
    pthread_mutex_unlock(&start_lock);
    if (!ok) {
        hp_state_set(HP_STATE_DISABLED);
        *why = "heapprof could not create the trace file";
        return false;
    }
    attached_before = true;
    return true;
}

void hp_lifecycle_attach_stop(void) {
    int expected = HP_STATE_ON;
    hp_state_cas(&expected, HP_STATE_FINISHED);
    if (expected == HP_STATE_ON || expected == HP_STATE_DISABLED)
        hp_writer_stop(); // final flush, TRAILER, the flusher and workers joined
}

__attribute__((constructor)) static void hp_lifecycle_init(void) {
    if (loaded_for_attach())
        return; // the injector calls heapprof_attach_start next (attach.c)
    int entered = hp_guard_enter();
    setup_recording();
    if (hp_state_is_on()) {
        pthread_mutex_lock(&start_lock);
        bool ok = start_trace();
        ctor_done = true;
        pthread_mutex_unlock(&start_lock);
        if (!ok)
            hp_state_set(HP_STATE_DISABLED);
    }
    ctor_done = true;
    if (entered)
        hp_guard_leave();
}

// Whether exit() was called from a signal handler that interrupted the shim on this thread
// (inside_shim_below): the frame below may hold a ring's drain lock, the work list's, the
// trace file's or glibc's arena lock. Ending the trace would wait on the writer's threads,
// which wait on that lock (a SIGALRM handler calling exit hung 1 run in 4), and the shim's exit
// handlers allocate (__cxa_atexit, fopencookie). The trace then ends at its last flush, as a
// killed process's does; said once.
static bool exiting_from_inside(void) {
    if (!inside_shim_below())
        return false;
    static atomic_flag said = ATOMIC_FLAG_INIT;
    if (!hp_config.quiet && !atomic_flag_test_and_set(&said))
        hp_diag_line("the program exited from inside heapprof (a signal handler that interrupted "
                     "an allocation called exit): the trace ends at its last flush",
                     (char *)NULL);
    return true;
}

// The end of recording: samples stop first, so the final flush carries the last of them; then
// recording stops, the writer flushes everything, writes the TRAILER and its threads end. Later
// frees pass through.
static void finish(void) {
    if (hp_state_raw_child())
        return; // the writer, the sampler and their threads are the parent's
    if (exiting_from_inside())
        return;
    int entered = hp_guard_enter();
    int cancel = hp_nocancel_begin(); // the trace's last writes and joins (guard.h)
    hp_cpu_stop();
    int expected = HP_STATE_ON;
    hp_state_cas(&expected, HP_STATE_FINISHED);
    if (expected == HP_STATE_ON || expected == HP_STATE_DISABLED)
        hp_writer_stop();
    hp_unwind_report();
    hp_nocancel_end(cancel);
    if (entered)
        hp_guard_leave();
}

// The very end: glibc's exit() runs the exit handlers, freeing each block of its list of them
// once its handlers have run, and then flushes every stdio stream (_IO_cleanup) before _exit.
// Handlers that libraries register in their constructors come before the program's start
// registers _dl_fini, so they sit in older blocks, which are freed after finish_late: LLVM's
// ~3,000 static destructors filled 87 such blocks (1 KiB each), left "live at exit" (clang,
// rustc; DHAT sees them freed). So finish_late leaves one byte waiting in a stream of our own,
// and the trace ends when that flush writes it: after every handler and every such free.
static char cleanup_buf[16];
static bool cleanup_armed;

static ssize_t cleanup_write(void *cookie, const char *buf, size_t n) {
    (void)cookie;
    (void)buf;
    // once only; never before finish_late, which makes the stream (no earlier fflush(NULL)
    // can reach it)
    if (cleanup_armed && !hp_lifecycle_is_vfork_child()) {
        cleanup_armed = false;
        finish();
    }
    return (ssize_t)n;
}

static bool arm_cleanup_flush(void) {
    int entered = hp_guard_enter(); // the stream is the host's malloc's: not the program's
    cookie_io_functions_t io = {.write = cleanup_write};
    FILE *f = fopencookie(NULL, "w", io);
    bool ok = f && setvbuf(f, cleanup_buf, _IOFBF, sizeof cleanup_buf) == 0;
    if (ok) {
        cleanup_armed = true;
        ok = fputc('.', f) != EOF;
        cleanup_armed = ok;
    }
    if (entered)
        hp_guard_leave();
    return ok;
}

static void finish_late(void *unused) {
    (void)unused;
    if (!hp_lifecycle_is_vfork_child() && !exiting_from_inside() && !arm_cleanup_flush())
        finish();
}

extern int __cxa_atexit(void (*fn)(void *), void *arg, void *dso);

// Our destructor runs from the dynamic loader's finalisation (_dl_fini, itself an exit
// handler), before the destructors of every library initialised before ours, the program's
// own libraries among them: they are destroyed in the reverse order of their construction and
// were constructed first. Their static objects' destructors free memory (LLVM's, a C++
// library's globals), and a trace finished here called those blocks live at exit: leaks DHAT
// does not see (`tests/e2e/progs/exit_lib.c`). So a preloaded shim asks for one more exit
// handler from here: glibc runs a handler registered while it runs them once the current one
// returns, i.e. right after _dl_fini has run every destructor. Not the dso handle of this module
// (__cxa_finalize would run it with our own destructors), and not when attached (the injector's
// module finishes in hp_lifecycle_attach_stop or here) or when the handler cannot be added.
__attribute__((destructor)) static void hp_lifecycle_fini(void) {
    // A vfork child that calls exit() (not _exit, as it should) runs the destructors in the
    // parent's memory: the recording, the writer and its threads are the parent's to end.
    if (hp_lifecycle_is_vfork_child() || exiting_from_inside())
        return;
    if (!hp_config.attached && hp_state_is_on()) {
        int entered = hp_guard_enter(); // __cxa_atexit may allocate its list
        int failed = __cxa_atexit(finish_late, NULL, NULL);
        if (entered)
            hp_guard_leave();
        if (!failed)
            return;
    }
    finish();
}

bool hp_lifecycle_is_vfork_child(void) {
    return getpid() != image_pid;
}

void hp_lifecycle_before_exit_now(void) {
    // A vfork child shares the parent's memory, writer and timers: nothing here is its to stop.
    // A signal handler that calls _exit may have interrupted the shim on this thread, holding
    // its locks: the last interval is lost rather than risk a deadlock.
    if (hp_lifecycle_is_vfork_child() || hp_tls_guard)
        return;
    finish(); // what exit() does last: the same trace
}

// ---- a moment single-threaded, for the namespace calls that refuse more threads -------------

bool hp_lifecycle_solo_begin(void) {
    if (hp_tls_guard || hp_lifecycle_is_vfork_child() || hp_state_raw_child())
        return false; // inside the shim (a signal handler), or the threads are the parent's
    (void)hp_guard_enter(); // held until hp_lifecycle_solo_end: nothing recorded meanwhile
    // and no cancellation until then: the joins and waits below, with the shim's threads
    // stopped (guard.h)
    int cancel = hp_nocancel_begin();
    pthread_mutex_lock(&solo_lock);
    solo_cancel = cancel;
    long before = hp_thread_kernel_count();
    unsigned ended = hp_cpu_pause();
    unsigned writer = hp_writer_pause();
    if (!ended && !writer) {
        pthread_mutex_unlock(&solo_lock);
        hp_nocancel_end(cancel);
        hp_guard_leave();
        return false;
    }
    // A joined thread is still counted for a moment after pthread_join returns (the kernel
    // wakes the joiner before it unlinks the thread): the call would fail in that moment.
    ended += writer;
    for (int i = 0; i < 2000 && before > 0 && hp_thread_kernel_count() > before - (long)ended; i++) {
        struct timespec ts = {0, 50000};
        nanosleep(&ts, NULL);
    }
    solo_writer = writer > 0;
    return true;
}

void hp_lifecycle_solo_end(void) {
    int e = errno;
    if (solo_writer)
        hp_writer_resume();
    hp_cpu_resume();
    int cancel = solo_cancel;
    pthread_mutex_unlock(&solo_lock);
    hp_nocancel_end(cancel);
    hp_guard_leave();
    errno = e;
}

void hp_lifecycle_pthread_exit(void) {
    if (hp_lifecycle_is_vfork_child() || hp_state_raw_child())
        return;
    if ((pid_t)syscall(SYS_gettid) == image_pid)
        hp_writer_main_thread_gone();
}

void hp_lifecycle_exec_failed(void) {
    if (hp_lifecycle_is_vfork_child())
        return;
    int e = errno;
    int entered = hp_guard_enter(); // the sampling thread's set-up is not the program's
    int cancel = hp_nocancel_begin();
    hp_cpu_exec_failed();
    hp_nocancel_end(cancel);
    if (entered)
        hp_guard_leave();
    errno = e;
}
