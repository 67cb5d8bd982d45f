// SPDX-License-Identifier: MIT
// CPU sampling: one perf_event cpu-clock event per CPU (pid 0, inherit, inherit_thread,
// remove_on_exec), so every thread the process creates later is sampled by the kernel into a
// fixed set of rings; a thread of ours ("heapprof-cpu") polls the rings, unwinds each copied
// user stack with the CFI walker (hp_unwind_copy), interns it and appends a CPU_SAMPLE record
// to its own record ring, which the writer drains like any other. The app's threads never run
// any of this: the kernel takes the samples. Never blocks on the writer (a sample that does
// not fit is lost and counted); any failure turns sampling off and says why in the trace.
// Where perf events are refused, the same thread runs the CPU-time timer fallback instead
// (cpu_timer.c), whose signal handler is the only code here that runs on the app's threads.
// See docs/design.md#cpu-samples; the measurements behind the choices are in
// /work/shared/notes/cpu-and-flamegraph.md (per-CPU inherit, mlock budget, POLLHUP).
#include "cpu.h"

#include "clock.h"
#include "config.h"
#include "cpu_timer.h"
#include "diag.h"
#include "guard.h"
#include "mem.h"
#include "modmap.h"
#include "stacktab.h"
#include "state.h"
#include "tbuf.h"
#include "thread.h"
#include "unwind.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_CPUS 256
#define RING_PAGES_MAX 64  // data pages per CPU (256 KiB); halved on EPERM (mlock budget)
#define RING_PAGES_MIN 2
#define STACK_BYTES_MAX 16384 // stack copied per sample (the kernel reserves it in the ring)
#define STACK_BYTES_MIN 2048
#define REC_MAX 65536 // a perf record's size is a u16
#define MODMAP_ROOM (256u << 10) // free ring bytes wanted before a module scan may emit

// x86-64 register numbers in perf's sample_regs_user (arch/x86/include/uapi/asm/perf_regs.h)
#define REG_BP 6
#define REG_SP 7
#define REG_IP 8

typedef struct cpu_ring {
    int fd;
    struct perf_event_mmap_page *page;
    size_t map_bytes;
    uint64_t data_bytes;
    uint64_t id; // PERF_EVENT_IOC_ID: tells our event from whatever the program put at fd
    bool hup; // poll said POLLHUP, or fd is no longer ours: not polled, still drained
} cpu_ring_t;

static cpu_ring_t rings[MAX_CPUS];
static unsigned n_rings;
// A pipe hp_cpu_stop wakes the thread with: a pipe's inode is unique, so a program that closed
// our descriptors and reused the numbers is told apart (an eventfd's is shared by all).
static int stop_fd[2] = {-1, -1};
static dev_t stop_dev;
static ino_t stop_ino;
static pthread_t thread;
// Atomic: the flusher reads it (hp_cpu_thread_count) while it watches for the program's
// last thread; every write is on a cold path.
static _Atomic bool thread_started;
static _Atomic int go; // 0 wait, 1 rings ready, 2 give up
static _Atomic bool stop_req;
// hp_cpu_pause: the thread ends with its events and timers left on; hp_cpu_resume starts another.
static _Atomic bool pause_req;
static bool paused;
static hp_ring_t *out;       // our record ring (the writer drains it)
static hpt_dstate_t out_enc; // its delta state
static uint64_t mono_to_rel; // CLOCK_MONOTONIC of the trace start: sample time - this = record time
static _Atomic int source = HPT_CPU_OFF; // the sampling thread switches it (perf -> timer)
static uint32_t hz;
static const char *reason = ""; // the sampling thread's while it runs (others read it after joining it)
static _Atomic uint64_t threads_started; // first events of threads (hp_cpu_thread_start)
// With the timer, each signal stands for a kernel tick of the thread's CPU time (the timer fires
// at most once a tick): it is written as `hz` x tick samples (~4 at 997/s and 250 ticks a
// second), in 1/1024ths with the remainder carried, so a count means the same CPU time with
// either source and a trace that switched adds them up (docs/design.md#cpu-samples).
static uint32_t per_signal_q10 = 1024, carry_q10;
static uint64_t n_samples, n_lost;
static uint8_t rec_buf[REC_MAX]; // one record copied out of a ring (they wrap); thread-private

// ---- the system calls, one function each (a test build can make them fail) ----------------

