// SPDX-License-Identifier: MIT
// The trace file and the flusher thread. The file: its creation (HEAPPROF_OUT), its header and
// META chunk (PROCESS, the module map at start), written before the flusher starts. The flusher
// bounds how long a record waits (HEAPPROF_FLUSH_MS), writes the merge watermarks (SYNC chunks),
// starts pipeline workers as they are needed, frees the rings of threads that are gone, and
// writes the TRAILER. It does no per-event work of its own beyond a drainer's share
// (pipeline.c), so nothing here grows with the event rate. Runs with the recursion guard held
// and every signal blocked.
// Chunking and watermarks: docs/trace-format.md#chunks and #merge.
#include "writer.h"

#include "allocscan.h"
#include "chunk.h"
#include "clock.h"
#include "compiler.h"
#include "config.h"
#include "debug.h"
#include "diag.h"
#include "guard.h"
#include "mem.h"
#include "modmap.h"
#include "pipeline.h"
#include "stacktab.h"
#include "state.h"
#include "tbuf.h"
#include "thread.h"
#include "touch_live.h"
#include "traceout.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define NO_BARRIER_MARGIN_NS (20u * 1000 * 1000)
// Raw record bytes written since the last SYNC after which the flusher writes one before its
// interval is up: the reader holds every event between two SYNCs, ~48 bytes each.
#define SYNC_BYTES (8u << 20)
#define SMALL_OUT 4096 // SYNC and TRAILER chunks

static pthread_t thread;
static _Atomic bool running;
static _Atomic bool stop_req;
static _Atomic uint64_t flush_req, flush_done;
static _Atomic bool trailer_req; // exec: end this image's trace with a trailer
static _Atomic uint32_t wake_word;
// hp_writer_pause: the flusher stops its workers and ends, leaving the trace open; how many
// workers it joined is left in paused_workers (read after the join).
static _Atomic bool pause_req;
static unsigned paused_workers;
static bool paused;
// Held from hp_writer_pause to hp_writer_resume, and by hp_writer_stop: one caller at a time
// joins and starts the flusher thread.
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;
// The main thread ended with pthread_exit (hp_writer_main_thread_gone): glibc ends the process
// when its last thread ends, and ours would keep it alive for good, so the flusher watches for
// the moment only the shim's threads are left (orphaned: it then ends the others and itself).
static _Atomic bool main_gone;
static bool orphaned;
static hp_writer_others_t others; // the shim's threads that are not the writer's (lifecycle.c)
static bool have_membarrier;
static uint8_t small_out[SMALL_OUT];
// what rings took with them when they were freed, for the TRAILER
static uint64_t n_lost_reaped, wait_ns_reaped, n_waits_reaped;
static uint64_t last_sync_ns; // this trace's last watermark; the next is at least this
// A periodic SYNC taken but not yet written (flush, sync_complete): its watermark before the
// rings' drains are looked at, and the rings as they were then (each ring's sync_head).
static struct {
    bool on;
    uint64_t w;
    hp_ring_t *head;
} sync_pending;

// ---- file creation ---------------------------------------------------------------------------

// Expands %p to pid (and %% to %) into out. Returns false if it does not fit.
static bool expand(const char *tmpl, char *out, size_t cap, int suffix) {
    char pid[21];
    hp_diag_u64(pid, (uint64_t)getpid());
    size_t n = 0;
    for (const char *s = tmpl; *s; s++) {
        const char *ins = NULL;
        char one[2] = {*s, 0};
        if (s[0] == '%' && s[1] == 'p') {
            ins = pid;
            s++;
        } else if (s[0] == '%' && s[1] == '%') {
            ins = "%";
            s++;
        } else {
            ins = one;
        }
        size_t l = strlen(ins);
        if (n + l + 1 > cap)
            return false;
        memcpy(out + n, ins, l);
        n += l;
    }
    out[n] = 0;
    if (suffix) {
        // NAME.hpt -> NAME.<suffix>.hpt; other names get .<suffix> appended
        char num[21], tail[64];
        hp_diag_u64(num, (uint64_t)suffix);
        size_t base = n;
        if (n >= 4 && !strcmp(out + n - 4, ".hpt"))
            base = n - 4;
        size_t tl = 0;
        tail[tl++] = '.';
        memcpy(tail + tl, num, strlen(num));
        tl += strlen(num);
        if (base != n) {
            memcpy(tail + tl, ".hpt", 4);
            tl += 4;
        }
        if (base + tl + 1 > cap)
            return false;
        memcpy(out + base, tail, tl);
        out[base + tl] = 0;
    }
    return true;
}

