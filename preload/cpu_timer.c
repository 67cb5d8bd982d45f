// SPDX-License-Identifier: MIT
// CPU-time timer fallback for CPU samples. The sampling thread lists /proc/self/task and arms,
// for each thread, a POSIX timer on that thread's CPU-time clock that signals that very thread
// (SIGEV_THREAD_ID), so no pthread_create hook is needed and only running threads are
// interrupted. The handler runs on the app's threads: it saves errno, allocates nothing, takes
// no lock, computes no unwind rule and touches none of the thread's shim state (so it may
// interrupt the shim itself); it walks with the rules already known and claims a slot with one
// CAS. Limits: CPU-time
// timers fire at most at CONFIG_HZ (250/s measured here, cpu-and-flamegraph.md A.2); threads
// are found within ~20 ms of their start; the first samples of new code stop where a rule is
// missing (the sampling thread computes it for the next ones).
#include "cpu_timer.h"

#include "clock.h"
#include "guard.h"
#include "mem.h"
#include "real.h"
#include "unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <sched.h>
#include <ucontext.h>
#include <unistd.h>

// Our timers' sigev_value: this in the high 32 bits, the thread id in the low ones. A timer of
// the program's on the same signal carries its own value, so its signals are the program's.
#define OUR_VALUE_TAG 0x68707466u // "hptf"

#define N_SLOTS 1024u // power of two
#define MAX_THREADS 4096

typedef struct slot {
    _Atomic uint64_t seq; // claim index + 1 once the sample is written
    hp_cpu_tsample_t s;
} slot_t;

typedef struct tthread {
    uint32_t tid;
    int timer; // kernel timer id
    bool seen; // in the latest /proc/self/task listing
} tthread_t;

static slot_t *slots;
static _Atomic uint64_t claimed, consumed;
static _Atomic uint64_t n_lost;
static _Atomic int active;
static int sig;
static _Atomic int sig_owned; // the signal our handler keeps for good (0: none yet)
static uint64_t period;
static tthread_t threads[MAX_THREADS];
static unsigned n_threads;

// ---- the signal stays ours (docs/design.md#cpu-samples) ----------------------------------------
//
// Once picked, our handler stays installed for the rest of the process. The program's
// sigaction and signal calls for that signal are answered from `prog` (what the program
// believes is installed) and never reach the kernel, so a signal of our timers can never run a
// handler of the program's, not even while it is being installed (the bug this replaced: the
// sampling thread saw the new handler up to 20 ms later, and signals in flight went to it).
// Signals that are not our timers' (kill, sigqueue, the program's own timers) are handed to the
// program's handler as the kernel would: its mask, SA_NODEFER, SA_RESETHAND, SA_SIGINFO; its
// SIG_DFL terminates, SIG_IGN drops. The handler is installed with SA_RESTART (our samples must
// never make a system call fail with EINTR) and SA_ONSTACK where the program asked for it.
// Programs that install handlers with the raw system call are still found by the scan.

static struct sigaction prog[2]; // the program's action for sig: prog[prog_gen & 1]
static _Atomic unsigned prog_gen;
static atomic_flag prog_lock = ATOMIC_FLAG_INIT;

static int real_sigaction(int s, const struct sigaction *act, struct sigaction *old) {
    if (!hp_real.sigaction && !hp_real_resolve())
        return -1;
    return hp_real.sigaction ? hp_real.sigaction(s, act, old) : -1;
}

static void on_signal(int signo, siginfo_t *si, void *ucv);

static void install_ours(int flags_from_prog) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESTART | (flags_from_prog & SA_ONSTACK);
    sigfillset(&sa.sa_mask);
    real_sigaction(sig, &sa, NULL);
}

// Reads the program's action without a lock (from the handler): retries if it changed meanwhile.
static void prog_read(struct sigaction *out) {
    unsigned g;
    do {
        g = atomic_load_explicit(&prog_gen, memory_order_acquire);
        memcpy(out, &prog[g & 1], sizeof *out);
        atomic_thread_fence(memory_order_acquire);
    } while (g != atomic_load_explicit(&prog_gen, memory_order_relaxed));
}

// wait: false from the handler, which may have interrupted this thread's own write (it then
// gives up rather than spin for ever).
static bool prog_write(const struct sigaction *act, bool wait) {
    while (atomic_flag_test_and_set_explicit(&prog_lock, memory_order_acquire)) {
        if (!wait)
            return false;
        sched_yield();
    }
    unsigned g = atomic_load_explicit(&prog_gen, memory_order_relaxed);
    prog[(g + 1) & 1] = *act;
    atomic_store_explicit(&prog_gen, g + 1, memory_order_release);
    atomic_flag_clear_explicit(&prog_lock, memory_order_release);
    return true;
}