static int perf_open(struct perf_event_attr *a, int cpu) {
    return (int)syscall(SYS_perf_event_open, a, 0, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

// Moves fd out of the range programs reuse or dup2 over (as writer.c does with the trace fd).
static int high_fd(int fd) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 500);
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

// ---- our descriptors, which the program may have closed (daemons close "all") ------------------

static bool ring_fd_ok(const cpu_ring_t *c) {
    uint64_t id;
    return c->fd >= 0 && ioctl(c->fd, PERF_EVENT_IOC_ID, &id) == 0 && id == c->id;
}

static bool stop_fd_ok(int fd) {
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode) && st.st_dev == stop_dev &&
           st.st_ino == stop_ino;
}

// ---- record output -----------------------------------------------------------------------------

static bool room(size_t n) {
    uint64_t h = atomic_load_explicit(&out->head, memory_order_relaxed);
    uint64_t t = atomic_load_explicit(&out->tail, memory_order_acquire);
    return h + n - t <= out->cap;
}

static void put(const uint8_t *rec, size_t n) {
    if (room(n))
        hp_tbuf_append(out, rec, n);
}

static void emit(void *ctx, const uint8_t *rec, size_t len) {
    (void)ctx;
    put(rec, len);
}

static void write_info(void) {
    if (!out)
        return;
    uint8_t buf[64 + 256], *p = buf;
    size_t rl = strnlen(reason, 255);
    *p++ = HPT_REC_CPU_INFO;
    p = hpt_put_varint(p, (uint64_t)source);
    p = hpt_put_varint(p, hz);
    p = hpt_put_varint(p, n_samples);
    p = hpt_put_varint(p, n_lost);
    p = hpt_put_varint(p, rl);
    memcpy(p, reason, rl);
    p += rl;
    put(buf, (size_t)(p - buf));
}

static uint32_t intern(const uint64_t *frames, uint32_t n) {
    if (n == 0)
        return HPT_STACK_UNKNOWN;
    uint32_t id = hp_stacktab_find(frames, n);
    if (id != HPT_STACK_UNKNOWN)
        return id;
    // a new stack may run in a module loaded since the last scan: list it first; the module
    // record goes through the merge, so it carries the time of now, not of the sample
    // marked busy like an app thread: records that go through the merge (module loads found by
    // a scan) then keep the writer's watermark promise
    uint64_t t = hp_tbuf_busy_now(out);
    if (t < out_enc.time_ns)
        t = out_enc.time_ns;
    if (room(MODMAP_ROOM))
        hp_modmap_scan(&out_enc, t, emit, NULL);
    hp_tbuf_idle(out);
    return room(HP_REC_MAX + 64) ? hp_stacktab_intern(out, frames, n) : HPT_STACK_UNKNOWN;
}

static uint32_t stack_of(const hp_cpu_sample_t *s) {
    uint64_t frames[HPT_MAX_FRAMES];
    if (!s->has_regs)
        return HPT_STACK_UNKNOWN;
    uint32_t n = hp_unwind_copy(s->ip, s->sp, s->bp, s->stack, s->stack_len, frames,
                                hp_config.max_frames);
    return intern(frames, n);
}

static void put_sample(uint64_t time_ns, uint32_t tid, uint32_t id) {
    uint64_t t = time_ns > mono_to_rel ? time_ns - mono_to_rel : 0;
    uint8_t buf[3 * HPT_VARINT_MAX + 1], *p = buf;
    *p++ = HPT_REC_CPU_SAMPLE;
    p = hpt_put_varint(p, hpt_zigzag((int64_t)(t - out_enc.time_ns)));
    p = hpt_put_varint(p, tid);
    p = hpt_put_varint(p, id);
    if (!room((size_t)(p - buf))) {
        n_lost++;
        return;
    }
    out_enc.time_ns = t;
    hp_tbuf_append(out, buf, (size_t)(p - buf));
    n_samples++;
}

static void handle_sample(const hp_cpu_sample_t *s) {
    put_sample(s->time_ns, s->tid, stack_of(s));
}

// The timer fallback's samples: the handler walked with known rules only; the first pc it
// lacked a rule for gets one now, so the next samples there go further.
static void drain_timer(void) {
    hp_cpu_tsample_t ts;
    while (hp_cpu_timer_next(&ts)) {
        if (ts.want_pc)
            hp_unwind_prepare(ts.want_pc);
        uint32_t n = ts.n_frames < hp_config.max_frames ? ts.n_frames : hp_config.max_frames;
        uint32_t id = intern(ts.frames, n);
        carry_q10 += per_signal_q10;
        for (; carry_q10 >= 1024; carry_q10 -= 1024)
            put_sample(ts.time_ns, ts.tid, id);
    }
}