// Keeps the fd out of the range programs reuse or dup2 over (fds 0-99).
static int keep_high(int fd) {
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 500);
    if (high < 0)
        return fd;
    close(fd);
    return high;
}

// HEAPPROF_OUT names something that exists and is neither a regular file nor a symlink (for
// those the next free name is taken). A character device (/dev/null, /dev/full) is where the
// user chose to send the trace: it is opened as it is, never a file made beside it
// (/dev/null.1, issue 17 item 10); /dev/null swallows the trace, /dev/full fails the first write
// and the shim stops with its one line. A FIFO, directory, socket, block device or terminal
// cannot hold a trace: one line, and the program runs unprofiled. Returns the fd or -1.
static int open_special(const char *path, mode_t mode) {
    const char *what = S_ISDIR(mode)    ? "a directory"
                       : S_ISFIFO(mode) ? "a FIFO"
                       : S_ISSOCK(mode) ? "a socket"
                       : S_ISBLK(mode)  ? "a block device"
                                        : NULL;
    if (!what) {
        // O_NONBLOCK: should the name have become a FIFO since lstat, open must not wait for a
        // reader (the fstat below then refuses it); cleared once the device is known
        int fd = open(path, O_WRONLY | O_NOFOLLOW | O_NOCTTY | O_CLOEXEC | O_NONBLOCK);
        if (fd < 0) {
            hp_diag_line("cannot write the trace to ", path, ": ", strerror(errno),
                         "; the program runs unprofiled", (char *)NULL);
            return -1;
        }
        struct stat st;
        bool tty = isatty(fd);
        if (!tty && fstat(fd, &st) == 0 && S_ISCHR(st.st_mode) && fcntl(fd, F_SETFL, 0) == 0)
            return keep_high(fd);
        close(fd);
        what = tty ? "a terminal" : "no longer a character device";
    }
    hp_diag_line("HEAPPROF_OUT=", path, " is ", what,
                 ", not a file or device a trace can go to; the program runs unprofiled",
                 (char *)NULL);
    return -1;
}

// Creates the trace file from a HEAPPROF_OUT template (writer.h) and writes the chosen path into
// path. Returns the fd, or -1 after saying why on stderr.
// first: the name the template gave, where path had to be another one (else empty).
static int create_file(const char *tmpl, char *path, size_t cap, char first[HP_PATH_MAX]) {
    for (int i = 0; i < 1000; i++) {
        if (!expand(tmpl, path, cap, i)) {
            hp_diag_line("HEAPPROF_OUT is too long: ", tmpl, (char *)NULL);
            return -1;
        }
        if (i == 0)
            memcpy(first, path, strlen(path) + 1);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (!i)
                first[0] = 0;
            return keep_high(fd);
        }
        if (errno != EEXIST) {
            hp_diag_line("cannot create trace file ", path, ": ", strerror(errno),
                         "; the program runs unprofiled", (char *)NULL);
            return -1;
        }
        // lstat, not stat: a symlink is judged as itself (and skipped), never followed
        struct stat st;
        if (i == 0 && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            first[0] = 0; // the trace goes into it
            return open_special(path, st.st_mode);
        }
    }
    hp_diag_line("cannot find a free trace file name like ", first, (char *)NULL);
    return -1;
}

// ---- META chunk: PROCESS record + the module map at start --------------------------------------