bool hp_cpu_timer_sigaction(int s, const struct sigaction *act, struct sigaction *old, int *rc) {
    if (s != atomic_load_explicit(&sig_owned, memory_order_acquire) || s == 0)
        return false;
    struct sigaction cur;
    prog_read(&cur);
    if (act) {
        prog_write(act, true);
        install_ours(act->sa_flags);
    }
    if (old)
        *old = cur;
    *rc = 0;
    return true;
}

// A signal that is not one of our timers': what the kernel would have done with the program's
// action. Runs inside our handler, all signals blocked.
static void forward(int signo, siginfo_t *si, void *ucv) {
    struct sigaction a;
    prog_read(&a);
    const ucontext_t *uc = ucv;
    if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_IGN)
        return;
    if (!(a.sa_flags & SA_SIGINFO) && a.sa_handler == SIG_DFL) {
        // real-time signals terminate by default: let the kernel do it
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        real_sigaction(signo, &dfl, NULL);
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, signo);
        pthread_sigmask(SIG_UNBLOCK, &one, NULL);
        syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), signo);
        install_ours(a.sa_flags); // not reached unless the signal was blocked after all
        return;
    }
    if (a.sa_flags & SA_RESETHAND) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        prog_write(&dfl, false);
    }
    sigset_t mask = uc->uc_sigmask, old;
    for (int s = 1; s < NSIG; s++)
        if (sigismember(&a.sa_mask, s) == 1)
            sigaddset(&mask, s);
    if (!(a.sa_flags & SA_NODEFER))
        sigaddset(&mask, signo);
    pthread_sigmask(SIG_SETMASK, &mask, &old);
    if (a.sa_flags & SA_SIGINFO)
        a.sa_sigaction(signo, si, ucv);
    else
        a.sa_handler(signo);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