// per_signal_q10 for the timer: the kernel's tick (the resolution of its coarse clock, 1 / HZ)
// times the samples asked a second; 1 where the period is a tick or longer (each signal is
// then one period).
static void timer_weight(void) {
    struct timespec res;
    uint64_t tick = clock_getres(CLOCK_MONOTONIC_COARSE, &res) == 0
                        ? (uint64_t)res.tv_sec * 1000000000u + (uint64_t)res.tv_nsec
                        : 0;
    uint64_t q = tick ? tick * hz * 1024u / 1000000000u : 1024u;
    per_signal_q10 = q < 1024u ? 1024u : q > (1u << 20) ? (1u << 20) : (uint32_t)q;
    carry_q10 = 0;
}

static void timer_main(void) {
    uint32_t self = (uint32_t)syscall(SYS_gettid);
    timer_weight();
    for (unsigned k = 0;; k++) {
        bool stopping = atomic_load_explicit(&stop_req, memory_order_acquire) ||
                        atomic_load_explicit(&hp_state, memory_order_relaxed) != HP_STATE_ON;
        // new threads are found within ~20 ms
        if (!stopping && k % 2 == 0 && !hp_cpu_timer_scan(self, &reason))
            stopping = true;
        drain_timer();
        if (stopping)
            break;
        if (atomic_load_explicit(&pause_req, memory_order_acquire))
            return; // the timers go on firing into their buffer, for the next thread
        if (!stop_fd_ok(stop_fd[0]))
            stop_fd[0] = -1;
        struct pollfd pfd = {.fd = stop_fd[0], .events = POLLIN};
        poll(&pfd, 1, 10);
    }
    hp_cpu_timer_close();
    drain_timer();
    n_lost += hp_cpu_timer_lost();
    write_info();
}

// ---- parsing -----------------------------------------------------------------------------------

static bool get_u64(const uint8_t **p, const uint8_t *end, uint64_t *v) {
    if ((size_t)(end - *p) < 8)
        return false;
    memcpy(v, *p, 8);
    *p += 8;
    return true;
}

bool hp_cpu_parse_sample(const uint8_t *body, size_t len, hp_cpu_sample_t *s) {
    const uint8_t *p = body, *end = body + len;
    uint64_t v, abi;
    memset(s, 0, sizeof *s);
    // the kernel's order for our sample_type: ip, pid/tid, time, regs_user, stack_user
    if (!get_u64(&p, end, &s->ip) || !get_u64(&p, end, &v) || !get_u64(&p, end, &s->time_ns) ||
        !get_u64(&p, end, &abi))
        return false;
    s->pid = (uint32_t)v;
    s->tid = (uint32_t)(v >> 32);
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        // registers in increasing bit order of the mask: rbp, rsp, rip
        uint64_t ip;
        if (!get_u64(&p, end, &s->bp) || !get_u64(&p, end, &s->sp) || !get_u64(&p, end, &ip))
            return false;
        s->has_regs = abi == PERF_SAMPLE_REGS_ABI_64;
    }
    uint64_t size;
    if (!get_u64(&p, end, &size))
        return false;
    if (size) {
        if (size > (uint64_t)(end - p))
            return false;
        s->stack = p;
        p += size;
        uint64_t dyn;
        if (!get_u64(&p, end, &dyn) || dyn > size)
            return false;
        s->stack_len = dyn;
    }
    return p == end;
}

// ---- draining ----------------------------------------------------------------------------------

// Copies every complete record out of ring c and handles it; frees the space as it goes.
static void drain(cpu_ring_t *c) {
    struct perf_event_mmap_page *pg = c->page;
    // data_offset is 0 on kernels before 4.1, whose data starts right after the first page
    const uint8_t *data = (const uint8_t *)pg + (pg->data_offset ? pg->data_offset
                                                                  : c->map_bytes - c->data_bytes);
    uint64_t head = __atomic_load_n(&pg->data_head, __ATOMIC_ACQUIRE);
    uint64_t tail = pg->data_tail;
    const uint64_t mask = c->data_bytes - 1;
    while (tail < head) {
        struct perf_event_header h;
        uint64_t off = tail & mask;
        for (size_t i = 0; i < sizeof h; i++)
            ((uint8_t *)&h)[i] = data[(off + i) & mask];
        if (h.size < sizeof h || h.size > head - tail)
            break; // cannot happen with a sane kernel; leave the ring alone
        uint64_t first = c->data_bytes - off;
        if (first >= h.size) {
            memcpy(rec_buf, data + off, h.size);
        } else {
            memcpy(rec_buf, data + off, first);
            memcpy(rec_buf + first, data, h.size - first);
        }
        // give the space back before the (slow) unwind, so the kernel can keep sampling
        tail += h.size;
        __atomic_store_n(&pg->data_tail, tail, __ATOMIC_RELEASE);
        const uint8_t *body = rec_buf + sizeof h;
        size_t blen = h.size - sizeof h;
        if (h.type == PERF_RECORD_SAMPLE) {
            hp_cpu_sample_t s;
            if (hp_cpu_parse_sample(body, blen, &s))
                handle_sample(&s);
            else
                n_lost++;
        } else if (h.type == PERF_RECORD_LOST && blen >= 16) {
            uint64_t lost;
            memcpy(&lost, body + 8, 8);
            n_lost += lost;
        }
    }
}

