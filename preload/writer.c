// SPDX-License-Identifier: MIT
// The writer thread. It alone writes the trace file; app threads only append to their rings.
// Runs with the recursion guard held for its whole life, so its own allocations (zstd) pass
// through unrecorded; all its signals are blocked so the host's handlers never run on it.
// Chunking and watermarks: docs/trace-format.md#chunks and #merge.
#include "writer.h"

#include "chunk.h"
#include "clock.h"
#include "compiler.h"
#include "config.h"
#include "diag.h"
#include "guard.h"
#include "mem.h"
#include "resolve.h"
#include "stacktab.h"
#include "state.h"
#include "tbuf.h"

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
#include <zstd.h>

#define STAGE_FLUSH_BYTES (1u << 20) // write once this much is staged, even before the interval
// Readable bytes every stage keeps past its records: the merge's decoder (fast_event) reads
// that far without checking, more than the longest event (a REALLOC: a tag and six varints) and
// put_raw's copy from an event's stack id or size take.
#define HP_STAGE_SLACK 64
_Static_assert(HP_STAGE_SLACK >= 1 + 6 * HPT_VARINT_MAX &&
                   HP_STAGE_SLACK >= 1 + 3 * HPT_VARINT_MAX + HP_RESOLVE_EV_SLACK,
               "stage slack");
#define NO_BARRIER_MARGIN_NS (20u * 1000 * 1000)

static int trace_fd = -1;
static char trace_path[HP_PATH_MAX]; // absolute, to reopen the file if the program closes our fd
static dev_t trace_dev;
static ino_t trace_ino;
static pthread_t thread;
static _Atomic bool running;
static _Atomic bool stop_req;
static _Atomic uint64_t flush_req, flush_done;
static _Atomic bool trailer_req; // exec: end this image's trace with a trailer
static pthread_mutex_t io_lock = PTHREAD_MUTEX_INITIALIZER; // held for a whole write round
static uint64_t seq;
static ZSTD_CCtx *cctx;
static uint8_t *out_buf;
static size_t out_cap;
static bool have_membarrier;
static uint64_t n_events, n_lost_reaped;

// The heap stream (docs/trace-format.md#heap): app threads' records merged, blocks named by
// serial, staged here until a HEAP chunk is written.
#define HEAP_OUT_BYTES (1u << 20)
static hp_resolve_t heap;
static bool heap_ready;
static hp_hout_t heap_out;      // the chunk being written, by column
static uint8_t *heap_payload;   // where its columns are put together for hp_chunk_encode
#define HEAP_COL_CAP (HEAP_OUT_BYTES + HP_RESOLVE_REC_MAX)
#define HEAP_PAYLOAD_CAP (HPT_HCOLS * HEAP_COL_CAP + HP_HOUT_TABLE_MAX)
static hpt_dstate_t heap_base; // the resolver's state at the start of heap_out
static uint32_t heap_base_tid;

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

int hp_writer_create_file(const char *tmpl, char *path, size_t cap) {
    char first[HP_PATH_MAX];
    for (int i = 0; i < 1000; i++) {
        if (!expand(tmpl, path, cap, i)) {
            hp_diag_line("HEAPPROF_OUT is too long: ", tmpl, (char *)NULL);
            return -1;
        }
        if (i == 0)
            memcpy(first, path, strlen(path) + 1);
        int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (fd >= 0) {
            if (i && !hp_config.quiet)
                hp_diag_line(first, " exists; writing the trace to ", path, " instead",
                             (char *)NULL);
            return keep_high(fd);
        }
        if (errno != EEXIST) {
            hp_diag_line("cannot create trace file ", path, ": ", strerror(errno),
                         "; the program runs unprofiled", (char *)NULL);
            return -1;
        }
        // lstat, not stat: a symlink is judged as itself (and skipped), never followed
        struct stat st;
        if (i == 0 && lstat(path, &st) == 0 && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode))
            return open_special(path, st.st_mode);
    }
    hp_diag_line("cannot find a free trace file name like ", first, (char *)NULL);
    return -1;
}