typedef struct meta {
    uint8_t *buf;
    size_t len, cap;
    uint32_t nrec;
} meta_t;

static void meta_emit(void *ctx, const uint8_t *rec, size_t len) {
    meta_t *m = ctx;
    if (m->len + len > m->cap)
        return;
    memcpy(m->buf + m->len, rec, len);
    m->len += len;
    m->nrec++;
}

static uint8_t *put_bytes(uint8_t *p, const void *s, size_t n) {
    p = hpt_put_varint(p, n);
    memcpy(p, s, n);
    return p + n;
}

// PROCESS record from /proc/self/exe and /proc/self/cmdline, read without stdio.
static void meta_process(meta_t *m) {
    static char exe[4096];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    size_t exe_len = n > 0 ? (size_t)n : 0;
    static char cmd[64 * 1024];
    size_t cmd_len = 0;
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t r;
        while (cmd_len < sizeof cmd && (r = read(fd, cmd + cmd_len, sizeof cmd - cmd_len)) > 0)
            cmd_len += (size_t)r;
        close(fd);
    }
    uint8_t *p = m->buf + m->len, *start = p;
    if (m->cap - m->len < exe_len + cmd_len + 2 * 4096 * HPT_VARINT_MAX)
        return;
    *p++ = HPT_REC_PROCESS;
    p = put_bytes(p, exe, exe_len);
    size_t argc = 0;
    for (size_t i = 0; i < cmd_len; i++)
        argc += cmd[i] == 0;
    if (argc > 4096)
        argc = 4096;
    p = hpt_put_varint(p, argc);
    size_t off = 0;
    for (size_t a = 0; a < argc; a++) {
        size_t l = strnlen(cmd + off, cmd_len - off);
        p = put_bytes(p, cmd + off, l < HPT_MAX_STRING ? l : HPT_MAX_STRING);
        off += l + 1;
    }
    m->len += (size_t)(p - start);
    m->nrec++;
}

// ---- watermarks --------------------------------------------------------------------------------

// /proc/self/statm, opened when the trace starts (a program that sandboxes itself later, with
// a seccomp filter that kills on open, must not meet an open from the flusher) and re-read
// with pread. The program may close the descriptor or reuse its number: the file's identity is
// checked before each read, and on a mismatch sampling stops for good. A fork child opens its
// own (the inherited one names the parent).
static int statm_fd = -1;
static dev_t statm_dev;
static ino_t statm_ino;

static void statm_open(void) {
    struct stat st;
    statm_fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (statm_fd >= 0 && fstat(statm_fd, &st) == 0) {
        statm_dev = st.st_dev;
        statm_ino = st.st_ino;
    } else if (statm_fd >= 0) {
        close(statm_fd);
        statm_fd = -1;
    }
}

// The process's resident set in bytes, or 0 if it cannot be read.
static uint64_t rss_bytes(void) {
    struct stat st;
    if (statm_fd < 0)
        return 0;
    if (fstat(statm_fd, &st) != 0 || st.st_dev != statm_dev || st.st_ino != statm_ino) {
        statm_fd = -1; // no longer ours: never read or close it again
        return 0;
    }
    char buf[96];
    ssize_t n = pread(statm_fd, buf, sizeof buf - 1, 0);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    // "size resident shared ...", in pages
    const char *p = buf;
    while (*p && *p != ' ')
        p++;
    uint64_t pages = 0;
    for (p++; *p >= '0' && *p <= '9'; p++)
        pages = pages * 10 + (uint64_t)(*p - '0');
    long page = sysconf(_SC_PAGESIZE);
    return pages * (uint64_t)(page > 0 ? page : 4096);
}

static void write_small(uint16_t type, const uint8_t *raw, size_t len, uint32_t nrec,
                        hpt_dstate_t base) {
    hp_traceout_chunk(type, 0, 0, raw, len, nrec, base, small_out, sizeof small_out, NULL);
}