static void close_ring(cpu_ring_t *c) {
    if (c->page)
        munmap(c->page, c->map_bytes);
    if (ring_fd_ok(c))
        close(c->fd);
    c->page = NULL;
    c->fd = -1;
}

// ---- perf events given up for the timer when threads come too fast ---------------------------

void hp_cpu_thread_start(uint32_t tid) {
    atomic_fetch_add_explicit(&threads_started, 1, memory_order_relaxed);
    hp_cpu_timer_thread_start(tid);
}

bool hp_cpu_perf_too_dear(uint64_t threads, uint64_t window_ns, unsigned n_cpus) {
    return window_ns > 0 &&
           (double)threads * n_cpus * HP_CPU_INHERIT_NS > HP_CPU_SWITCH_SHARE * (double)window_ns;
}

// The sampling thread's watch over the thread rate: windows of a second; the switch comes after
// two dear ones in a row, so that a pool started at once (a burst, once) keeps perf events.
#define SWITCH_WINDOW_NS 1000000000u
typedef struct switch_watch {
    uint64_t window_start, threads_at_start;
    unsigned dear_windows;
    bool off; // decided: no switch (HEAPPROF_CPU=perf, HEAPPROF_CPU_SWITCH=0, or it failed)
} switch_watch_t;

static bool switch_due(switch_watch_t *w) {
    if (w->off || hp_config.cpu == HP_CPU_PERF || !hp_config.cpu_switch)
        return false;
    uint64_t threads = atomic_load_explicit(&threads_started, memory_order_relaxed);
    if (hp_config.test_cpu_switch_after)
        return threads >= hp_config.test_cpu_switch_after;
    uint64_t now = hp_clock_mono_ns();
    if (!w->window_start) {
        w->window_start = now;
        w->threads_at_start = threads;
        return false;
    }
    if (now - w->window_start < SWITCH_WINDOW_NS)
        return false;
    bool dear = hp_cpu_perf_too_dear(threads - w->threads_at_start, now - w->window_start,
                                     n_rings);
    w->dear_windows = dear ? w->dear_windows + 1 : 0;
    w->window_start = now;
    w->threads_at_start = threads;
    if (w->dear_windows < 2)
        return false;
    w->off = true; // tried once, whatever comes of it
    return true;
}

// Held across a switch, and by hp_cpu_before_exec while it reads the source: a timer armed just
// before an exec would leave a signal pending for the new image, whose default action for it is
// to terminate. exec_pending: no switch from then on (until the exec fails).
static pthread_mutex_t switch_lock = PTHREAD_MUTEX_INITIALIZER;
static bool exec_pending;

// ioctl `req` (enable, disable) on every event still ours.
static void events_ioctl(unsigned long req) {
    for (unsigned i = 0; i < n_rings; i++)
        if (ring_fd_ok(&rings[i]))
            ioctl(rings[i].fd, req, 0);
}

static void drain_all(void) {
    for (unsigned i = 0; i < n_rings; i++)
        drain(&rings[i]);
}

// Sampling thread: the perf events disabled, drained and closed, the timer opened, a CPU_INFO
// that says so. False (the perf events enabled again, kept for good) if the timer cannot open,
// or an exec is under way.
static bool switch_to_timer(void) {
    static char why[256];
    pthread_mutex_lock(&switch_lock);
    bool ok = !exec_pending;
    if (ok) {
        events_ioctl(PERF_EVENT_IOC_DISABLE);
        drain_all();
        const char *err = "";
        ok = hp_cpu_timer_open(1000000000u / hz, &err);
        if (!ok)
            events_ioctl(PERF_EVENT_IOC_ENABLE);
    }
    if (ok) {
        // closing the events tears down every thread's inherited copy: new threads cost no more
        unsigned n_cpus = n_rings;
        for (unsigned i = 0; i < n_rings; i++)
            close_ring(&rings[i]);
        n_rings = 0;
        char n_threads[24], n_cpu[24], pct[24];
        hp_diag_join(why, sizeof why, "perf events given up for the CPU-time timer after ",
                     hp_diag_u64(n_threads, atomic_load(&threads_started)),
                     " threads: at the rate threads were made, their copies of the events of the ",
                     hp_diag_u64(n_cpu, n_cpus), " sampled CPUs cost the kernel more than ",
                     hp_diag_u64(pct, (uint64_t)(HP_CPU_SWITCH_SHARE * 100 + 0.5)), "% of a CPU",
                     (char *)NULL);
        reason = why;
        atomic_store(&source, HPT_CPU_TIMER);
        write_info();
    }
    pthread_mutex_unlock(&switch_lock);
    return ok;
}