// ---- output ----------------------------------------------------------------------------------

static bool fd_is_ours(int fd) {
    struct stat st;
    return fd >= 0 && fstat(fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino;
}

// Programs close "all" descriptors (daemons) or dup2 over them. Before each write round, check
// that trace_fd is still our file; if not, reopen it by path and leave the number to its new
// owner (never close or write to a descriptor the program now uses).
static bool ensure_fd(void) {
    if (fd_is_ours(trace_fd))
        return true;
    int fd = open(trace_path, O_WRONLY | O_APPEND | O_NOFOLLOW | O_CLOEXEC);
    if (fd >= 0 && fd_is_ours(fd)) {
        int high = fcntl(fd, F_DUPFD_CLOEXEC, 500);
        if (high >= 0) {
            close(fd);
            fd = high;
        }
        trace_fd = fd;
        return true;
    }
    if (fd >= 0)
        close(fd);
    trace_fd = -1;
    hp_state_disable("the trace file was closed and cannot be reopened; profiling stopped");
    return false;
}

static bool write_all(const void *buf, size_t n) {
    const char *p = buf;
    while (n) {
        ssize_t w = write(trace_fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0) {
            hp_state_disable(w < 0 && errno == ENOSPC
                                 ? "disk full: the trace is incomplete; profiling stopped"
                                 : "cannot write the trace: it is incomplete; profiling stopped");
            trace_fd = -1;
            return false;
        }
        p += w;
        n -= (size_t)w;
    }
    return true;
}

static bool ensure_out(size_t raw) {
    size_t need = hp_chunk_bound(raw);
    if (need <= out_cap)
        return true;
    uint8_t *b = hp_mem_map(need);
    if (!b)
        return false;
    hp_mem_unmap(out_buf, out_cap);
    out_buf = b;
    out_cap = need;
    return true;
}

static bool write_chunk(uint16_t type, uint32_t tid, const uint8_t *raw, size_t len, uint32_t nrec,
                        hpt_dstate_t base) {
    if (trace_fd < 0 || !ensure_out(len))
        return false;
    hpt_chunk_hdr_t h = {0};
    h.type = type;
    h.tid = tid;
    h.n_records = nrec;
    h.seq = seq++;
    h.base_time_ns = base.time_ns;
    h.base_addr = base.addr;
    size_t n = hp_chunk_encode(out_buf, out_cap, &h, raw, len, cctx);
    return n && write_all(out_buf, n);
}

// ---- draining --------------------------------------------------------------------------------

static bool is_event(uint8_t tag) {
    return tag == HPT_REC_MALLOC || tag == HPT_REC_CALLOC || tag == HPT_REC_ALIGNED ||
           tag == HPT_REC_FREE || tag == HPT_REC_REALLOC;
}

// Moves r's committed records into its staging buffer. Returns false on internal corruption.
static bool drain(hp_ring_t *r) {
    uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
    uint64_t t = atomic_load_explicit(&r->tail, memory_order_relaxed);
    atomic_store_explicit(&r->wake_pending, 0, memory_order_relaxed);
    if (h == t)
        return true;
    size_t n = (size_t)(h - t);
    // HP_STAGE_SLACK: the merge's decoder reads that far past the records
    if (!r->stage || r->stage_len + n + HP_STAGE_SLACK > r->stage_cap) {
        // Usually a round starts below STAGE_FLUSH_BYTES and drains each ring at most twice; a
        // stage only grows past that when the merge must hold records back for a long time (a
        // thread stopped in the middle of an event keeps the watermark down).
        size_t cap = STAGE_FLUSH_BYTES + 2 * (size_t)r->cap;
        while (cap < r->stage_len + n + HP_STAGE_SLACK)
            cap *= 2;
        uint8_t *fresh = hp_mem_map(cap);
        if (!fresh)
            return false;
        if (r->stage) {
            memcpy(fresh, r->stage, r->stage_len);
            hp_mem_unmap(r->stage, r->stage_cap);
        }
        r->stage = fresh;
        r->stage_cap = cap;
    }
    if (!r->stage_len) {
        r->stage_base = r->wstate;
        r->stage_nrec = 0;
    }
    uint8_t *dst = r->stage + r->stage_len;
    uint32_t off = (uint32_t)t & (r->cap - 1), first = r->cap - off;
    if (n <= first) {
        memcpy(dst, r->data + off, n);
    } else {
        memcpy(dst, r->data + off, first);
        memcpy(dst + first, r->data, n - first);
    }
    atomic_store_explicit(&r->tail, h, memory_order_release);
    r->stage_len += n;
    r->stage_fresh += n;
    if (r->tid != 0)
        return true; // an app thread's records are decoded once, by the merge
    // Walk the records to learn the delta state at the end (the next chunk's base) and count them.
    const uint8_t *p = dst, *end = dst + n;
    hpt_rec_t rec;
    while (p < end) {
        if (!(p = hpt_rec_decode(p, end, &r->wstate, &rec)))
            return false;
        r->stage_nrec++;
        n_events += is_event(rec.tag);
    }
    return true;
}

static bool write_stage(hp_ring_t *r) {
    if (!r->stage_len)
        return true;
    bool ok = write_chunk(HPT_CHUNK_EVENTS, r->tid, r->stage, r->stage_len, r->stage_nrec,
                          r->stage_base);
    r->stage_len = 0;
    r->stage_fresh = 0;
    r->stage_nrec = 0;
    return ok;
}

// ---- the heap stream: merging app threads' stages ------------------------------------------

static bool write_heap(void) {
    if (!hp_hout_bytes(&heap_out))
        return true;
    size_t len = hp_hout_assemble(&heap_out, heap_payload);
    bool ok = write_chunk(HPT_CHUNK_HEAP, heap_base_tid, heap_payload, len, heap.n_out, heap_base);
    heap.n_out = 0;
    hp_resolve_chunk_start(&heap);
    heap_base = heap.enc;
    heap_base_tid = heap.tid;
    return ok;
}

// An app thread's heap event, decoded without hpt_rec_decode's checks: these bytes are the
// shim's own, and every stage keeps HP_STAGE_SLACK readable bytes past its records, so even
// damaged bytes are never read past the mapping (an event that ends past the records is
// damage). Returns NULL for any other record; *t and *a, the delta state, move only for an
// event. A quarter of the writer's instructions went to the checked decoder (callgrind,
// c_churn).
// Unrolled for the lengths that occur (times and address deltas take 2-3 bytes, touch counts
// 1): a byte costs a load, a test and a shift-or, without a loop counter.
static inline const uint8_t *fast_varint(const uint8_t *p, uint64_t *v) {
    uint64_t x = p[0];
    if (HP_LIKELY(!(x & 0x80))) {
        *v = x;
        return p + 1;
    }
    x ^= (uint64_t)p[1] << 7 ^ 0x80; // the continuation bit is known to be set: flip it off
    if (!(p[1] & 0x80)) {
        *v = x;
        return p + 2;
    }
    x ^= (uint64_t)p[2] << 14 ^ (0x80ull << 7);
    if (!(p[2] & 0x80)) {
        *v = x;
        return p + 3;
    }
    x ^= 0x80ull << 14;
    p += 3;
    for (unsigned shift = 21; shift < 64; shift += 7) { // up to 10 bytes in all
        x |= (uint64_t)(*p & 0x7f) << shift;
        if (!(*p++ & 0x80))
            break;
    }
    *v = x;
    return p;
}

// The byte after the varint at p (at most HPT_VARINT_MAX on): the first byte without the
// continuation bit, found in one 8-byte load for values below 2^56.
static inline const uint8_t *skip_varint(const uint8_t *p) {
    uint64_t w;
    memcpy(&w, p, sizeof w);
    uint64_t stop = ~w & 0x8080808080808080ull;
    if (HP_LIKELY(stop))
        return p + (__builtin_ctzll(stop) >> 3) + 1;
    return p + (p[8] & 0x80 ? 10 : 9);
}

// Skips a varint the HEAP columns take as it is: where its bytes start and how many.
static inline const uint8_t *raw_varint(const uint8_t *p, const uint8_t **at, uint8_t *len) {
    *at = p;
    p = skip_varint(p);
    *len = (uint8_t)(p - *at);
    return p;
}

static inline __attribute__((always_inline)) const uint8_t *
fast_event(const uint8_t *p, uint64_t *t, uint64_t *a, hp_resolve_ev_t *e) {
    uint64_t v, time = *t, addr = *a;
    e->tag = *p++;
    switch (e->tag) {
    case HPT_REC_MALLOC:
    case HPT_REC_CALLOC:
    case HPT_REC_ALIGNED:
        p = fast_varint(p, &v);
        e->time_ns = time += v;
        p = raw_varint(p, &e->stack_p, &e->stack_len);
        p = fast_varint(p, &v);
        e->addr = addr += (uint64_t)hpt_unzigzag(v);
        e->size_p = p;
        p = skip_varint(p);
        if (e->tag == HPT_REC_ALIGNED)
            p = skip_varint(p);
        e->size_len = (uint8_t)(p - e->size_p);
        break;
    case HPT_REC_FREE:
        p = fast_varint(p, &v);
        e->time_ns = time += v;
        p = fast_varint(p, &v);
        e->addr = addr += (uint64_t)hpt_unzigzag(v);
        p = fast_varint(p, &v);
        e->touch = 0;
        if (v-- == 0)
            break;
        if ((v & 3) > HPT_TOUCH_FILL_SAMPLED)
            return NULL;
        e->touch = (uint8_t)(1 + (v & 3));
        e->touched = e->touched_nz = v >> 2;
        if ((v & 3) != HPT_TOUCH_RESIDENT) {
            p = fast_varint(p, &v);
            e->touched_nz += (uint64_t)hpt_unzigzag(v);
        }
        break;
    case HPT_REC_REALLOC:
        p = fast_varint(p, &v);
        e->time_ns = time += v;
        p = fast_varint(p, &v);
        e->time2_ns = time += v;
        p = raw_varint(p, &e->stack_p, &e->stack_len);
        p = fast_varint(p, &v);
        e->old_addr = addr += (uint64_t)hpt_unzigzag(v);
        p = fast_varint(p, &v);
        e->addr = addr += (uint64_t)hpt_unzigzag(v);
        p = fast_varint(p, &e->size);
        break;
    default:
        return NULL;
    }
    *t = time;
    *a = addr;
    return p;
}

// look_load for a record that is not a heap event: checked now for its length and time, and
// decoded again when it goes out. Rare (stacks, threads, modules).
static HP_NOINLINE const uint8_t *look_other(hp_ring_t *r, const uint8_t *p, hp_ring_look_t *l) {
    hpt_dstate_t st = {.time_ns = r->m_dtime, .addr = r->m_daddr};
    hpt_rec_t rec;
    const uint8_t *q = hpt_rec_decode(p, r->stage + r->stage_len, &st, &rec);
    if (!q)
        return NULL;
    l->ev.tag = rec.tag;
    // a STACK is untimed: it goes out before the event that uses it
    l->ev.time_ns = rec.tag == HPT_REC_STACK ? l->time0 : rec.time_ns;
    r->m_dtime = st.time_ns;
    r->m_daddr = st.addr;
    return q;
}

// Decodes the record at r's decoding point into its queue (which has room) and fetches the
// table slot it will look up. Returns 1, or 0 when the stage has no more, or -1 if its bytes do
// not decode (the ring was overwritten: an internal error).
static inline __attribute__((always_inline)) int look_load(hp_ring_t *r) {
    if (r->m_dpos >= r->stage_len)
        return 0;
    hp_ring_look_t *l = &r->m_q[(r->m_qh + r->m_qn) & (HP_RING_LOOKAHEAD - 1)];
    const uint8_t *p = r->stage + r->m_dpos;
    l->pos = r->m_dpos;
    l->time0 = r->m_dtime;
    l->addr0 = r->m_daddr;
    const uint8_t *q = fast_event(p, &r->m_dtime, &r->m_daddr, &l->ev);
    if (HP_LIKELY(q)) {
        if (q > r->stage + r->stage_len)
            return -1;
        uint64_t a = l->ev.tag == HPT_REC_REALLOC ? l->ev.old_addr : l->ev.addr;
        if (a)
            hp_resolve_prefetch(&heap, a);
    } else if (!(q = look_other(r, p, l))) {
        return -1;
    }
    r->m_dpos = (size_t)(q - r->stage);
    r->m_qn++;
    return 1;
}

// Hands r's oldest record (its half r->m_half of a REALLOC) to the heap stream.
static bool look_put(hp_ring_t *r, const hp_ring_look_t *l) {
    if (is_event(l->ev.tag))
        return hp_resolve_ev(&heap, &heap_out, r->tid, &l->ev, r->m_half, &r->m_pend);
    hpt_dstate_t st = {.time_ns = l->time0, .addr = l->addr0};
    hpt_rec_t rec;
    const uint8_t *p = r->stage + l->pos;
    const uint8_t *q = hpt_rec_decode(p, r->stage + r->stage_len, &st, &rec);
    if (!q)
        return false;
    if (rec.tag == HPT_REC_STACK)
        rec.time_ns = l->time0;
    return hp_resolve_rec(&heap, &heap_out, r->tid, &rec, p, q, 0, &r->m_pend);
}

static inline bool ring_less(const hp_ring_t *a, const hp_ring_t *b) {
    return a->m_key < b->m_key || (a->m_key == b->m_key && a->tid < b->tid);
}

// The ring that comes next after h[0] (NULL: no other). While h[0]'s next record still sorts
// before it, h[0] stays on top and the heap needs no sifting: a thread that ran alone for a
// while leaves a run of records that goes out with one comparison each.
static inline hp_ring_t *runner_up(hp_ring_t **h, size_t n) {
    if (n < 3)
        return n == 2 ? h[1] : NULL;
    return ring_less(h[2], h[1]) ? h[2] : h[1];
}

static void sift_down(hp_ring_t **h, size_t n, size_t i) {
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            return;
        if (c + 1 < n && ring_less(h[c + 1], h[c]))
            c++;
        if (!ring_less(h[c], h[i]))
            return;
        hp_ring_t *t = h[i];
        h[i] = h[c];
        h[c] = t;
        i = c;
    }
}