// Writes a SYNC of watermark w, raised to the last SYNC's, if any chunk was written since then.
// A flush's bound may come out below the last watermark (a thread that has marked itself busy
// but not yet stored its new time counts with its previous one, maybe from long before; without
// membarrier the margin; a ring whose drain lags, in sync_complete): it is still true, but the
// last SYNC promised more, for every chunk after it, so the file's watermarks only rise (the
// reader takes the largest anyway; the resident-set curve wants its times in order).
// hp_pipeline_stress under TSan found steps back of up to 16 ms, with 1 ms flushes and
// more threads than CPUs.
static void write_sync(uint64_t w) {
    if (!hp_traceout_take_count())
        return;
    if (w < last_sync_ns)
        w = last_sync_ns;
    last_sync_ns = w;
    // base_addr carries the resident set at the flush: heaptrack's RSS curve, at the flush
    // interval (docs/trace-format.md#chunks)
    write_small(HPT_CHUNK_SYNC, NULL, 0, 0, (hpt_dstate_t){.time_ns = w, .addr = rss_bytes()});
}

// Writes the SYNC a periodic flush took (sync_pending), one nap later: a ring that has written
// everything up to its head at the flush (out_head >= sync_head) no longer holds the watermark
// back; one that has not holds it at its last written record (out_t), which the records it has
// not written yet are at least as late as. The workers had the nap to drain what the flush
// queued; before, the SYNC was written at once and every ring with records then, the CPU
// sampler's among them, held it at its previous drain: a whole interval behind, and the reader
// holds every event between two watermarks (c_churn: ~2.1 M events at each SYNC, ~1.1 M
// without the sampler's ring). Where a ring's drain is slower the watermark is what it was.
static void sync_complete(void) {
    if (!sync_pending.on)
        return;
    sync_pending.on = false;
    uint64_t w = sync_pending.w;
    for (hp_ring_t *r = sync_pending.head; r; r = r->next)
        if (atomic_load_explicit(&r->out_head, memory_order_acquire) < r->sync_head) {
            uint64_t ot = atomic_load_explicit(&r->out_t, memory_order_acquire);
            if (ot < w)
                w = ot;
        }
    write_sync(w);
}

// Takes a SYNC whose watermark bounds from below every record in a chunk after it
// (docs/trace-format.md#merge). full: first makes sure every ring got as far as its head at the
// watermark (at exit, where a flush was asked for, or while no worker runs: the flusher then
// drains itself), so that everything committed before the call is in the file, and writes it.
// Otherwise (the periodic SYNC) it waits for nothing: it queues the rings with records for the
// workers and leaves the SYNC to sync_complete, after the flusher's next nap. Waiting for every
// ring's drain made a SYNC every ~500 ms instead of 50 with 8 threads on 2 CPUs (the flusher's
// share of them), and the reader held up to 9.8 M events between two (c_threads 8: 500 MiB).
// The rings of the snapshot stay until then: only the flusher reaps them, after sync_complete.
// Called with no SYNC pending (flusher_main completes it first).
static void flush(bool full) {
    HP_ASSERT(!sync_pending.on);
    uint64_t w = hp_state_now();
    if (have_membarrier)
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else
        w = w > NO_BARRIER_MARGIN_NS ? w - NO_BARRIER_MARGIN_NS : 0;
    hp_ring_t *head = hp_tbuf_list_lock();
    hp_tbuf_list_unlock(); // only this thread unlinks rings, so the snapshot stays walkable
    for (hp_ring_t *r = head; r; r = r->next) {
        // busy is read before head: a thread that is not busy now has committed all it timed
        if (atomic_load_explicit(&r->busy, memory_order_acquire)) {
            // acquire: a time raised after a commit (hp_record_realloc_end) comes with its head
            uint64_t lt = atomic_load_explicit(&r->last_t, memory_order_acquire);
            if (lt < w)
                w = lt;
        }
        r->sync_head = atomic_load_explicit(&r->head, memory_order_acquire);
        if (r->sync_head != atomic_load_explicit(&r->tail, memory_order_acquire))
            hp_pipeline_enqueue(r);
    }
    if (full) {
        hp_pipeline_settle(head);
        for (hp_ring_t *r = head; r; r = r->next) {
            // A drainer moves the tail before it writes: only its lock says the chunk is out,
            // so every ring is locked once, also one that looked empty (its drain may be under
            // way).
            pthread_mutex_lock(&r->drain);
            if (atomic_load_explicit(&r->tail, memory_order_relaxed) < r->sync_head)
                hp_pipeline_drain(r);
            // what the SYNC promises: every record committed before the watermark is out
            HP_ASSERT(atomic_load_explicit(&r->tail, memory_order_relaxed) >= r->sync_head);
            pthread_mutex_unlock(&r->drain);
        }
    } else {
        sync_pending.on = true;
        sync_pending.w = w;
        sync_pending.head = head;
        return;
    }
    write_sync(w);
}