static void *cpu_main(void *arg) {
    (void)arg;
    hp_tls_guard = 1; // libdw's allocations (rules for new code) pass through unrecorded
    prctl(PR_SET_NAME, "heapprof-cpu", 0, 0, 0);
    // Wait until the rings exist. This thread was made before the events were opened, so the
    // kernel does not sample it (inherit covers threads created after the open only).
    while (atomic_load_explicit(&go, memory_order_acquire) == 0) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&go) != 1)
        return NULL;
    if (source == HPT_CPU_TIMER) {
        timer_main();
        return NULL;
    }
    struct pollfd pfd[MAX_CPUS + 1];
    switch_watch_t sw = {0};
    for (;;) {
        unsigned n = 0;
        bool any_hup = false;
        // A ring whose event reported POLLHUP (the thread that opened it exited; the threads
        // it created still write into it) would make poll return at once forever
        // (cpu-and-flamegraph.md A.1.5): it is drained on a timer instead.
        for (unsigned i = 0; i < n_rings; i++) {
            if (!rings[i].hup && !ring_fd_ok(&rings[i])) {
                // the program closed it (the mapping keeps the event alive) or reused the
                // number: never touch that descriptor again
                rings[i].fd = -1;
                rings[i].hup = true;
            }
            pfd[i] = (struct pollfd){.fd = rings[i].hup ? -1 : rings[i].fd, .events = POLLIN};
            any_hup |= rings[i].hup;
        }
        n = n_rings;
        if (!stop_fd_ok(stop_fd[0]))
            stop_fd[0] = -1;
        pfd[n++] = (struct pollfd){.fd = stop_fd[0], .events = POLLIN};
        int rc = poll(pfd, n, any_hup ? 10 : 100);
        bool stopping = atomic_load_explicit(&stop_req, memory_order_acquire) ||
                        atomic_load_explicit(&hp_state, memory_order_relaxed) != HP_STATE_ON;
        if (rc < 0 && errno != EINTR) {
            reason = "poll on the sampling events failed; CPU sampling stopped";
            stopping = true;
        }
        for (unsigned i = 0; i < n_rings; i++) {
            drain(&rings[i]);
            if (rc > 0 && (pfd[i].revents & (POLLHUP | POLLERR | POLLNVAL)))
                rings[i].hup = true;
        }
        if (stopping)
            break;
        if (atomic_load_explicit(&pause_req, memory_order_acquire))
            return NULL; // the events stay on; the next thread reads their rings
        if (switch_due(&sw) && switch_to_timer()) {
            timer_main();
            return NULL;
        }
    }
    events_ioctl(PERF_EVENT_IOC_DISABLE);
    drain_all();
    write_info();
    return NULL;
}

// ---- set-up ------------------------------------------------------------------------------------

static const char *refusal(int err) {
    switch (err) {
    case EACCES:
    case EPERM:
        return "perf_event_open was refused (perf_event_paranoid, seccomp or a container); "
               "CPU samples are off";
    case ENOSYS:
        return "the kernel has no perf_event_open; CPU samples are off";
    case ENOENT:
    case EOPNOTSUPP:
        return "the kernel has no software cpu-clock event; CPU samples are off";
    default:
        return "perf_event_open failed; CPU samples are off";
    }
}