// Hands every app thread's staged record timed below wq (all of them if `all`) to the heap
// stream in (time, tid) order: the order the reader replays, so an address freed by one thread
// and handed out again to another is never confused. What stays behind is kept for the next
// round at the front of its stage. Returns false on an internal failure.
static bool merge_heap(hp_ring_t *head, uint64_t wq, bool all) {
    static hp_ring_t **hv;
    static size_t hv_cap;
    size_t n = 0, rings = 0;
    for (hp_ring_t *r = head; r; r = r->next)
        rings++;
    if (rings > hv_cap) {
        size_t cap = rings * 2 + 16;
        hp_ring_t **fresh = hp_mem_map(cap * sizeof *fresh);
        if (!fresh)
            return false;
        hp_mem_unmap(hv, hv_cap * sizeof *hv);
        hv = fresh;
        hv_cap = cap;
    }
    for (hp_ring_t *r = head; r; r = r->next) {
        if (r->tid == 0 || !r->stage_len)
            continue; // tid 0: the CPU sampler's stream, written as it is
        r->m_qh = r->m_qn = 0;
        r->m_dpos = 0;
        r->m_dtime = r->stage_base.time_ns;
        r->m_daddr = r->stage_base.addr;
        r->stage_fresh = 0;
        int got = 0;
        while (r->m_qn < HP_RING_LOOKAHEAD && (got = look_load(r)) > 0)
            ;
        if (got < 0)
            return false;
        if (r->m_qn) {
            r->m_key = r->m_half ? r->m_q[0].ev.time2_ns : r->m_q[0].ev.time_ns;
            hv[n++] = r;
        }
    }
    for (size_t i = n / 2; i-- > 0;)
        sift_down(hv, n, i);
    hp_ring_t *next = runner_up(hv, n);
    bool ok = true;
    size_t chunk_bytes = (size_t)hp_config.chunk_kb << 10;
    while (n) {
        hp_ring_t *r = hv[0];
        if (!all && r->m_key >= wq)
            break;
        // every column keeps HP_RESOLVE_REC_MAX beyond HEAP_OUT_BYTES, and no column can be
        // longer than all of them together
        if (hp_hout_bytes(&heap_out) >= chunk_bytes && !write_heap()) {
            ok = false;
            break;
        }
        hp_ring_look_t *l = &r->m_q[r->m_qh];
        if (!look_put(r, l)) {
            ok = false;
            break;
        }
        if (l->ev.tag == HPT_REC_REALLOC && !r->m_half) {
            r->m_half = 1; // its new block goes out at its second time
            r->m_key = l->ev.time2_ns;
        } else {
            n_events += is_event(l->ev.tag);
            r->m_half = 0;
            r->m_qh = (r->m_qh + 1) & (HP_RING_LOOKAHEAD - 1);
            r->m_qn--;
            if (look_load(r) < 0) {
                ok = false;
                break;
            }
            if (!r->m_qn) {
                hv[0] = hv[--n];
                sift_down(hv, n, 0);
                next = runner_up(hv, n);
                continue;
            }
            r->m_key = r->m_q[r->m_qh].ev.time_ns;
        }
        if (next && !ring_less(r, next)) {
            sift_down(hv, n, 0);
            next = runner_up(hv, n);
        }
    }
    // keep what is left, from the oldest record not written on, for the next round
    for (hp_ring_t *r = head; r; r = r->next) {
        if (r->tid == 0 || !r->stage_len)
            continue;
        const hp_ring_look_t *l = &r->m_q[r->m_qh];
        size_t pos = r->m_qn ? l->pos : r->m_dpos;
        hpt_dstate_t st = {.time_ns = r->m_qn ? l->time0 : r->m_dtime,
                           .addr = r->m_qn ? l->addr0 : r->m_daddr};
        if (pos >= r->stage_len) {
            r->stage_len = 0;
            r->wstate = st; // the base of what the next drain brings
            continue;
        }
        memmove(r->stage, r->stage + pos, r->stage_len - pos);
        r->stage_len -= pos;
        r->stage_base = st;
    }
    return ok && write_heap();
}

