// SPDX-License-Identifier: MIT
// CPU-time timer fallback for CPU samples. The sampling thread lists /proc/self/task and arms,
// for each thread, a POSIX timer on that thread's CPU-time clock that signals that very thread
// (SIGEV_THREAD_ID), so no pthread_create hook is needed and only running threads are
// interrupted. The handler runs on the app's threads: it saves errno, allocates nothing, takes
// no lock, computes no unwind rule and touches none of the thread's shim state (so it may
// interrupt the shim itself); it walks with the rules already known and claims a slot with one
// CAS. Limits: CPU-time
// timers fire at most at CONFIG_HZ (250/s measured here, cpu-and-flamegraph.md A.2); a thread
// arms its own timer at its first allocation event (hp_cpu_timer_thread_start), others are
// found within ~20 ms of their start (longer with thousands of threads); the first samples of
// new code stop where a rule is missing (the sampling thread computes it for the next ones).
#include "cpu_timer.h"

#include "altstack.h"
#include "clock.h"
#include "guard.h"
#include "mem.h"
#include "real.h"
#include "unwind.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
#define MAX_THREADS (1u << 20) // threads with a timer at once (the table's slots: twice that)
#define QUEUE_MAX 1024u        // timers threads armed on themselves, not yet in the table
#define SCAN_THREADS 512u      // the listing is skipped one call in (threads / this) more

typedef struct slot {
    _Atomic uint64_t seq; // claim index + 1 once the sample is written
    hp_cpu_tsample_t s;
} slot_t;

typedef struct tthread {
    uint32_t tid;  // 0: an empty slot
    int timer;     // kernel timer id (-1: none, in the queue only)
    uint32_t scan; // the last listing that showed the thread (or that took its timer in)
    void *alt;     // the alternate signal stack lent to the thread (altstack.h), or NULL
} tthread_t;

static slot_t *slots;
static _Atomic uint64_t claimed, consumed;
static _Atomic uint64_t n_lost;
static _Atomic int active;
static int sig;
static _Atomic int sig_owned; // the signal our handler keeps for good (0: none yet)
static uint64_t period;

// The threads that have a timer of ours, by tid: open addressing, at most half full, in mapped
// memory; the sampling thread's alone. A listing of /proc/self/task asks it once per thread, so
// a process of thousands of threads costs a lookup each, not a search of the table (a linear
// one cost the sampling thread 0.3 s of CPU in 3 s with 4,000 threads: session 17).
static tthread_t *tab, *tab_spare; // spare: where a rebuild goes (same capacity)
static uint32_t tab_cap, tab_n, scan_no;
static unsigned scans_to_skip;

// Timers threads armed on themselves at their first event (hp_cpu_timer_thread_start), for the
// sampling thread to take into the table: a thread that allocates is sampled from then on,
// however short it lives, instead of from the next listing (~20 ms; a thread per request may
// be over by then). queue_lock guards the queue and close's switch of `active` to 0, so every
// such timer is either taken into the table or deleted by the thread that made it. It is held
// for a few stores (or, by the sampling thread, one copy of the queue); a mutex, not a spin: a
// real-time thread spinning on a lock that a lower-priority thread holds would never let it run
// (sched_yield gives way to equal priorities only).
static pthread_mutex_t queue_lock = PTHREAD_MUTEX_INITIALIZER;
static tthread_t queue[QUEUE_MAX], taken[QUEUE_MAX];
static unsigned n_queued;

// Threads the listing armed, by tid modulo 2^16 (the sampling thread writes, threads read): the
// timer id in the high 32 bits, the tid in the low ones. A thread the listing found before its
// first event keeps that timer rather than arm a second, which would sample it twice until the
// next scan took its own in (600 threads of 1 ms at once: 30% more samples than their CPU time;
// session 17), unless that timer was an earlier thread's of the same tid (listed_for). Two live
// tids that share a mark cost at most that double sampling, for one of them, until the next
// scan.
#define SCAN_MARKS (1u << 16)
static _Atomic uint64_t scan_armed[SCAN_MARKS];
static bool marks_used; // some mark was set: the array's pages are ours to clear