// A ring can go once its thread ran its exit hook, everything it committed is written, no
// drainer holds it, and the kernel says the thread is gone (its TLS destructors may still
// free after the exit hook).
static bool ring_is_dead(hp_ring_t *r) {
    if (!atomic_load_explicit(&r->closed, memory_order_acquire) ||
        atomic_load_explicit(&r->queued, memory_order_acquire) ||
        atomic_load_explicit(&r->head, memory_order_acquire) !=
            atomic_load_explicit(&r->tail, memory_order_acquire))
        return false;
    if (syscall(SYS_tgkill, getpid(), r->tid, 0) == 0 || errno != ESRCH)
        return false;
    if (pthread_mutex_trylock(&r->drain) != 0)
        return false;
    pthread_mutex_unlock(&r->drain);
    n_lost_reaped += r->n_lost;
    wait_ns_reaped += r->wait_ns;
    n_waits_reaped += r->n_waits;
    return true;
}

static void write_trailer(void) {
    uint64_t lost = n_lost_reaped + hp_pipeline_lost(), wait_ns = wait_ns_reaped,
             n_waits = n_waits_reaped;
    for (hp_ring_t *r = hp_tbuf_list_lock(); r; r = r->next) {
        lost += r->n_lost;
        wait_ns += r->wait_ns;
        n_waits += r->n_waits;
    }
    hp_tbuf_list_unlock();
    uint8_t buf[96], *p = buf;
    *p++ = HPT_REC_TRAILER;
    p = hpt_put_varint(p, hp_pipeline_events());
    p = hpt_put_varint(p, lost);
    p = hpt_put_varint(p, hp_stacktab_count());
    p = hpt_put_varint(p, hp_stacktab_overflows());
    p = hpt_put_varint(p, 0); // late events: the reader counts them now
    p = hpt_put_varint(p, wait_ns);
    p = hpt_put_varint(p, n_waits);
    p = hpt_put_varint(p, hp_pipeline_workers_cpu_ns());
    p = hpt_put_varint(p, hp_pipeline_thread_cpu_ns()); // this thread: the flusher
    p = hpt_put_varint(p, hp_pipeline_most_workers());
    HP_ASSERT((size_t)(p - buf) <= sizeof buf);
    write_small(HPT_CHUNK_TRAILER, buf, (size_t)(p - buf), 1, (hpt_dstate_t){0});
}

// ---- the flusher thread ------------------------------------------------------------------------