// Drains every ring; returns the largest staging fill, or SIZE_MAX on corruption.
static size_t drain_all(void) {
    hp_ring_t *r = hp_tbuf_list_lock();
    hp_tbuf_list_unlock(); // only the writer unlinks rings, so the snapshot stays walkable
    size_t most = 0;
    for (; r; r = r->next) {
        if (!drain(r))
            return SIZE_MAX;
        // what arrived since the last merge: records the merge holds back do not count again
        if (r->stage_fresh > most)
            most = r->stage_fresh;
    }
    return most;
}

// Writes everything drained so far, then a SYNC whose watermark bounds all later records.
// final: the last round before exit or exec, so nothing may stay behind.
static void flush(bool final) {
    if (!ensure_fd())
        return;
    uint64_t w = hp_state_now();
    if (have_membarrier)
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
    else
        w = w > NO_BARRIER_MARGIN_NS ? w - NO_BARRIER_MARGIN_NS : 0;
    hp_ring_t *head = hp_tbuf_list_lock();
    hp_tbuf_list_unlock();
    bool wrote = false;
    for (hp_ring_t *r = head; r; r = r->next) {
        // busy is read before head: a thread that is not busy now has committed all it timed
        if (atomic_load_explicit(&r->busy, memory_order_acquire)) {
            uint64_t lt = atomic_load_explicit(&r->last_t, memory_order_relaxed);
            if (lt < w)
                w = lt;
        }
        if (!drain(r)) {
            hp_state_disable("internal error: a thread buffer is damaged; profiling stopped");
            return;
        }
    }
    for (hp_ring_t *r = head; r; r = r->next) {
        if (r->tid != 0)
            continue;
        wrote |= r->stage_len != 0;
        if (!write_stage(r))
            return;
    }
    // heap records carry time in units of 2^shift ns: a watermark on a unit boundary keeps
    // every record left for later at or above it after rounding
    uint64_t wq = w >> heap.enc.time_shift << heap.enc.time_shift;
    uint64_t before = seq;
    if (!merge_heap(head, wq, final)) {
        if (trace_fd >= 0)
            hp_state_disable("internal error: the heap stream cannot be written; profiling stopped");
        return;
    }
    wrote |= seq != before;
    if (wrote)
        write_chunk(HPT_CHUNK_SYNC, 0, NULL, 0, 0, (hpt_dstate_t){.time_ns = wq});
}