static void scan_marks_reset(void) {
    if (!marks_used)
        return; // untouched pages stay unmapped (a fork child of a perf-sampled program)
    for (uint32_t i = 0; i < SCAN_MARKS; i++)
        atomic_store_explicit(&scan_armed[i], 0, memory_order_relaxed);
    marks_used = false;
}

static void scan_mark_clear(uint32_t tid) {
    _Atomic uint64_t *m = &scan_armed[tid & (SCAN_MARKS - 1)];
    uint64_t want = atomic_load_explicit(m, memory_order_relaxed);
    if ((uint32_t)want == tid)
        atomic_compare_exchange_strong_explicit(m, &want, 0, memory_order_relaxed,
                                                memory_order_relaxed);
}

// The listing armed a timer for this very thread (tid, the caller): its mark names the tid and
// the timer is still armed. A timer made for an earlier thread of the same tid (tids come back
// once a thread is gone) reads as disarmed: the kernel disarms a thread's CPU-time timers when it
// exits, and a running periodic timer never reads zero.
static bool listed_for(uint32_t tid) {
    uint64_t m = atomic_load_explicit(&scan_armed[tid & (SCAN_MARKS - 1)], memory_order_relaxed);
    if ((uint32_t)m != tid)
        return false;
    struct itimerspec its;
    return syscall(SYS_timer_gettime, (int)(m >> 32), &its) == 0 &&
           (its.it_value.tv_sec != 0 || its.it_value.tv_nsec != 0);
}

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
// never make a system call fail with EINTR) and SA_ONSTACK (altstack.h): on a thread with an
// alternate stack, a program's handler for the signal runs there too.
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

static void install_ours(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_signal;
    // SA_ONSTACK always, whatever the program asked: a thread that armed its own timer has an
    // alternate stack (its own or one lent by altstack.c), and the frame must not land on a
    // small stack deep in the shim
    sa.sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK;
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
        install_ours();
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
        install_ours(); // not reached unless the signal was blocked after all
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
        install_ours();
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
    if (t->timer >= 0)
        syscall(SYS_timer_delete, t->timer);
}

// The entry of a thread that is gone (the listing no longer shows it, or its tid came back for
// another thread): its timer deleted, the stack lent to it back in the pool.
static void retire(tthread_t *t) {
    scan_mark_clear(t->tid); // first: a thread reading the mark must not meet a reused timer id
    delete_timer(t);
    hp_altstack_give_back(t->alt);
}

static uint32_t tab_home(uint32_t tid) {
    return (tid * 0x9E3779B1u) & (tab_cap - 1);
}

// tid's slot in the table: its entry, or the empty slot where it would go.
static tthread_t *tab_slot(uint32_t tid) {
    uint32_t i = tab_home(tid);
    while (tab[i].tid != 0 && tab[i].tid != tid)
        i = (i + 1) & (tab_cap - 1);
    return &tab[i];
}

// The table rebuilt into a fresh array of cap slots; with reap, only the entries the latest
// listing showed are kept and the others' timers deleted. False (table unchanged) when out of
// memory for a larger table.
static bool tab_rebuild(uint32_t cap, bool reap) {
    tthread_t *to = cap == tab_cap ? tab_spare : hp_mem_map((size_t)cap * sizeof *to);
    tthread_t *spare = cap == tab_cap ? tab : hp_mem_map((size_t)cap * sizeof *to);
    if (!to || !spare) {
        if (cap != tab_cap) {
            if (to)
                hp_mem_unmap(to, (size_t)cap * sizeof *to);
            if (spare)
                hp_mem_unmap(spare, (size_t)cap * sizeof *to);
        }
        return false;
    }
    memset(to, 0, (size_t)cap * sizeof *to);
    tthread_t *from = tab;
    uint32_t from_cap = tab_cap, n = 0;
    for (uint32_t i = 0; i < from_cap; i++) {
        if (from[i].tid == 0)
            continue;
        if (reap && from[i].scan != scan_no) {
            retire(&from[i]);
            continue;
        }
        uint32_t j = (from[i].tid * 0x9E3779B1u) & (cap - 1);
        while (to[j].tid != 0)
            j = (j + 1) & (cap - 1);
        to[j] = from[i];
        n++;
    }
    if (cap != tab_cap && from) {
        hp_mem_unmap(from, (size_t)from_cap * sizeof *from);
        hp_mem_unmap(tab_spare, (size_t)from_cap * sizeof *from);
    }
    tab = to;
    tab_spare = spare;
    tab_cap = cap;
    tab_n = n;
    return true;
}