// The CPUs the events go on: those the process may run on when recording starts (its
// affinity mask: a container's cpuset, taskset), else every CPU configured. Every thread the
// program makes later inherits one event per CPU here, which the kernel copies at each
// pthread_create and tears down at each thread's end (~4.4 us an event on the 2-vCPU VM:
// docs/design.md#cpu-samples), so a process allowed 4 CPUs of a 64-CPU host pays for 4.
// A thread later moved to a CPU outside the mask (sched_setaffinity widening it, which a
// cpuset forbids) is not sampled there.
// Returns how many CPU numbers to look at (the configured ones, at most MAX_CPUS) and sets
// *n_on to how many of them are in *on.
static long sampled_cpus(cpu_set_t *on, long *n_on) {
    long n_conf = sysconf(_SC_NPROCESSORS_CONF);
    if (n_conf < 1)
        n_conf = 1;
    if (n_conf > MAX_CPUS)
        n_conf = MAX_CPUS;
    *n_on = 0;
    if (sched_getaffinity(0, sizeof *on, on) == 0)
        for (long cpu = 0; cpu < n_conf; cpu++)
            *n_on += CPU_ISSET((int)cpu, on) != 0;
    if (*n_on == 0) { // unreadable, or a mask of CPUs beyond MAX_CPUS only: take them all
        CPU_ZERO(on);
        for (long cpu = 0; cpu < n_conf; cpu++)
            CPU_SET((int)cpu, on);
        *n_on = n_conf;
    }
    return n_conf;
}

// Opens and maps one event per CPU of sampled_cpus. Returns false with reason set.
static bool open_events(void) {
    cpu_set_t on;
    long n_cpus, n_conf = sampled_cpus(&on, &n_cpus);
    long page = sysconf(_SC_PAGESIZE);
    unsigned pages = RING_PAGES_MAX;
    // keep the whole set within ~4 MiB of locked memory however many CPUs there are
    while (pages > RING_PAGES_MIN && (uint64_t)pages * (uint64_t)page * (uint64_t)n_cpus > (4u << 20))
        pages /= 2;
    int first_err = 0;
    bool lock_refused = false, tried = false; // tried: a CPU before this one was tried
    for (long cpu = 0; cpu < n_conf; cpu++) {
        if (!CPU_ISSET((int)cpu, &on))
            continue;
        for (;;) {
            uint64_t data_bytes = (uint64_t)pages * (uint64_t)page;
            uint32_t stack = STACK_BYTES_MAX;
            while (stack > STACK_BYTES_MIN && stack * 4u > data_bytes)
                stack /= 2;
            struct perf_event_attr a;
            memset(&a, 0, sizeof a);
            a.size = sizeof a;
            a.type = PERF_TYPE_SOFTWARE;
            a.config = PERF_COUNT_SW_CPU_CLOCK;
            a.sample_period = 1000000000u / hz;
            a.sample_type = PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_IP |
                            PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
            a.sample_regs_user = (1u << REG_BP) | (1u << REG_SP) | (1u << REG_IP);
            a.sample_stack_user = stack;
            a.disabled = 1;
            a.inherit = 1;
            a.inherit_thread = 1; // fork children set up their own (measured: else they feed ours)
            a.remove_on_exec = 1;
            a.exclude_kernel = 1;
            a.exclude_hv = 1;
            a.use_clockid = 1;
            a.clockid = CLOCK_MONOTONIC; // sample times on the trace's clock
            a.watermark = 1;
            a.wakeup_watermark = (uint32_t)(data_bytes / 2);
            int fd = perf_open(&a, (int)cpu);
            if (fd >= 0)
                fd = high_fd(fd);
            if (fd < 0) {
                if (errno == ENODEV || errno == EINVAL) {
                    // an offline CPU (ENODEV); EINVAL on the first CPU means an old kernel
                    if (!tried && errno == EINVAL)
                        first_err = EINVAL;
                    break;
                }
                if (!first_err)
                    first_err = errno;
                break;
            }
            size_t map_bytes = (size_t)(pages + 1) * (size_t)page;
            void *m = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
            if (m == MAP_FAILED) {
                close(fd);
                if (errno == EPERM && pages > RING_PAGES_MIN) {
                    pages /= 2; // over the locked-memory budget: try a smaller ring
                    continue;
                }
                lock_refused |= errno == EPERM;
                if (!first_err)
                    first_err = errno;
                break;
            }
            uint64_t id = 0;
            ioctl(fd, PERF_EVENT_IOC_ID, &id);
            rings[n_rings++] = (cpu_ring_t){fd, m, map_bytes, data_bytes, id, false};
            break;
        }
        tried = true;
        if (first_err && n_rings == 0)
            break;
    }
    if (n_rings == 0) {
        reason = first_err == EINVAL ? "this kernel lacks perf_event inherit_thread/remove_on_exec "
                                       "(Linux 5.13+); CPU samples are off"
                 : lock_refused
                     ? "the sampling ring could not be locked in memory (perf_event_mlock_kb, "
                       "RLIMIT_MEMLOCK); CPU samples are off"
                     : refusal(first_err);
        return false;
    }
    return true;
}