static bool ring_is_dead(hp_ring_t *r) {
    if (r->m_half)
        return false; // its realloc's new block is still to be written
    if (!atomic_load_explicit(&r->closed, memory_order_acquire) ||
        atomic_load_explicit(&r->head, memory_order_acquire) !=
            atomic_load_explicit(&r->tail, memory_order_relaxed) ||
        r->stage_len)
        return false;
    if (syscall(SYS_tgkill, getpid(), r->tid, 0) == 0 || errno != ESRCH)
        return false;
    n_lost_reaped += r->n_lost;
    return true;
}

static void write_trailer(void) {
    uint64_t lost = n_lost_reaped;
    hp_ring_t *r = hp_tbuf_list_lock();
    for (; r; r = r->next)
        lost += r->n_lost;
    hp_tbuf_list_unlock();
    uint8_t buf[64], *p = buf;
    *p++ = HPT_REC_TRAILER;
    p = hpt_put_varint(p, n_events);
    p = hpt_put_varint(p, lost);
    p = hpt_put_varint(p, hp_stacktab_count());
    p = hpt_put_varint(p, hp_stacktab_overflows());
    p = hpt_put_varint(p, heap_ready ? heap.n_late : 0);
    write_chunk(HPT_CHUNK_TRAILER, 0, buf, (size_t)(p - buf), 1, (hpt_dstate_t){0});
}