// Room for one more entry, the table at most half full after it. False: none (the thread is
// then not sampled: over MAX_THREADS at once, or out of memory).
static bool tab_room(void) {
    if ((tab_n + 1) * 2 <= tab_cap)
        return true;
    return tab_cap < 2 * MAX_THREADS && tab_rebuild(tab_cap ? tab_cap * 2 : 1024, false);
}

// The entry for tid's timer: a new one, or in place of an older one for the same tid, which is
// retired (the scan's timer for a thread that has since armed its own; or the entry of an
// earlier thread that had the same tid: its timer bound to that thread and no use to this one,
// its stack free since that thread is gone). alt: the stack lent to the thread, or NULL. Without
// room the timer is deleted, and a stack lent stays with its thread, out of the pool for good.
static void tab_put(uint32_t tid, int timer, void *alt) {
    if (!tab_room()) {
        syscall(SYS_timer_delete, timer);
        return;
    }
    tthread_t *t = tab_slot(tid);
    if (t->tid == tid) {
        if (t->alt == alt)
            t->alt = NULL; // the same thread's: not given back
        retire(t);
    } else {
        tab_n++;
    }
    *t = (tthread_t){tid, timer, scan_no, alt};
}

static bool make_timer(uint32_t tid, int *timer_out);

// Moves the timers threads armed on themselves into the table, and the stacks lent to threads
// the listing had armed into their entries. Sampling thread only.
static void take_queue(void) {
    pthread_mutex_lock(&queue_lock);
    unsigned n = n_queued;
    memcpy(taken, queue, n * sizeof *queue);
    n_queued = 0;
    pthread_mutex_unlock(&queue_lock);
    for (unsigned i = 0; i < n; i++) {
        const tthread_t *q = &taken[i];
        if (q->timer >= 0) {
            tab_put(q->tid, q->timer, q->alt);
            continue;
        }
        // the listing's timer is the thread's (listed_for): its entry takes the stack
        tthread_t *t = tab ? tab_slot(q->tid) : NULL;
        if (t && t->tid == q->tid) {
            if (t->alt != q->alt)
                hp_altstack_give_back(t->alt); // an earlier thread's of the tid: gone
            t->alt = q->alt;
            continue;
        }
        // its entry went meanwhile (no room at the listing): armed now, with its stack noted
        int timer;
        if (make_timer(q->tid, &timer))
            tab_put(q->tid, timer, q->alt);
        else
            hp_altstack_give_back(q->alt); // it exited: the kernel no longer uses the stack
    }
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

// A timer on thread tid's CPU-time clock that signals that thread, armed. False: none (the
// thread has exited).
static bool make_timer(uint32_t tid, int *timer_out) {
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
        return false; // it exited meanwhile
    // The kernel checks CPU-time timers at its ticks (4 ms at CONFIG_HZ 250), so a thread that
    // runs for less than a tick is sampled only if the first expiry has passed at the tick that
    // meets it. Where the period is shorter than a tick (the default 997/s) every tick a thread
    // runs through fires, so a first expiry of a microsecond gives a 1 ms thread its one chance
    // in four, as a long thread gets a sample a tick (with the full period first: 1 sample in
    // ~30 for 600 threads of 1 ms against a thread with their CPU time, session 17). A longer
    // period starts at a random phase instead, which leaves no thread a head start.
    uint64_t first = period <= 4000000u
                         ? 1000u
                         : 1u + (uint64_t)(tid * 0x9E3779B97F4A7C15ull >> 33) % period;
    struct itimerspec its;
    its.it_interval.tv_sec = (time_t)(period / 1000000000u);
    its.it_interval.tv_nsec = (long)(period % 1000000000u);
    its.it_value.tv_sec = (time_t)(first / 1000000000u);
    its.it_value.tv_nsec = (long)(first % 1000000000u);
    if (syscall(SYS_timer_settime, timer, 0, &its, NULL) != 0) {
        syscall(SYS_timer_delete, timer);
        return false;
    }
    *timer_out = timer;
    return true;
}

static void arm(uint32_t tid) {
    int timer;
    if (is_ours(tid) || !make_timer(tid, &timer))
        return;
    tab_put(tid, timer, NULL);
    tthread_t *t = tab ? tab_slot(tid) : NULL;
    if (t && t->tid == tid && t->timer == timer) { // in the table (else deleted: no room)
        marks_used = true;
        atomic_store_explicit(&scan_armed[tid & (SCAN_MARKS - 1)],
                              (uint64_t)(uint32_t)timer << 32 | tid, memory_order_relaxed);
    }
}

void hp_cpu_timer_thread_start(uint32_t tid) {
    if (!atomic_load_explicit(&active, memory_order_acquire))
        return;
    // First an alternate stack for the signal's frame (a program's 16 KiB stack may be deep in
    // the shim's cold paths now); without one the thread is left to the listing, as before.
    void *alt;
    if (!hp_altstack_lend(&alt))
        return;
    int timer = -1;
    if (!listed_for(tid) && !make_timer(tid, &timer)) {
        hp_altstack_unlend(alt);
        return;
    }
    if (timer < 0 && !alt)
        return; // the listing's timer, the program's stack: nothing for the table to know
    pthread_mutex_lock(&queue_lock);
    bool kept = atomic_load_explicit(&active, memory_order_relaxed) && n_queued < QUEUE_MAX;
    if (kept)
        queue[n_queued++] = (tthread_t){tid, timer, 0, alt};
    pthread_mutex_unlock(&queue_lock);
    if (!kept) { // sampling stopped meanwhile, or the queue is full: the listing will find it
        if (timer >= 0)
            syscall(SYS_timer_delete, timer);
        hp_altstack_unlend(alt);
    }
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
    take_queue();
    // Threads that allocate have armed their own timers; the listing finds those that do not
    // and those that are gone. With thousands of threads it is long (a system call per ~100
    // threads, and a lookup each): it is then made less often, one call in 1 + threads / 512.
    if (scans_to_skip) {
        scans_to_skip--;
        return true;
    }
    int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return true;
    scan_no++;
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
            if (tid == self_tid || tid == 0)
                continue;
            tthread_t *t = tab ? tab_slot(tid) : NULL;
            if (t && t->tid == tid)
                t->scan = scan_no;
            else
                arm(tid);
        }
    }
    close(fd);
    // the timers of threads that are gone (rebuilt rather than deleted in place: open addressing)
    bool gone = false;
    for (uint32_t i = 0; i < tab_cap && !gone; i++)
        gone = tab[i].tid != 0 && tab[i].scan != scan_no;
    if (gone)
        tab_rebuild(tab_cap, true);
    scans_to_skip = tab_n / SCAN_THREADS;
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
    pthread_mutex_lock(&queue_lock);
    atomic_store_explicit(&active, 0, memory_order_release);
    for (unsigned i = 0; i < n_queued; i++)
        delete_timer(&queue[i]);
    n_queued = 0;
    pthread_mutex_unlock(&queue_lock);
    // the stacks lent stay with their threads, which may still be running on them: out of the
    // pool for good (at most its cap; the memory is mostly untouched)
    for (uint32_t i = 0; i < tab_cap; i++)
        if (tab[i].tid != 0)
            delete_timer(&tab[i]);
    if (tab)
        memset(tab, 0, (size_t)tab_cap * sizeof *tab);
    tab_n = 0;
    scans_to_skip = 0;
    scan_marks_reset();
}

void hp_cpu_timer_fork_child(void) {
    // the parent's timers are not the child's (timers are not inherited), nor its lock holder
    atomic_store(&active, 0);
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER; // the holder may be a thread the child lacks
    queue_lock = fresh;
    n_queued = 0;
    hp_altstack_fork_child(); // the other threads' stacks are free: those threads are not here
    if (tab)
        memset(tab, 0, (size_t)tab_cap * sizeof *tab);
    tab_n = 0;
    scans_to_skip = 0;
    scan_marks_reset();
}