// "<why perf is not used>; samples from the CPU-time timer ...": the text up to the first ';'
// of why (the refusal texts end with "; CPU samples are off", which no longer holds).
static const char *timer_reason(const char *why) {
    static char buf[384];
    static const char tail[] = "; CPU samples come from the per-thread CPU-time timer fallback "
                               "(a signal a kernel tick at most, e.g. 250/s, each counted as "
                               "the samples of a tick at the asked rate)";
    size_t n = strcspn(why, ";");
    if (n > sizeof buf - sizeof tail)
        n = sizeof buf - sizeof tail;
    memcpy(buf, why, n);
    memcpy(buf + n, tail, sizeof tail);
    return buf;
}

static void close_all(void) {
    for (unsigned i = 0; i < n_rings; i++)
        close_ring(&rings[i]);
    n_rings = 0;
    for (int i = 0; i < 2; i++) {
        if (stop_fd_ok(stop_fd[i]))
            close(stop_fd[i]);
        stop_fd[i] = -1;
    }
}

static bool open_stop_pipe(void) {
    if (pipe2(stop_fd, O_CLOEXEC | O_NONBLOCK) != 0) {
        stop_fd[0] = stop_fd[1] = -1;
        return false;
    }
    stop_fd[0] = high_fd(stop_fd[0]);
    stop_fd[1] = high_fd(stop_fd[1]);
    struct stat st;
    if (fstat(stop_fd[0], &st) != 0)
        return false;
    stop_dev = st.st_dev;
    stop_ino = st.st_ino;
    return true;
}

void hp_cpu_start(void) {
    if (out)
        return;
    hz = hp_config.cpu_hz;
    source = HPT_CPU_OFF;
    n_samples = n_lost = 0;
    atomic_store_explicit(&threads_started, 0, memory_order_relaxed);
    mono_to_rel = hp_clock_mono_ns() - hp_state_now();
    out_enc = (hpt_dstate_t){0};
    atomic_store(&go, 0);
    atomic_store(&stop_req, false);
    thread_started = false;
#if !defined(__x86_64__)
    const bool arch_ok = false;
#else
    const bool arch_ok = true;
#endif
    if (hp_config.cpu == HP_CPU_OFF) {
        // attached mode turns sampling off itself: no signal handlers in a program that did
        // not ask for them (lifecycle.c)
        reason = hp_config.attached ? "not sampled when attached (heapprof attach)"
                                    : "HEAPPROF_CPU=0";
    } else if (!arch_ok) {
        reason = "CPU samples are only taken on x86-64 so far";
    } else {
        // Our thread first (so that the events, opened next, do not cover it), then the events.
        out = NULL;
        if (open_stop_pipe())
            thread_started = hp_thread_spawn(&thread, cpu_main) == 0;
        if (!thread_started) {
            reason = "cannot start the sampling thread; CPU samples are off";
        } else if (hp_config.cpu != HP_CPU_TIMER && open_events()) {
            source = HPT_CPU_PERF;
            reason = "";
        } else if (hp_config.cpu != HP_CPU_PERF) {
            // perf refused (reason says why) or not wanted: the CPU-time timer instead
            const char *why = hp_config.cpu == HP_CPU_TIMER ? "HEAPPROF_CPU=timer" : reason;
            if (hp_cpu_timer_open(1000000000u / hz, &reason)) {
                source = HPT_CPU_TIMER;
                reason = timer_reason(why);
            }
        }
    }
    // the record ring carries the CPU_INFO even when sampling is off
    out = hp_tbuf_new(0);
    if (!out) {
        source = HPT_CPU_OFF;
    } else {
        write_info();
    }
    if (source != HPT_CPU_OFF && hp_config.cpu != HP_CPU_TIMER && !hp_config.quiet &&
        reason[0])
        hp_diag_line(reason, (char *)NULL); // perf was refused: say which fallback runs
    if (source != HPT_CPU_OFF) {
        events_ioctl(PERF_EVENT_IOC_ENABLE);
        atomic_store_explicit(&go, 1, memory_order_release);
    } else {
        atomic_store_explicit(&go, 2, memory_order_release);
        if (thread_started)
            pthread_join(thread, NULL);
        thread_started = false;
        close_all();
        if (hp_config.cpu != HP_CPU_OFF && !hp_config.quiet && reason[0])
            hp_diag_line(reason, (char *)NULL);
    }
}

// Wakes the sampling thread, asked to stop or to pause, and waits for it to end, at most a
// second. False if it did not (should not happen).
static bool wake_and_join(void) {
    char one = 1;
    // if the program took the descriptor, the thread still wakes by itself within 100 ms
    if (stop_fd_ok(stop_fd[1])) {
        ssize_t w = write(stop_fd[1], &one, 1);
        (void)w;
    }
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 1;
    return pthread_timedjoin_np(thread, NULL, &until) == 0;
}