static void on_signal(int signo, siginfo_t *si, void *ucv) {
    int saved = errno;
    if (si->si_code != SI_TIMER || (uint64_t)(uintptr_t)si->si_value.sival_ptr >> 32 != OUR_VALUE_TAG) {
        errno = saved;
        forward(signo, si, ucv);
        errno = saved;
        return;
    }
    if (!atomic_load_explicit(&active, memory_order_acquire))
        goto out;
    // Inside the shim (guard held) the sample is still taken: nothing here touches the
    // thread's ring, stack table or rule cache, only the shared rule table (read lock-free)
    // and this slot array, so an allocation-heavy program's samples in heapprof are kept.
    uint64_t c = atomic_load_explicit(&claimed, memory_order_relaxed);
    do {
        if (c - atomic_load_explicit(&consumed, memory_order_acquire) >= N_SLOTS) {
            atomic_fetch_add_explicit(&n_lost, 1, memory_order_relaxed);
            goto out;
        }
    } while (!atomic_compare_exchange_weak_explicit(&claimed, &c, c + 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    uintptr_t guard = hp_tls_guard;
    hp_tls_guard = HP_GUARD_FOREVER;
    slot_t *sl = &slots[c & (N_SLOTS - 1)];
    const ucontext_t *uc = ucv;
    sl->s.time_ns = hp_clock_mono_ns(); // CLOCK_MONOTONIC, as perf's samples (async-signal-safe)
    sl->s.tid = (uint32_t)(uintptr_t)si->si_value.sival_ptr;
#if defined(__x86_64__)
    sl->s.n_frames = hp_unwind_signal((uint64_t)uc->uc_mcontext.gregs[REG_RIP],
                                      (uint64_t)uc->uc_mcontext.gregs[REG_RSP],
                                      (uint64_t)uc->uc_mcontext.gregs[REG_RBP], sl->s.frames,
                                      HP_CPU_TIMER_FRAMES, &sl->s.want_pc);
#else
    (void)uc; // cpu.c never starts sampling elsewhere (the rules are x86-64's)
    sl->s.n_frames = 0;
    sl->s.want_pc = 0;
#endif
    atomic_store_explicit(&sl->seq, c + 1, memory_order_release);
    hp_tls_guard = guard;
out:
    errno = saved;
}

bool hp_cpu_timer_open(uint64_t period_ns, const char **reason) {
    period = period_ns;
    if (!slots && !(slots = hp_mem_map(N_SLOTS * sizeof *slots))) {
        *reason = "out of memory for the CPU-time timer's samples; CPU samples are off";
        return false;
    }
    // a real-time signal nobody handles (glibc keeps the first few for itself: SIGRTMIN is
    // already past them); the highest first, since programs that use some take the lowest.
    // Once ours, it stays ours (a fork child, a second open after a failed exec keep it).
    sig = atomic_load_explicit(&sig_owned, memory_order_relaxed);
    for (int s = SIGRTMAX; s >= SIGRTMIN + 2 && !sig; s--) {
        struct sigaction old;
        if (real_sigaction(s, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
            old.sa_handler == SIG_DFL)
            sig = s;
    }
    if (!sig) {
        *reason = "no free real-time signal for the CPU-time timer; CPU samples are off";
        return false;
    }
    if (!atomic_load_explicit(&sig_owned, memory_order_relaxed)) {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        prog[0] = prog[1] = dfl; // what the program would find: nothing installed
        install_ours(0);
        struct sigaction now;
        if (real_sigaction(sig, NULL, &now) != 0 || !(now.sa_flags & SA_SIGINFO) ||
            now.sa_sigaction != on_signal) {
            *reason = "cannot install the CPU-time timer's signal handler; CPU samples are off";
            return false;
        }
        atomic_store_explicit(&sig_owned, sig, memory_order_release);
    }
    // claimed and consumed go on counting: a slot's seq is only meaningful against them (a
    // second open, after a failed exec or in a fork child, must not read old slots as new)
    atomic_store(&n_lost, 0);
    atomic_store_explicit(&active, 1, memory_order_release);
    return true;
}

static void delete_timer(tthread_t *t) {
    syscall(SYS_timer_delete, t->timer);
}

static bool is_ours(uint32_t tid) {
    char path[64] = "/proc/self/task/", num[16], comm[32] = {0};
    int n = 0;
    for (uint32_t v = tid; n == 0 || v; v /= 10)
        num[n++] = (char)('0' + v % 10);
    size_t l = strlen(path);
    while (n)
        path[l++] = num[--n];
    memcpy(path + l, "/comm", 6);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return true; // gone already
    ssize_t r = read(fd, comm, sizeof comm - 1);
    close(fd);
    return r > 0 && strncmp(comm, "heapprof-", 9) == 0;
}

static void arm(uint32_t tid) {
    if (n_threads == MAX_THREADS || is_ours(tid))
        return;
    struct sigevent sev;
    memset(&sev, 0, sizeof sev);
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = sig;
    sev.sigev_value.sival_ptr = (void *)(uintptr_t)((uint64_t)OUR_VALUE_TAG << 32 | tid);
    sev._sigev_un._tid = (pid_t)tid;
    // the kernel's clock id of thread tid's CPU time: MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED)
    clockid_t clk = (clockid_t)((~(uint32_t)tid << 3) | 6);
    int timer;
    if (syscall(SYS_timer_create, clk, &sev, &timer) != 0)
        return; // it exited meanwhile
    struct itimerspec its;
    its.it_interval.tv_sec = its.it_value.tv_sec = (time_t)(period / 1000000000u);
    its.it_interval.tv_nsec = its.it_value.tv_nsec = (long)(period % 1000000000u);
    if (syscall(SYS_timer_settime, timer, 0, &its, NULL) != 0) {
        syscall(SYS_timer_delete, timer);
        return;
    }
    threads[n_threads++] = (tthread_t){tid, timer, true};
}

struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

bool hp_cpu_timer_scan(uint32_t self_tid, const char **reason) {
    if (!atomic_load(&active))
        return false;
    struct sigaction cur;
    if (real_sigaction(sig, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != on_signal) {
        *reason = "the program took over the CPU-time timer's signal; CPU samples stopped";
        hp_cpu_timer_close();
        return false;
    }
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return true;
    for (unsigned i = 0; i < n_threads; i++)
        threads[i].seen = false;
    static char buf[16384]; // the sampling thread's only
    long n;
    while ((n = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0) {
        for (long off = 0; off < n;) {
            const struct linux_dirent64 *d = (const void *)(buf + off);
            off += d->d_reclen;
            uint32_t tid = 0;
            const char *p = d->d_name;
            if (*p < '0' || *p > '9')
                continue;
            while (*p >= '0' && *p <= '9')
                tid = tid * 10 + (uint32_t)(*p++ - '0');
            if (tid == self_tid)
                continue;
            bool known = false;
            for (unsigned i = 0; i < n_threads && !known; i++)
                if (threads[i].tid == tid)
                    known = threads[i].seen = true;
            if (!known)
                arm(tid);
        }
    }
    close(fd);
    for (unsigned i = 0; i < n_threads;) {
        if (!threads[i].seen) {
            delete_timer(&threads[i]);
            threads[i] = threads[--n_threads];
        } else {
            i++;
        }
    }
    return true;
}

bool hp_cpu_timer_next(hp_cpu_tsample_t *out) {
    uint64_t c = atomic_load_explicit(&consumed, memory_order_relaxed);
    slot_t *sl = &slots[c & (N_SLOTS - 1)];
    if (!slots || atomic_load_explicit(&sl->seq, memory_order_acquire) != c + 1)
        return false;
    *out = sl->s;
    atomic_store_explicit(&consumed, c + 1, memory_order_release);
    return true;
}

uint64_t hp_cpu_timer_lost(void) {
    return atomic_load(&n_lost);
}

void hp_cpu_timer_close(void) {
    atomic_store_explicit(&active, 0, memory_order_release);
    for (unsigned i = 0; i < n_threads; i++)
        delete_timer(&threads[i]);
    n_threads = 0;
}

void hp_cpu_timer_fork_child(void) {
    atomic_store(&active, 0);
    n_threads = 0;
}