static void wake(void) {
    atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
    syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void wait_for_wake(uint32_t seen, uint32_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

// Whether the program's own threads are all gone, its main thread a zombie: the kernel counts
// it, this thread, the workers and the shim's other threads, and nothing else.
static bool only_ours_left(void) {
    long n = hp_thread_kernel_count();
    unsigned ours = 2 + hp_pipeline_worker_count() + (others.count ? others.count() : 0);
    return n > 0 && (unsigned long)n <= ours;
}

// The flusher's work, on the flusher thread until a stop or a pause; on the calling thread when
// the thread cannot be started again after a pause (end_here) or the program's threads are all
// gone (hp_writer_stop).
static void flusher_loop(void) {
    uint64_t interval_ns = (uint64_t)hp_config.flush_ms * 1000000u;
    uint32_t nap_ms = hp_config.flush_ms / 4 ? hp_config.flush_ms / 4 : 1;
    uint64_t last_flush = hp_state_now(), pending = 0;
    for (;;) {
        uint32_t seen = atomic_load_explicit(&wake_word, memory_order_acquire);
        bool stopping = atomic_load_explicit(&stop_req, memory_order_acquire);
        if (!stopping && atomic_load_explicit(&main_gone, memory_order_acquire) && only_ours_left()) {
            paused_workers = hp_pipeline_stop();
            orphaned = true;
            return;
        }
        if (!stopping && atomic_load_explicit(&pause_req, memory_order_acquire)) {
            // what is queued is drained by the workers before they go; what comes meanwhile
            // waits in the rings (a full one is drained by its owner) for the next flusher
            paused_workers = hp_pipeline_stop();
            return;
        }
        uint64_t want = atomic_load_explicit(&flush_req, memory_order_acquire);
        hp_clock_calibrate();
        if (stopping)
            hp_pipeline_stop(); // the last records are drained here, after every worker's
        else
            hp_pipeline_grow();
        // the SYNC the last iteration's flush took, if any; then the rings it looked at may go,
        // and so at every nap: a program that makes short threads gets their rings back soon
        sync_complete();
        hp_tbuf_reap(ring_is_dead);
        pending += hp_traceout_take_bytes();
        if (stopping || want != atomic_load_explicit(&flush_done, memory_order_relaxed) ||
            pending >= SYNC_BYTES || hp_state_now() - last_flush >= interval_ns) {
            flush(stopping || want != atomic_load_explicit(&flush_done, memory_order_relaxed) ||
                  !hp_pipeline_has_workers());
            pending = 0;
            last_flush = hp_state_now();
            if (!sync_pending.on) // else after sync_complete, which reads the snapshot's rings
                hp_tbuf_reap(ring_is_dead);
        }
        // blocks still live at exit get their bytes-touched figure, after the last drain
        if (stopping && hp_config.touch && hp_config.touch_live)
            hp_touch_live_emit();
        // a trailer is asked for just before exec: this image writes nothing after it
        if (stopping || atomic_exchange(&trailer_req, false))
            write_trailer();
        if (stopping) {
            hp_pipeline_end();
            hp_tbuf_pool_drop();
        }
        atomic_store_explicit(&flush_done, want, memory_order_release);
        if (stopping || atomic_load_explicit(&hp_state, memory_order_relaxed) == HP_STATE_DISABLED)
            break;
        wait_for_wake(seen, nap_ms);
    }
}

static void *flusher_main(void *arg) {
    (void)arg;
    hp_tls_guard = 1;
    prctl(PR_SET_NAME, "heapprof-flush", 0, 0, 0);
    flusher_loop();
    if (orphaned) {
        // The workers are gone; the others go too, and this thread returns: the process's last,
        // so glibc calls exit(0) on it, as it would have on the program's last, and the exit
        // handlers run here, the program's recorded (the trace's end among them:
        // hp_writer_stop finds the writer paused and ends it on this thread).
        if (others.pause)
            others.pause();
        pthread_mutex_lock(&control_lock);
        paused = true;
        pthread_mutex_unlock(&control_lock);
        hp_tls_guard = 0;
    }
    return NULL;
}

// Writes the file header and the META chunk synchronously, then starts the flusher thread.
// Takes ownership of fd, created at path (kept to reopen the file if the program closes the fd).
// Returns false (fd closed) if any step fails.
static bool start(int fd, const char *path, const hpt_file_hdr_t *hdr, const uint8_t *meta,
                  size_t meta_len, uint32_t meta_records) {
    have_membarrier =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    hpt_file_hdr_t h = *hdr;
    if (have_membarrier)
        h.flags |= HPT_FILE_HAS_MEMBARRIER;
    if (!hp_traceout_open(fd, path, &h))
        return false;
    n_lost_reaped = wait_ns_reaped = n_waits_reaped = 0;
    last_sync_ns = 0; // a fork child's trace starts its own clock
    sync_pending.on = false;
    size_t cap = hp_chunk_bound(meta_len);
    uint8_t *out = hp_mem_map(cap);
    bool ok = out && hp_traceout_chunk(HPT_CHUNK_META, 0, 0, meta, meta_len, meta_records,
                                       (hpt_dstate_t){0}, out, cap, NULL);
    hp_mem_unmap(out, cap);
    if (!ok || !hp_pipeline_start())
        goto fail;
    atomic_store(&stop_req, false);
    if (hp_thread_spawn(&thread, flusher_main) != 0) {
        hp_diag_line("cannot start the trace writer thread; the program runs unprofiled",
                     (char *)NULL);
        hp_pipeline_end();
        goto fail;
    }
    atomic_store(&running, true);
    return true;
fail:
    hp_traceout_close();
    return false;
}

bool hp_writer_start(void) {
    char path[HP_PATH_MAX];
    char first[HP_PATH_MAX];
    int fd = create_file(hp_config.out, path, sizeof path, first);
    if (fd < 0)
        return false;
    if (statm_fd < 0)
        statm_open();
    meta_t m = {0};
    m.cap = 1u << 20;
    // A later trace of an attached process (heapprof attach again) starts with the stacks
    // interned so far: threads go on using their ids (docs/design.md#attach).
    uint64_t n_known_stacks = hp_config.attached ? hp_stacktab_count() : 0;
    if (n_known_stacks)
        m.cap = HPT_CHUNK_MAX_RAW - 4096 < (1u << 20) + n_known_stacks * HP_REC_MAX
                    ? HPT_CHUNK_MAX_RAW - 4096
                    : (size_t)((1u << 20) + n_known_stacks * HP_REC_MAX);
    m.buf = hp_mem_map(m.cap);
    if (!m.buf) {
        close(fd);
        return false;
    }
    meta_process(&m);
    hpt_dstate_t st = {0};
    hp_modmap_scan(&st, hp_state_now(), meta_emit, &m);
    bool alloc_scan = hp_allocscan_emit(meta_emit, &m);
    if (n_known_stacks)
        hp_stacktab_each_record(meta_emit, &m);

    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    hpt_file_hdr_t h = {0};
    memcpy(h.magic, HPT_MAGIC, sizeof h.magic);
    h.version = HPT_VERSION;
    h.hdr_bytes = sizeof h;
    h.start_ns = hp_state_start_ns();
    h.start_unix_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    h.pid = (uint32_t)getpid();
    h.ppid = hp_config.fork_parent ? hp_config.fork_parent : (uint32_t)getppid();
    h.run_id = hp_config.run_id;
    if (alloc_scan)
        h.flags |= HPT_FILE_ALLOC_SCAN;
    if (hp_config.touch) {
        h.flags |= HPT_FILE_TOUCH;
        h.touch_fill_max = hp_config.touch_fill_max;
    }
    if (hp_config.attached)
        h.flags |= HPT_FILE_ATTACHED;
    if (hp_config.fork_parent)
        h.flags |= HPT_FILE_FORKED;
    if (hp_config.sample_bytes) {
        h.flags |= HPT_FILE_SAMPLED;
        h.sample_bytes = hp_config.sample_bytes;
    }
    bool ok = start(fd, path, &h, m.buf, m.len, m.nrec);
    hp_mem_unmap(m.buf, m.cap);
    // one line an image: an exec chain under one pid (pyenv's shims: bash, pyenv, python) finds
    // the name taken by the image before it each time
    if (ok && hp_config_announces())
        hp_diag_line("writing trace to ", path, first[0] ? " (" : "", first,
                     first[0] ? " exists)" : "", (char *)NULL);
    return ok;
}

bool hp_writer_running(void) {
    return atomic_load(&running);
}

void hp_writer_flush_sync(bool with_trailer) {
    if (!atomic_load(&running))
        return;
    if (with_trailer)
        atomic_store(&trailer_req, true);
    uint64_t want = atomic_fetch_add(&flush_req, 1) + 1;
    wake();
    for (int i = 0; i < 2000 && atomic_load(&flush_done) < want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

// Lets events already in flight on other threads commit before the last drain.
static void wait_for_busy_rings(void) {
    for (int i = 0; i < 100; i++) {
        bool busy = false;
        for (hp_ring_t *r = hp_tbuf_list_lock(); r; r = r->next) // the lock keeps reaping away
            busy |= atomic_load(&r->busy) != 0;
        hp_tbuf_list_unlock();
        if (!busy)
            break;
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

// After the trace's last flush: the program may run on (a detach, or a failed restart after a
// pause): leave it no descriptor of ours.
static void close_files(void) {
    hp_traceout_close();
    if (statm_fd >= 0) {
        close(statm_fd);
        statm_fd = -1;
    }
}

void hp_writer_stop(void) {
    pthread_mutex_lock(&control_lock);
    if (atomic_exchange(&running, false)) {
        wait_for_busy_rings();
        atomic_store(&stop_req, true);
        if (paused) { // no flusher: the program's threads were all gone (orphaned)
            paused = false;
            flusher_loop();
        } else {
            wake();
            pthread_join(thread, NULL);
        }
        close_files();
    }
    pthread_mutex_unlock(&control_lock);
}

void hp_writer_main_thread_gone(void) {
    atomic_store_explicit(&main_gone, true, memory_order_release);
}

void hp_writer_set_others(const hp_writer_others_t *o) {
    others = *o;
}

unsigned hp_writer_pause(void) {
    pthread_mutex_lock(&control_lock);
    if (!atomic_load(&running)) {
        pthread_mutex_unlock(&control_lock);
        return 0;
    }
    HP_ASSERT(!paused); // control_lock is held from each pause to its resume
    atomic_store(&pause_req, true);
    wake();
    pthread_join(thread, NULL);
    atomic_store(&pause_req, false);
    paused = true;
    return 1 + paused_workers; // control_lock stays held until hp_writer_resume
}

// The flusher cannot be started again: the trace ends here, on the calling thread, with every
// event recorded so far in it and a TRAILER; the program runs on unprofiled.
static void end_here(void) {
    hp_state_disable("cannot restart the trace writer thread; profiling stopped");
    atomic_store(&running, false);
    wait_for_busy_rings();
    atomic_store(&stop_req, true);
    flusher_loop();
    close_files();
}

void hp_writer_resume(void) {
    HP_ASSERT(paused);
    paused = false;
    hp_pipeline_resume();
    if (hp_thread_spawn(&thread, flusher_main) != 0)
        end_here();
    pthread_mutex_unlock(&control_lock);
}

void hp_writer_fork_prepare(void) {
    hp_pipeline_fork_prepare();
    hp_traceout_fork_prepare();
}

void hp_writer_fork_parent(void) {
    hp_traceout_fork_parent();
    hp_pipeline_fork_parent();
}

void hp_writer_fork_child(void) {
    if (statm_fd >= 0) { // it names the parent: the child's trace opens its own
        close(statm_fd);
        statm_fd = -1;
    }
    hp_traceout_fork_child();
    hp_pipeline_fork_child();
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER; // a pause on another thread holds it
    control_lock = fresh;
    paused = false;
    orphaned = false;
    atomic_store(&main_gone, false); // this process's main thread is the one that forked
    atomic_store(&pause_req, false);
    atomic_store(&running, false);
    atomic_store(&flush_req, 0);
    atomic_store(&flush_done, 0);
    atomic_store(&trailer_req, false);
}