// The wake-up byte, so that a thread started again does not stop at once.
static void drop_wake_byte(void) {
    char drop;
    while (stop_fd_ok(stop_fd[0]) && read(stop_fd[0], &drop, 1) == 1)
        ;
}

// Asks the sampling thread to stop and waits for it, at most a second. False if it did not
// stop (should not happen); no timer may fire on then, so the timer's are deleted.
static bool stop_thread(void) {
    thread_started = false;
    atomic_store_explicit(&stop_req, true, memory_order_release);
    if (!wake_and_join()) {
        if (source == HPT_CPU_TIMER)
            hp_cpu_timer_close();
        return false;
    }
    return true;
}

// Sampling ends on the calling thread, the sampling thread gone (a pause that is not resumed,
// or a restart that failed): the source closed, what it holds drained, the final CPU_INFO.
static void end_here(void) {
    if (source == HPT_CPU_TIMER) {
        hp_cpu_timer_close();
        drain_timer();
        n_lost += hp_cpu_timer_lost();
    } else {
        events_ioctl(PERF_EVENT_IOC_DISABLE);
        drain_all();
    }
    write_info(); // the sampling thread is gone: this thread may write its ring
    close_all();
}

void hp_cpu_stop(void) {
    if (paused) { // the program's last thread is gone (writer.h): the end is this thread's
        paused = false;
        end_here();
        return;
    }
    if (!thread_started)
        return;
    if (stop_thread())
        close_all(); // else stuck: its fds and rings are left to exit
}

// The timer's sampling thread was stopped for an exec (its timers deleted, its final CPU_INFO
// written); the record ring and the counts are kept, so that a failed exec resumes sampling.
static bool paused_for_exec;

void hp_cpu_before_exec(void) {
    // a timer signal still queued when the image is replaced would meet the default action
    // (terminate): delete the timers first (perf events go by themselves: remove_on_exec); and
    // no switch to the timer from now on, nor one half done while the source is read
    pthread_mutex_lock(&switch_lock);
    exec_pending = true;
    int src = source;
    pthread_mutex_unlock(&switch_lock);
    if (src != HPT_CPU_TIMER || !thread_started || !stop_thread())
        return;
    drop_wake_byte();
    paused_for_exec = true;
}

unsigned hp_cpu_thread_count(void) {
    return thread_started ? 1 : 0;
}

unsigned hp_cpu_pause(void) {
    if (!thread_started)
        return 0;
    atomic_store_explicit(&pause_req, true, memory_order_release);
    bool joined = wake_and_join();
    atomic_store_explicit(&pause_req, false, memory_order_release);
    if (!joined)
        return 0; // stuck (should not happen): it goes on
    drop_wake_byte();
    thread_started = false;
    paused = true;
    return 1;
}

void hp_cpu_resume(void) {
    if (!paused)
        return;
    paused = false;
    // go is still 1: the new thread goes straight back to the source's loop. A thread made
    // now inherits the perf events (made before them, the first was not sampled): its few
    // wake-ups are sampled as the pipeline workers' are.
    thread_started = hp_thread_spawn(&thread, cpu_main) == 0;
    if (thread_started)
        return;
    reason = "cannot restart the sampling thread; CPU samples stopped";
    end_here();
}

void hp_cpu_exec_failed(void) {
    pthread_mutex_lock(&switch_lock);
    exec_pending = false;
    pthread_mutex_unlock(&switch_lock);
    if (!paused_for_exec)
        return;
    paused_for_exec = false;
    atomic_store_explicit(&stop_req, false, memory_order_release);
    const char *why = reason;
    if (!hp_cpu_timer_open(1000000000u / hz, &why)) {
        reason = why;
        write_info(); // the sampling thread is gone: this thread may write its ring
        return;
    }
    // go is still 1: the new thread goes straight to timer_main
    thread_started = hp_thread_spawn(&thread, cpu_main) == 0;
    if (!thread_started) {
        hp_cpu_timer_close();
        reason = "cannot restart the sampling thread after a failed exec; CPU samples stopped";
        write_info();
    }
}

void hp_cpu_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER; // the holder may be a thread the child lacks
    switch_lock = fresh;
    exec_pending = false;
    paused = false;
    atomic_store(&pause_req, false);
    hp_cpu_timer_fork_child();
    // The parent's thread does not exist here; its rings and fds are copies we must drop (the
    // parent keeps its own). out was freed with the other rings (hp_tbuf_forget_all).
    close_all();
    thread_started = false;
    out = NULL;
}