static void wait_for_wake(uint32_t seen, uint32_t ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    syscall(SYS_futex, &hp_tbuf_wake_word, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
}

static void *writer_main(void *arg) {
    (void)arg;
    hp_tls_guard = 1;
    prctl(PR_SET_NAME, "heapprof-writer", 0, 0, 0);
    uint64_t interval_ns = (uint64_t)hp_config.flush_ms * 1000000u;
    uint32_t nap_ms = hp_config.flush_ms / 4 ? hp_config.flush_ms / 4 : 1;
    uint64_t last_flush = hp_state_now();
    for (;;) {
        uint32_t seen = atomic_load_explicit(&hp_tbuf_wake_word, memory_order_acquire);
        bool stopping = atomic_load_explicit(&stop_req, memory_order_acquire);
        uint64_t want = atomic_load_explicit(&flush_req, memory_order_acquire);
        // a trailer is asked for just before exec: this image writes nothing after it
        bool final = stopping || atomic_load_explicit(&trailer_req, memory_order_acquire);
        hp_clock_calibrate();
        pthread_mutex_lock(&io_lock);
        size_t most = drain_all();
        if (most == SIZE_MAX) {
            hp_state_disable("internal error: a thread buffer is damaged; profiling stopped");
        } else if (stopping || want != atomic_load_explicit(&flush_done, memory_order_relaxed) ||
                   most >= STAGE_FLUSH_BYTES || hp_state_now() - last_flush >= interval_ns) {
            flush(final);
            last_flush = hp_state_now();
            hp_tbuf_list_lock();
            hp_tbuf_reap(ring_is_dead);
            hp_tbuf_list_unlock();
        }
        if (stopping || atomic_exchange(&trailer_req, false))
            write_trailer();
        pthread_mutex_unlock(&io_lock);
        atomic_store_explicit(&flush_done, want, memory_order_release);
        if (stopping || atomic_load_explicit(&hp_state, memory_order_relaxed) == HP_STATE_DISABLED)
            break;
        wait_for_wake(seen, nap_ms);
    }
    return NULL;
}

bool hp_writer_start(int fd, const char *path, const hpt_file_hdr_t *hdr, const uint8_t *meta,
                     size_t meta_len, uint32_t meta_records) {
    trace_fd = fd;
    struct stat st;
    trace_path[0] = 0;
    if (path[0] != '/' && getcwd(trace_path, sizeof trace_path - 2))
        strcat(trace_path, "/");
    if (strlen(trace_path) + strlen(path) >= sizeof trace_path || fstat(fd, &st)) {
        close(fd);
        trace_fd = -1;
        return false;
    }
    strcat(trace_path, path);
    trace_dev = st.st_dev;
    trace_ino = st.st_ino;
    seq = 0;
    n_events = n_lost_reaped = 0;
    if (heap_ready)
        hp_resolve_fini(&heap);
    heap_ready = hp_resolve_init(&heap, hdr->time_shift);
    if (!heap_payload)
        heap_payload = hp_mem_map(HEAP_PAYLOAD_CAP);
    bool mapped = heap_payload != NULL;
    for (int i = 0; i < HPT_HCOLS && mapped; i++) {
        if (!heap_out.col[i])
            heap_out.col[i] = hp_mem_map(HEAP_COL_CAP);
        mapped = heap_out.col[i] != NULL;
    }
    if (!heap_ready || !mapped) {
        hp_diag_line("out of memory for the heap stream; the program runs unprofiled", (char *)NULL);
        close(fd);
        trace_fd = -1;
        return false;
    }
    memset(heap_out.len, 0, sizeof heap_out.len);
    heap_base = heap.enc;
    heap_base_tid = heap.tid;
    if (!cctx) {
        cctx = ZSTD_createCCtx();
        if (cctx)
            ZSTD_CCtx_setParameter(cctx, ZSTD_c_compressionLevel, hp_config.zstd_level);
    }
    have_membarrier =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) == 0;
    hpt_file_hdr_t h = *hdr;
    if (have_membarrier)
        h.flags |= HPT_FILE_HAS_MEMBARRIER;
    if (!write_all(&h, sizeof h) ||
        !write_chunk(HPT_CHUNK_META, 0, meta, meta_len, meta_records, (hpt_dstate_t){0}))
        goto fail;
    atomic_store(&stop_req, false);
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(&thread, NULL, writer_main, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc) {
        hp_diag_line("cannot start the writer thread; the program runs unprofiled", (char *)NULL);
        goto fail;
    }
    atomic_store(&running, true);
    return true;
fail:
    close(trace_fd);
    trace_fd = -1;
    return false;
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
    hp_tbuf_wake_writer();
    for (int i = 0; i < 2000 && atomic_load(&flush_done) < want; i++) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
}

void hp_writer_stop(void) {
    if (!atomic_exchange(&running, false))
        return;
    // Let events already in flight on other threads commit before the last drain.
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
    atomic_store(&stop_req, true);
    hp_tbuf_wake_writer();
    pthread_join(thread, NULL);
    if (fd_is_ours(trace_fd))
        close(trace_fd);
    trace_fd = -1;
}

void hp_writer_fork_prepare(void) {
    pthread_mutex_lock(&io_lock);
}

void hp_writer_fork_parent(void) {
    pthread_mutex_unlock(&io_lock);
}

void hp_writer_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    io_lock = fresh;
    if (fd_is_ours(trace_fd))
        close(trace_fd); // the parent's file; the child opens its own on its first event
    trace_fd = -1;
    atomic_store(&running, false);
    atomic_store(&flush_req, 0);
    atomic_store(&flush_done, 0);
    cctx = NULL; // the parent's context lives in copied memory the child must not share
    // the parent's live blocks: the child's trace starts with none (their frees are unknown)
    if (heap_ready)
        hp_resolve_fini(&heap);
    heap_ready = false;
    memset(heap_out.len, 0, sizeof heap_out.len);
}
