// SPDX-License-Identifier: MIT
// Streaming trace reader (docs/trace-format.md): framing and resynchronisation after damage on
// the reader's thread; each framed chunk then goes to the decode pool (chunk_decode.c, on
// worker threads: crc, then decoding), and comes back, in file order, to have its definitions
// applied (or, if its crc failed, to be framed again: reframe) and its events queued, without a
// copy, for the k-way merge of per-thread streams released at SYNC watermarks
// (docs/design.md#reader-serial). Trace bytes are untrusted: every length is checked before
// use. Never prints, never exits (except xalloc on OOM).
#include "trace/reader.h"

#include "core/arena.h"
#include "core/hmap.h"
#include "core/xalloc.h"
#include "format/hpt_codec.h"
#include "trace/decode_pool.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the trace is little-endian and read by memcpy into its structs"
#endif
_Static_assert(sizeof(hpt_file_hdr_t) == 56, "file header layout");
_Static_assert(sizeof(hpt_chunk_hdr_t) == 56, "chunk header layout");

#define CHUNK_HDR sizeof(hpt_chunk_hdr_t)
// Passes an I/O error (err already filled by the callee) up to the caller: the one way this
// file forwards failure. Damage is never an error; only a failed read(2) is.
#define TRY_IO(call)                                                                               \
    do {                                                                                           \
        if ((call) < 0)                                                                            \
            return -1;                                                                             \
    } while (0)
#define IN_BUF_BYTES (4u << 20)
#define MAX_FILE_HDR_BYTES 65536u
#define NO_OFFSET UINT64_MAX
#define READY_MAX 8192u // events merged per batch: small enough to stay in cache for replay
// Events held back for the merge in memory: past this many, a chunk's events stay in the file
// (a deferred segment) and are decoded again when the merge reaches them, so a flood between
// two SYNCs (1,000 threads on 2 CPUs: ~20 M events; or a forged trace: 64 KiB of zstd inflates
// to 100 million events) neither takes all memory nor comes out of order. Four times what 16
// threads at full speed leave between two SYNCs. HEAPPROF_READER_BUFFER (events) sets another
// cap, for tests.
#define BUFFERED_MAX (1u << 23)
// ALLOCATOR records kept: the shim writes a few; a forged trace may repeat them without end.
#define READER_ALLOCATORS_MAX 64u
// Chunk event buffers kept for reuse when no one holds them: chunks being decoded take them.
// A SYNC that releases many threads' queued chunks at once frees many: past this many, or past
// KEEP_EBUF_BYTES in all, one is freed instead. (64 with no cap on their bytes kept 800 MB idle
// on c_threads 8; 4, 8 and 16 read c_churn and c_threads 8 at the same reading-thread CPU, 16
// with ~20 MB more peak RSS; since session 14 64 again, under the 32 MB cap on their total.)
#define FREE_CHUNK_MAX 64u
#define KEEP_EBUF_BYTES (32u << 20)
// A chunk's events are copied out of its buffer instead of taken over when they fill less than
// a quarter of a buffer larger than this: a thread's few events must not pin a buffer sized
// for a full chunk while they wait to be merged (many threads, each with a small chunk).
#define TAKE_SMALL_EVENTS 16384u

// Decoded events, shared between a thread queue (while some of them wait to be merged) and the
// batches handed out of it (reader_next_batch_keep): a chunk's whole event buffer, taken over
// without a copy, or a merge's output (READY_MAX events). The last holder to let go puts it on
// a free list for the next chunk or merge, so the reading thread neither copies events into
// queues nor touches fresh pages for them.
struct reader_batch {
    reader_event_t *ev;
    size_t cap;
    atomic_size_t refs; // the queue's segment, if any, plus one per batch handed out
    bool out;           // a merge output buffer, else a chunk's
    struct reader_batch *next; // on a free list
};
typedef struct reader_batch ebuf_t;

// A run of one ebuf's events in a thread queue: a chunk's events, in record (= time) order.
// Deferred (b NULL): the chunk's events are left in the file, `tail` of them, first at t0;
// reload_seg decodes the chunk again at file_off once the merge needs them, and puts back
// the values its definitions had set (patch: n_patch pairs of event index and stack field).
typedef struct seg {
    ebuf_t *b;
    size_t head, tail;
    uint64_t file_off, t0;
    uint64_t *patch;
    size_t n_patch;
} seg_t;

// One thread's decoded, not yet released events: a FIFO of chunks' events in per-thread order.
// Each segment is one chunk's, so its times never go down; a queue's can across segments only
// in a forged trace (a chunk that began before the one it follows).
typedef struct tqueue {
    uint32_t tid;
    size_t thread_idx; // latest entry in r->threads for this tid, or SIZE_MAX
    bool ended;        // a THREAD_END came after the tid's latest THREAD_START
    seg_t *segs;       // segs[s_head, s_tail): the queue, oldest first
    size_t s_head, s_tail, s_cap;
} tqueue_t;

// A queue in the merge heap with its head's key cached: sifting compares keys in one array
// instead of chasing two pointers per comparison.
typedef struct heap_ent {
    uint64_t time_ns;
    uint64_t tid;
    tqueue_t *q;
} heap_ent_t;

typedef struct stack_ref {
    const uint64_t *frames;
    uint32_t n;
} stack_ref_t;

struct reader {
    int fd;
    char *path;
    hpt_file_hdr_t hdr;

    // input window: buf[pos, len) holds file bytes starting at file offset buf_off + pos
    uint8_t *buf;
    size_t cap, pos, len;
    uint64_t buf_off;
    bool file_eof;

    decode_pool_t *pool; // chunks framed and verified, being decoded or waiting to be applied
    bool framed_all;     // the framer reached the end of the file
    // reader_prefetch met an I/O error: framing stopped there, and the error is the reader's
    // once every chunk framed before it has been applied
    bool prefetch_failed;
    errmsg_t prefetch_err;
    // damaged regions framing passed over, and their bytes: counted into `damage` as found, and
    // noted in every chunk framed (dchunk_t.framing_*) so that a reframe can take back those
    // found after the chunk it goes back to
    uint64_t framing_regions, framing_bytes;

    bool eof;           // no more chunks: release everything
    // Following (reader_follow): the end of the file is "not yet", not the end of the trace.
    bool follow;        // the writer may still be appending
    bool caught_up;     // following, and every chunk written so far is applied: reader_next
                        // returned 0 for now; its next call looks for new bytes
    uint64_t n_framed;  // chunks framed and handed to the decode pool (reader_follow_stats)
    bool defs_only;     // reader_load_defs: decode for definitions, keep no events
    uint64_t watermark; // highest SYNC watermark read: events below it may be released
    uint64_t next_seq;

    hmap_t tid_map; // tid -> index into queues
    tqueue_t **queues;
    size_t n_queues, queues_cap;
    heap_ent_t *heap; // non-empty queues, min-heap by (head time, tid)
    size_t heap_n, heap_cap;
    size_t n_buffered;     // events in all queues, in memory
    size_t buffer_max;     // past this many in memory a chunk's events are deferred (BUFFERED_MAX)
    uint64_t n_deferred;   // chunks deferred (reader_chunks_deferred)
    dchunk_t reload;       // a deferred chunk decoded again (reload_seg), on the reading thread
    ZSTD_DCtx *reload_dctx;
    const reader_event_t *ready; // merged, released events: ready[ready_pos, ready_n) not yet
                                 // handed out; in ready_ref (a merge's output, or a run of one
                                 // chunk's events where they lie)
    size_t ready_n, ready_pos;
    ebuf_t *ready_ref; // holds ready's memory until the next release (NULL: given away)

    // ebufs no one holds, for reuse; guarded by free_lock (batches are given back from the
    // caller's thread: reader_batch_done)
    pthread_mutex_t free_lock;
    ebuf_t *free_out, *free_chunk;
    size_t n_free_chunk, free_chunk_bytes;

    hmap_t stacks; // id -> stack_ref_t
    arena_t arena; // stack frames, module paths and build ids, thread names, argv

    reader_module_t *modules;
    size_t n_modules, modules_cap;
    // base -> the latest loaded module at that base not yet unloaded; under it, the previous
    // one (module_below[i]), so an unload is one lookup even in a forged trace
    hmap_t module_top;
    size_t *module_below;
    size_t module_below_cap;
    // Kept only when asked (reader_keep_threads: the tests); no output names threads, and a
    // trace of a server that makes a thread per request would grow it by ~55 bytes a thread.
    reader_thread_t *threads;
    size_t n_threads, threads_cap;
    bool keep_threads;

    const char *exe;
    const char **argv;
    size_t argc;
    bool has_trailer;
    reader_trailer_t trailer;
    reader_damage_t damage;

    reader_rss_t rss;
    uint64_t rss_t[READER_RSS_POINTS], rss_b[READER_RSS_POINTS];
    uint64_t rss_stride, rss_skip; // keep one sample in rss_stride; rss_skip counts down to it
    reader_cpu_t cpu;
    reader_allocator_t *allocs; // ALLOCATOR records
    size_t n_allocs, allocs_cap;
    hmap_t cpu_index;          // stack id -> index into cpu_ids/cpu_counts
    uint64_t *cpu_ids, *cpu_counts;
    size_t cpu_n, cpu_cap, cpu_counts_cap;
};

// ---- input window ----

static uint64_t file_pos(const reader_t *r) { return r->buf_off + r->pos; }

// Makes at least `need` bytes available at buf + pos unless the file ends first. Returns the
// bytes available (fewer than need only at end of file), or -1 on a read error.
static ptrdiff_t ensure(reader_t *r, size_t need, errmsg_t *err) {
    size_t have = r->len - r->pos;
    if (have >= need || r->file_eof)
        return (ptrdiff_t)have;
    if (need > r->cap - r->pos) {
        if (r->pos) {
            memmove(r->buf, r->buf + r->pos, have);
            r->buf_off += r->pos;
            r->len = have;
            r->pos = 0;
        }
        if (need > r->cap) {
            size_t cap = r->cap;
            while (cap < need)
                cap *= 2;
            r->buf = xrealloc(r->buf, cap);
            r->cap = cap;
        }
    }
    while (r->len - r->pos < need) {
        ssize_t k = read(r->fd, r->buf + r->len, r->cap - r->len);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            errmsg_set(err, "%s: read error at offset %llu: %s", r->path,
                       (unsigned long long)(r->buf_off + r->len), strerror(errno));
            return -1;
        }
        if (k == 0) {
            r->file_eof = true;
            break;
        }
        r->len += (size_t)k;
    }
    return (ptrdiff_t)(r->len - r->pos);
}

// ---- event buffers (ebuf_t) ----

static void ebuf_destroy(ebuf_t *b) {
    if (b) {
        free(b->ev);
        free(b);
    }
}

// A merge output buffer: READY_MAX events, one holder.
static ebuf_t *ebuf_get_out(reader_t *r) {
    pthread_mutex_lock(&r->free_lock);
    ebuf_t *b = r->free_out;
    if (b)
        r->free_out = b->next;
    pthread_mutex_unlock(&r->free_lock);
    if (!b) {
        b = xcalloc(1, sizeof *b);
        b->ev = xmalloc(READY_MAX * sizeof *b->ev);
        b->cap = READY_MAX;
        b->out = true;
    }
    atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

// Takes c's events into an ebuf (one holder: the queue's segment) and gives c an unused buffer
// for its next decode, so neither the events nor fresh pages cost the reading thread anything.
static ebuf_t *ebuf_take_chunk(reader_t *r, dchunk_t *c) {
    ebuf_t *b;
    if (c->n_ev < c->ev_cap / 4 && c->ev_cap > TAKE_SMALL_EVENTS) {
        // a few events in a big buffer: copied, so that waiting they hold only their own room
        b = xcalloc(1, sizeof *b);
        b->ev = xmalloc(c->n_ev * sizeof *b->ev);
        b->cap = c->n_ev;
        memcpy(b->ev, c->ev, c->n_ev * sizeof *b->ev);
    } else {
        pthread_mutex_lock(&r->free_lock);
        b = r->free_chunk;
        if (b) {
            r->free_chunk = b->next;
            r->n_free_chunk--;
            r->free_chunk_bytes -= b->cap * sizeof *b->ev;
        }
        pthread_mutex_unlock(&r->free_lock);
        if (!b)
            b = xcalloc(1, sizeof *b);
        reader_event_t *ev = b->ev; // the free buffer (or none) becomes the chunk's
        size_t cap = b->cap;
        b->ev = c->ev;
        b->cap = c->ev_cap;
        c->ev = ev;
        c->ev_cap = cap;
    }
    atomic_store_explicit(&b->refs, 1, memory_order_relaxed);
    return b;
}

// Lets go of one hold on b; the last puts it on its free list (or frees it). Any thread.
static void ebuf_unref(reader_t *r, ebuf_t *b) {
    if (atomic_fetch_sub_explicit(&b->refs, 1, memory_order_acq_rel) != 1)
        return;
    pthread_mutex_lock(&r->free_lock);
    if (b->out) {
        b->next = r->free_out;
        r->free_out = b;
        b = NULL;
    } else if (r->n_free_chunk < FREE_CHUNK_MAX &&
               r->free_chunk_bytes + b->cap * sizeof *b->ev <= KEEP_EBUF_BYTES) {
        b->next = r->free_chunk;
        r->free_chunk = b;
        r->n_free_chunk++;
        r->free_chunk_bytes += b->cap * sizeof *b->ev;
        b = NULL;
    }
    pthread_mutex_unlock(&r->free_lock);
    ebuf_destroy(b);
}

// ---- opening ----

static void reader_free(reader_t *r) {
    decode_pool_free(r->pool); // first: its workers may still be decoding
    if (r->fd >= 0)
        close(r->fd);
    for (size_t i = 0; i < r->n_queues; i++) {
        tqueue_t *q = r->queues[i];
        for (size_t k = q->s_head; k < q->s_tail; k++) {
            ebuf_destroy(q->segs[k].b);
            free(q->segs[k].patch);
        }
        free(q->segs);
        free(q);
    }
    free(r->queues);
    free(r->heap);
    // the caller has given back every batch it kept (reader_batch_done): these are all
    ebuf_destroy(r->ready_ref);
    for (ebuf_t *b = r->free_out, *next; b; b = next) {
        next = b->next;
        ebuf_destroy(b);
    }
    for (ebuf_t *b = r->free_chunk, *next; b; b = next) {
        next = b->next;
        ebuf_destroy(b);
    }
    pthread_mutex_destroy(&r->free_lock);
    dchunk_fini(&r->reload);
    ZSTD_freeDCtx(r->reload_dctx);
    hmap_fini(&r->tid_map);
    hmap_fini(&r->stacks);
    hmap_fini(&r->module_top);
    hmap_fini(&r->cpu_index);
    free(r->cpu_ids);
    free(r->allocs);
    free(r->cpu_counts);
    free(r->module_below);
    arena_free(&r->arena);
    free(r->modules);
    free(r->threads);
    free(r->argv);
    free(r->buf);
    free(r->path);
    free(r);
}

static int read_file_hdr(reader_t *r, errmsg_t *err) {
    ptrdiff_t n;
    TRY_IO(n = ensure(r, sizeof r->hdr, err));
    if (n == 0) {
        errmsg_set(err, "%s: empty file (no trace was written, or the program has not flushed yet)",
                   r->path);
        return -1;
    }
    size_t cmp = (size_t)n < 8 ? (size_t)n : 8;
    if (memcmp(r->buf + r->pos, HPT_MAGIC, cmp) != 0) {
        errmsg_set(err, "%s: not a heapprof trace (bad magic)", r->path);
        return -1;
    }
    if ((size_t)n < sizeof r->hdr) {
        errmsg_set(err, "%s: truncated file header (%td of %zu bytes)", r->path, n, sizeof r->hdr);
        return -1;
    }
    memcpy(&r->hdr, r->buf + r->pos, sizeof r->hdr);
    if (r->hdr.version != HPT_VERSION) {
        errmsg_set(err, "%s: unsupported trace version %u (this heapprof reads version %u)",
                   r->path, r->hdr.version, HPT_VERSION);
        return -1;
    }
    if ((r->hdr.flags & HPT_FILE_SAMPLED) && r->hdr.sample_bytes == 0) {
        // weights are 1/p of the interval: without it no figure of the trace means anything
        errmsg_set(err, "%s: damaged file header (sampled, with a sampling interval of 0 bytes)",
                   r->path);
        return -1;
    }
    if (r->hdr.hdr_bytes < sizeof r->hdr || r->hdr.hdr_bytes > MAX_FILE_HDR_BYTES) {
        errmsg_set(err, "%s: damaged file header (header size %u)", r->path, r->hdr.hdr_bytes);
        return -1;
    }
    TRY_IO(n = ensure(r, r->hdr.hdr_bytes, err));
    if ((size_t)n < r->hdr.hdr_bytes) {
        errmsg_set(err, "%s: truncated file header", r->path);
        return -1;
    }
    r->pos += r->hdr.hdr_bytes;
    return 0;
}

// BUFFERED_MAX, or HEAPPROF_READER_BUFFER's events (tests: a small cap defers most chunks).
static size_t buffer_max_env(void) {
    const char *env = getenv("HEAPPROF_READER_BUFFER");
    char *end;
    unsigned long long v = env && *env ? strtoull(env, &end, 10) : 0;
    return env && *env && !*end && v > 0 && v <= BUFFERED_MAX ? (size_t)v : BUFFERED_MAX;
}

reader_t *reader_open(const char *path, errmsg_t *err) {
    // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) {
        errmsg_set(err, "%s: %s", path, strerror(errno));
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        errmsg_set(err, "%s: %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        errmsg_set(err, "%s: %s", path,
                   S_ISDIR(st.st_mode) ? "is a directory" : "not a regular file");
        close(fd);
        return NULL;
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0)
        (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    (void)posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);

    reader_t *r = xcalloc(1, sizeof *r);
    r->fd = fd;
    r->path = xstrdup(path);
    r->cap = IN_BUF_BYTES;
    r->buf = xmalloc(r->cap);
    pthread_mutex_init(&r->free_lock, NULL);
    hmap_init(&r->tid_map, sizeof(size_t));
    hmap_init(&r->stacks, sizeof(stack_ref_t));
    hmap_init(&r->module_top, sizeof(size_t));
    hmap_init(&r->cpu_index, sizeof(size_t));
    r->cpu.reason = "";
    r->rss.time_ns = r->rss_t;
    r->rss.bytes = r->rss_b;
    if (read_file_hdr(r, err) != 0) {
        reader_free(r);
        return NULL;
    }
    r->pool = decode_pool_new(decode_pool_default_workers());
    r->buffer_max = buffer_max_env();
    return r;
}

void reader_close(reader_t *r) {
    if (r)
        reader_free(r);
}

// ---- merge ----

// The time of a segment's first event not yet handed out (a deferred one's first).
static inline uint64_t seg_head_time(const seg_t *s) {
    return s->b ? s->b->ev[s->head].time_ns : s->t0;
}

// Branch-free on purpose: which thread comes next is a coin toss the predictor loses.
static inline bool key_less(const heap_ent_t *a, const heap_ent_t *b) {
    return (a->time_ns < b->time_ns) | ((a->time_ns == b->time_ns) & (a->tid < b->tid));
}

static void heap_push(reader_t *r, tqueue_t *q) {
    r->heap = xgrow(r->heap, &r->heap_cap, r->heap_n + 1, sizeof *r->heap);
    heap_ent_t e = {.time_ns = seg_head_time(&q->segs[q->s_head]), .tid = q->tid, .q = q};
    size_t i = r->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!key_less(&e, &r->heap[parent]))
            break;
        r->heap[i] = r->heap[parent];
        i = parent;
    }
    r->heap[i] = e;
}

// Puts e (the top's queue with its new key, or the former last entry) at the top and sifts it
// down. Taking e by value, not reading it back from h[0], avoids a store-forwarding stall.
static inline void heap_replace_top(reader_t *r, heap_ent_t e) {
    heap_ent_t *h = r->heap;
    size_t n = r->heap_n, i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && key_less(&h[c + 1], &h[c]))
            c++;
        if (!key_less(&h[c], &e))
            break;
        h[i] = h[c];
        i = c;
    }
    h[i] = e;
}

static tqueue_t *queue_for(reader_t *r, uint32_t tid) {
    bool existed;
    size_t *idx = hmap_put(&r->tid_map, tid, &existed);
    if (existed)
        return r->queues[*idx];
    *idx = r->n_queues;
    r->queues = xgrow(r->queues, &r->queues_cap, r->n_queues + 1, sizeof *r->queues);
    tqueue_t *q = xcalloc(1, sizeof *q);
    q->tid = tid;
    q->thread_idx = SIZE_MAX;
    r->queues[r->n_queues++] = q;
    return q;
}

// ---- definitions ----

// decoded: the record's frames as chunk_decode expanded (and so checked) them.
static void def_stack(reader_t *r, const hpt_rec_t *rec, const uint64_t *decoded) {
    bool existed;
    stack_ref_t *s = hmap_put(&r->stacks, rec->stack, &existed);
    if (existed) {
        // ids are process-wide and defined once; a repeat cannot change what was handed out
        return;
    }
    uint64_t *frames = arena_alloc(&r->arena, (size_t)rec->n_frames * sizeof *frames + 1);
    if (rec->n_frames)
        memcpy(frames, decoded, (size_t)rec->n_frames * sizeof *frames);
    s->frames = frames;
    s->n = rec->n_frames;
}

static size_t def_module_load(reader_t *r, const hpt_rec_t *rec, uint32_t tid) {
    r->modules = xgrow(r->modules, &r->modules_cap, r->n_modules + 1, sizeof *r->modules);
    r->module_below =
        xgrow(r->module_below, &r->module_below_cap, r->n_modules + 1, sizeof *r->module_below);
    bool existed;
    size_t *top = hmap_put(&r->module_top, rec->addr, &existed);
    r->module_below[r->n_modules] = existed ? *top : SIZE_MAX;
    *top = r->n_modules;
    reader_module_t *m = &r->modules[r->n_modules];
    m->path = arena_strndup(&r->arena, rec->str, rec->str_len);
    m->base = rec->addr;
    m->size = rec->size;
    uint8_t *id = arena_alloc(&r->arena, rec->str2_len + 1);
    if (rec->str2_len)
        memcpy(id, rec->str2, rec->str2_len);
    m->build_id = id;
    m->build_id_len = rec->str2_len;
    m->tid = tid;
    m->load_ns = rec->time_ns;
    m->unload_ns = UINT64_MAX;
    return r->n_modules++;
}

// The latest module loaded at the base and still loaded is the one unloaded.
static uint64_t def_module_unload(reader_t *r, const hpt_rec_t *rec) {
    size_t *top = hmap_get(&r->module_top, rec->addr);
    if (!top || *top == SIZE_MAX)
        return UINT64_MAX;
    size_t i = *top;
    r->modules[i].unload_ns = rec->time_ns;
    *top = r->module_below[i];
    return i;
}

static void def_thread_start(reader_t *r, tqueue_t *q, const hpt_rec_t *rec, uint32_t tid) {
    q->ended = false;
    if (!r->keep_threads)
        return;
    r->threads = xgrow(r->threads, &r->threads_cap, r->n_threads + 1, sizeof *r->threads);
    reader_thread_t *t = &r->threads[r->n_threads];
    t->tid = tid;
    t->name = arena_strndup(&r->arena, rec->str, rec->str_len);
    t->start_ns = rec->time_ns;
    t->end_ns = UINT64_MAX;
    q->thread_idx = r->n_threads++;
}

static void def_thread_end(reader_t *r, tqueue_t *q, const hpt_rec_t *rec, uint32_t tid) {
    (void)tid;
    q->ended = true;
    if (q->thread_idx != SIZE_MAX)
        r->threads[q->thread_idx].end_ns = rec->time_ns;
}

static bool def_process(reader_t *r, const hpt_rec_t *rec) {
    if (r->exe)
        return true; // one per trace: exec starts a new file
    const char **argv = xcalloc(rec->size + 1, sizeof *argv);
    const uint8_t *p = rec->str2, *end = rec->str2 + rec->str2_len;
    for (uint64_t i = 0; i < rec->size; i++) {
        const uint8_t *s;
        uint32_t n;
        if (!(p = hpt_get_bytes(p, end, &s, &n))) {
            free(argv);
            return false;
        }
        argv[i] = arena_strndup(&r->arena, s, n);
    }
    r->exe = arena_strndup(&r->arena, rec->str, rec->str_len);
    r->argv = argv;
    r->argc = rec->size;
    return true;
}

// ---- chunks ----

static bool hdr_plausible(const hpt_chunk_hdr_t *h) {
    if (h->magic != HPT_CHUNK_MAGIC || h->type < HPT_CHUNK_META || h->type > HPT_CHUNK_TRAILER)
        return false;
    if ((h->flags & ~(HPT_CHUNK_ZSTD | HPT_CHUNK_COLUMNS)) || h->raw_bytes > HPT_CHUNK_MAX_RAW)
        return false;
    if ((h->flags & HPT_CHUNK_COLUMNS) && h->type != HPT_CHUNK_EVENTS)
        return false;
    if (h->flags & HPT_CHUNK_ZSTD)
        return h->stored_bytes > 0 && h->stored_bytes <= ZSTD_compressBound(h->raw_bytes);
    return h->stored_bytes == h->raw_bytes;
}


static bool has_magic_at(const uint8_t *p) {
    uint32_t m;
    memcpy(&m, p, sizeof m);
    return m == HPT_CHUNK_MAGIC;
}

// Counts the samples of a chunk that decoded whole.
static void cpu_commit(reader_t *r, const dchunk_t *c) {
    for (size_t i = 0; i < c->n_cpu; i++) {
        bool existed;
        size_t *idx = hmap_put(&r->cpu_index, c->cpu[i], &existed);
        if (!existed) {
            *idx = r->cpu_n;
            r->cpu_ids = xgrow(r->cpu_ids, &r->cpu_cap, r->cpu_n + 1, sizeof *r->cpu_ids);
            r->cpu_counts =
                xgrow(r->cpu_counts, &r->cpu_counts_cap, r->cpu_n + 1, sizeof *r->cpu_counts);
            r->cpu_ids[r->cpu_n] = c->cpu[i];
            r->cpu_counts[r->cpu_n++] = 0;
        }
        r->cpu_counts[*idx]++;
    }
    r->cpu.n_samples += c->n_cpu;
}

// Applies a decoded chunk's definitions, in record order. For a chunk that did not decode
// whole, those of its records before the damage: they are correct and harmless.
static void apply_defs(reader_t *r, dchunk_t *c, tqueue_t *q) {
    const uint32_t tid = c->h.tid;
    for (size_t i = 0; i < c->n_defs; i++) {
        const hpt_rec_t *rec = &c->defs[i].rec;
        const size_t ev = c->defs[i].ev;
        switch (rec->tag) {
        case HPT_REC_STACK:
            def_stack(r, rec, c->frames + c->defs[i].frames_at);
            break;
        case HPT_REC_THREAD_START:
            def_thread_start(r, q, rec, tid);
            break;
        case HPT_REC_THREAD_END:
            def_thread_end(r, q, rec, tid);
            break;
        case HPT_REC_MODULE_LOAD: {
            size_t idx = def_module_load(r, rec, tid);
            if (ev != SIZE_MAX)
                c->ev[ev].stack = idx;
            break;
        }
        case HPT_REC_MODULE_UNLOAD: {
            uint64_t idx = def_module_unload(r, rec);
            if (ev != SIZE_MAX)
                c->ev[ev].stack = idx;
            break;
        }
        case HPT_REC_PROCESS:
            def_process(r, rec);
            break;
        case HPT_REC_ALLOCATOR:
            if (r->n_allocs < READER_ALLOCATORS_MAX) {
                r->allocs = xgrow(r->allocs, &r->allocs_cap, r->n_allocs + 1, sizeof *r->allocs);
                r->allocs[r->n_allocs++] = (reader_allocator_t){
                    .status = (uint8_t)rec->counters[0],
                    .family = arena_strndup(&r->arena, rec->str, rec->str_len),
                    .detail = arena_strndup(&r->arena, rec->str2, rec->str2_len)};
            }
            break;
        case HPT_REC_CPU_INFO:
            r->cpu.has_info = true;
            r->cpu.source = (uint8_t)rec->counters[0];
            r->cpu.hz = rec->counters[1] > UINT32_MAX ? UINT32_MAX : (uint32_t)rec->counters[1];
            r->cpu.n_lost = rec->counters[3];
            r->cpu.reason = arena_strndup(&r->arena, rec->str, rec->str_len);
            break;
        case HPT_REC_TRAILER:
            r->has_trailer = true;
            r->trailer.n_events = rec->counters[0];
            r->trailer.n_lost_events = rec->counters[1];
            r->trailer.n_stacks = rec->counters[2];
            r->trailer.n_stack_overflows = rec->counters[3];
            r->damage.late_events += rec->counters[4]; // v3's writer-side merge; 0 since v4
            r->trailer.wait_ns = rec->counters[5];
            r->trailer.n_waits = rec->counters[6];
            r->trailer.workers_cpu_ns = rec->counters[7];
            r->trailer.flusher_cpu_ns = rec->counters[8];
            r->trailer.n_workers = rec->counters[9];
            break;
        default:
            break;
        }
    }
}

// Queues a decoded chunk's events behind its thread's earlier ones: the chunk's buffer becomes
// the queue's next segment, without a copy; or, past the cap on what is held in memory, a
// deferred segment that says where to find them again (reload_seg).
static void queue_events(reader_t *r, tqueue_t *q, dchunk_t *c) {
    if (c->n_ev == 0)
        return;
    const bool was_empty = q->s_head == q->s_tail;
    if (c->min_time_ns < r->watermark) {
        // below a watermark already read: late (the chunk's times never go down)
        uint64_t late = 0;
        while (late < c->n_ev && c->ev[late].time_ns < r->watermark)
            late++;
        r->damage.late_events += late;
    }
    if (q->s_tail == q->s_cap && q->s_head > 0) {
        memmove(q->segs, q->segs + q->s_head, (q->s_tail - q->s_head) * sizeof *q->segs);
        q->s_tail -= q->s_head;
        q->s_head = 0;
    }
    q->segs = xgrow(q->segs, &q->s_cap, q->s_tail + 1, sizeof *q->segs);
    const size_t n = c->n_ev;
    if (r->n_buffered + n > r->buffer_max) {
        seg_t d = {.tail = n, .file_off = c->file_off, .t0 = c->ev[0].time_ns};
        for (size_t i = 0; i < c->n_defs; i++) // the events definitions set (MODULE_*)
            if (c->defs[i].ev != SIZE_MAX) {
                d.patch = xrealloc(d.patch, (d.n_patch + 1) * 2 * sizeof *d.patch);
                d.patch[2 * d.n_patch] = c->defs[i].ev;
                d.patch[2 * d.n_patch++ + 1] = c->ev[c->defs[i].ev].stack;
            }
        q->segs[q->s_tail++] = d;
        r->n_deferred++;
    } else {
        q->segs[q->s_tail++] = (seg_t){.b = ebuf_take_chunk(r, c), .head = 0, .tail = n};
        r->n_buffered += n;
    }
    if (was_empty)
        heap_push(r, q);
}

// Notes a resident-set sample: the peak, and the curve in bounded memory (reader_rss_t).
static void rss_sample(reader_t *r, uint64_t t, uint64_t bytes) {
    reader_rss_t *s = &r->rss;
    s->n_samples++;
    bool peak = bytes > s->peak_bytes;
    if (peak) {
        s->peak_bytes = bytes;
        s->peak_time_ns = t;
    }
    if (!r->rss_stride)
        r->rss_stride = 1;
    if (!peak && r->rss_skip) {
        r->rss_skip--;
        return;
    }
    if (s->n_points == READER_RSS_POINTS) {
        // full: keep every second point (and the peak wherever it lies), sample half as often
        size_t k = 0;
        for (size_t i = 0; i < s->n_points; i++)
            if (i % 2 == 0 || r->rss_b[i] == s->peak_bytes) {
                r->rss_t[k] = r->rss_t[i];
                r->rss_b[k++] = r->rss_b[i];
            }
        s->n_points = k;
        r->rss_stride *= 2;
    }
    if (s->n_points < READER_RSS_POINTS) {
        r->rss_t[s->n_points] = t;
        r->rss_b[s->n_points++] = bytes;
    }
    r->rss_skip = r->rss_stride - 1;
}

// Takes back a chunk the pool decoded: the next in file order.
static void consume(reader_t *r, dchunk_t *c) {
    const hpt_chunk_hdr_t *h = &c->h;
    if (h->type != HPT_CHUNK_SYNC) {
        tqueue_t *q = queue_for(r, h->tid);
        apply_defs(r, c, q);
        if (!c->ok) {
            r->damage.chunks_damaged++;
            r->damage.bytes_skipped += c->frame_bytes;
            return;
        }
        queue_events(r, q, c);
        cpu_commit(r, c);
        if (h->type == HPT_CHUNK_TRAILER)
            r->damage.trailer = r->has_trailer;
    } else {
        if (h->base_time_ns > r->watermark)
            r->watermark = h->base_time_ns;
        if (h->base_addr) // the resident set when the shim wrote it (0: not known)
            rss_sample(r, h->base_time_ns, h->base_addr);
    }
    if (h->seq > r->next_seq)
        r->damage.seq_gaps += h->seq - r->next_seq;
    if (h->seq + 1 > r->next_seq)
        r->next_seq = h->seq + 1;
    r->damage.chunks_ok++;
}

// Hands a verified chunk at buf + pos to the decode pool (which has room).
static void submit(reader_t *r, const hpt_chunk_hdr_t *h) {
    dchunk_t *c = decode_pool_next(r->pool);
    c->h = *h;
    c->frame_bytes = CHUNK_HDR + h->stored_bytes;
    c->file_off = file_pos(r);
    c->framing_regions = r->framing_regions;
    c->framing_bytes = r->framing_bytes;
    c->keep = !r->defs_only;
    c->in = xgrow(c->in, &c->in_cap, (size_t)h->stored_bytes + 1, 1);
    memcpy(c->in, r->buf + r->pos + CHUNK_HDR, h->stored_bytes);
    decode_pool_submit(r->pool);
}

// Following: the chunk at pos is not all written yet. Framing stops here for now; pos stays at
// the chunk, whose bytes are read again (and only they) when the reader looks for more.
static int not_yet(reader_t *r) {
    r->framed_all = true;
    return 0;
}

// One damaged region found by framing: counted at once (the damage so far includes what
// framing passed over, as it always has), and undone if framing goes back before it (reframe).
static void framing_damage(reader_t *r, uint64_t bytes) {
    r->damage.chunks_damaged++;
    r->damage.bytes_skipped += bytes;
    r->framing_regions++;
    r->framing_bytes += bytes;
}

// The chunk at buf + pos failed. Scans forward byte by byte for the next header whose crc
// verifies and leaves pos there, counting the bytes passed over as one damaged region. If none
// verifies, the file ends in damage, or (if a plausible chunk ran past end of file) in
// truncation. `incomplete`: the failed chunk itself ran past end of file.
static int resync(reader_t *r, bool incomplete, errmsg_t *err) {
    const uint64_t start = file_pos(r);
    uint64_t trunc_at = incomplete ? start : NO_OFFSET;
    size_t off = 1; // next candidate, relative to pos
    for (;;) {
        ptrdiff_t avail;
        TRY_IO(avail = ensure(r, off + CHUNK_HDR, err));
        size_t c = off;
        const uint8_t *base = r->buf + r->pos;
        while (c + 4 <= (size_t)avail && !(base[c] == 'H' && has_magic_at(base + c)))
            c++;
        if (c + 4 > (size_t)avail) {
            // after an incomplete candidate the whole rest of the file is already here
            if (r->file_eof || trunc_at != NO_OFFSET)
                break; // no candidate left
            // keep the last 3 bytes: a magic may straddle the refill
            r->pos += (size_t)avail - 3;
            off = 0;
            continue;
        }
        TRY_IO(avail = ensure(r, c + CHUNK_HDR, err));
        base = r->buf + r->pos;
        if ((size_t)avail < c + CHUNK_HDR) {
            if (trunc_at == NO_OFFSET)
                trunc_at = file_pos(r) + c;
            break;
        }
        hpt_chunk_hdr_t h;
        memcpy(&h, base + c, sizeof h);
        if (!hdr_plausible(&h)) {
            off = c + 1;
            continue;
        }
        size_t total = CHUNK_HDR + h.stored_bytes;
        TRY_IO(avail = ensure(r, c + total, err));
        base = r->buf + r->pos;
        if ((size_t)avail < c + total) {
            if (trunc_at == NO_OFFSET)
                trunc_at = file_pos(r) + c;
            off = c + 1;
            continue;
        }
        if (dchunk_crc_ok(&h, base + c + CHUNK_HDR)) {
            r->pos += c;
            framing_damage(r, file_pos(r) - start);
            return 0;
        }
        off = c + 1;
    }
    // nothing verifies up to end of file
    uint64_t end = r->buf_off + r->len;
    if (r->follow) {
        // The writer may still complete what is there: the damaged region ends at the first
        // plausible chunk that runs past the end (or 3 bytes before the end: a magic may be
        // half written), and framing waits there. Damage in a followed trace may so count as
        // two regions where a one-shot read counts one; the events are the same.
        uint64_t resume = trunc_at;
        if (resume == NO_OFFSET)
            resume = end >= start + 3 ? end - 3 : start;
        if (resume > start) {
            framing_damage(r, resume - start);
        }
        r->pos = (size_t)(resume - r->buf_off);
        return not_yet(r);
    }
    if (trunc_at == NO_OFFSET)
        trunc_at = end;
    else {
        r->damage.truncated = true;
        r->damage.truncated_bytes = end - trunc_at;
    }
    if (trunc_at > start) {
        framing_damage(r, trunc_at - start);
    }
    r->pos = r->len;
    r->framed_all = true;
    return 0;
}

// Frames one chunk and submits it (or passes over one damaged region). Sets r->framed_all at
// end of file.
static int frame_chunk(reader_t *r, errmsg_t *err) {
    for (;;) {
        ptrdiff_t avail;
        TRY_IO(avail = ensure(r, CHUNK_HDR, err));
        if (avail == 0) {
            r->framed_all = true;
            return 0;
        }
        const uint8_t *base = r->buf + r->pos;
        if ((size_t)avail < CHUNK_HDR) {
            // a partial header that starts like one is what a killed writer leaves behind, or
            // what a live writer's write(2) in progress shows
            uint32_t magic = HPT_CHUNK_MAGIC;
            bool prefix = memcmp(base, &magic, (size_t)avail < 4 ? (size_t)avail : 4) == 0;
            if (prefix && r->follow)
                return not_yet(r);
            TRY_IO(resync(r, prefix, err));
            if (r->framed_all)
                return 0; // end of file, or (following) waiting for the writer
            continue;
        }
        hpt_chunk_hdr_t h;
        memcpy(&h, base, sizeof h);
        if (!hdr_plausible(&h)) {
            TRY_IO(resync(r, false, err));
            if (r->framed_all)
                return 0; // end of file, or (following) waiting for the writer
            continue;
        }
        size_t total = CHUNK_HDR + h.stored_bytes;
        TRY_IO(avail = ensure(r, total, err));
        if ((size_t)avail < total) {
            if (r->follow)
                return not_yet(r);
            TRY_IO(resync(r, true, err));
            if (r->framed_all)
                return 0; // end of file, or (following) waiting for the writer
            continue;
        }
        // framing plausible: the decoder checks the crc (dchunk_decode), and if it fails the
        // chunk is framed again here (reframe) as if it had failed now
        submit(r, &h);
        r->n_framed++;
        r->pos += total;
        return 0;
    }
}

// Moves the input window to file offset off, at or before where framing stands.
static int rewind_to(reader_t *r, uint64_t off, errmsg_t *err) {
    if (off >= r->buf_off) {
        r->pos = (size_t)(off - r->buf_off); // still in the window
        return 0;
    }
    if (lseek(r->fd, (off_t)off, SEEK_SET) < 0) {
        errmsg_set(err, "%s: cannot seek to offset %llu: %s", r->path, (unsigned long long)off,
                   strerror(errno));
        return -1;
    }
    r->buf_off = off;
    r->pos = r->len = 0;
    r->file_eof = false;
    return 0;
}

// The oldest chunk failed its crc: framing goes back to it and resynchronises as if the crc
// had failed when it was framed (the damage counts are the same). The chunks framed after it
// were found by its length, which is not to be trusted: dropped unapplied, to be framed again
// from wherever resynchronisation lands.
static int reframe(reader_t *r, const dchunk_t *failed, errmsg_t *err) {
    // what framing found after the failed chunk is found again (or not) from it: framing may
    // run a deep pool's length ahead (decode_pool.c), over damage and to the end of the file
    const uint64_t off = failed->file_off;
    r->damage.chunks_damaged -= r->framing_regions - failed->framing_regions;
    r->damage.bytes_skipped -= r->framing_bytes - failed->framing_bytes;
    r->framing_regions = failed->framing_regions;
    r->framing_bytes = failed->framing_bytes;
    r->damage.truncated = false; // framing ends the file only once it has framed all of it
    r->damage.truncated_bytes = 0;
    while (decode_pool_oldest(r->pool)) {
        decode_pool_release(r->pool);
        r->n_framed--;
    }
    TRY_IO(rewind_to(r, off, err));
    r->framed_all = false;
    r->prefetch_failed = false; // framing starts over before it: an error there comes again
    errmsg_init(&r->prefetch_err);
    return resync(r, false, err);
}

// Keeps the decode pool full, then applies the oldest chunk; sets r->eof once every chunk of
// the file has been applied.
static int advance(reader_t *r, errmsg_t *err) {
    dchunk_t *c;
    for (;;) {
        if (r->prefetch_failed && decode_pool_in_flight(r->pool) == 0) {
            errmsg_set(err, "%s", r->prefetch_err.msg);
            return -1;
        }
        while (!r->framed_all && decode_pool_has_room(r->pool))
            TRY_IO(frame_chunk(r, err));
        c = decode_pool_oldest(r->pool);
        if (!c || c->crc_ok)
            break;
        TRY_IO(reframe(r, c, err));
    }
    if (!c) {
        if (r->follow && !r->has_trailer)
            r->caught_up = true; // for now: the writer may add more
        else
            r->eof = true; // framed all, applied all
        return 0;
    }
    consume(r, c);
    decode_pool_release(r->pool);
    return 0;
}

bool reader_prefetch(reader_t *r) {
    // without workers framing is decoding, on this thread: it would only take the place of
    // the caller's spare work (readahead_idle_fn), which otherwise falls to the caller later
    if (r->eof || r->caught_up || r->framed_all || !decode_pool_workers(r->pool) ||
        !decode_pool_has_room(r->pool))
        return false;
    while (!r->framed_all && decode_pool_has_room(r->pool))
        if (frame_chunk(r, &r->prefetch_err) < 0) {
            r->prefetch_failed = true; // advance() reports it, after what was framed before
            r->framed_all = true;
            break;
        }
    return true;
}

// Moves releasable events (time below the watermark, or all at end of file) from the thread
// queues into r->ready in (time, tid, per-thread) order, at most READY_MAX. The top queue emits
// a run of events in one go while it stays below the runner-up's head, so a thread that is
// alone or ahead costs no heap work per event.
// A run of at least this many events is handed out alone (the batch ends after it); where it
// lies in one chunk's buffer it is handed out in place, not copied: a thread that allocates
// alone for a while (a single-threaded program always) costs no copy here.
#define IN_PLACE_MIN 256u

// (time, tid) of an event of a queue with this tid, below bound (bt, tie: tid < bound's tid)?
// Without a branch on the tie rule.
static inline bool below(uint64_t t, uint64_t bt, bool tie) {
    return (t < bt) | (tie & (t == bt));
}

// Events of q from its head below the bound (NULL: no bound), at most room: its segments in
// order, up to the first event not below. A segment's times never go down, so its events below
// the bound are a prefix, found by bisection (or all of it, at one look at its last).
static size_t run_length(const tqueue_t *q, const heap_ent_t *bound, size_t room) {
    size_t run = 0;
    const uint64_t bt = bound ? bound->time_ns : 0;
    const bool tie = bound && q->tid < bound->tid;
    for (size_t k = q->s_head; k < q->s_tail && run < room; k++) {
        const seg_t *s = &q->segs[k];
        if (!s->b)
            break; // deferred: the run goes on once it is loaded (release)
        const reader_event_t *ev = s->b->ev;
        size_t lim = s->tail - s->head > room - run ? s->head + (room - run) : s->tail;
        size_t h = lim;
        if (bound && !below(ev[lim - 1].time_ns, bt, tie)) {
            // ev[lim - 1] is not below: gallop from the head (runs of interleaved threads are
            // short, the segment long), then bisect [lo, hi], ev[hi] not below
            size_t lo = s->head, hi = lo, step = 1;
            while (hi < lim - 1 && below(ev[hi].time_ns, bt, tie)) {
                lo = hi + 1;
                hi += step;
                step *= 2;
            }
            if (hi > lim - 1)
                hi = lim - 1;
            while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (below(ev[mid].time_ns, bt, tie))
                    lo = mid + 1;
                else
                    hi = mid;
            }
            h = lo;
        }
        run += h - s->head;
        if (h < s->tail)
            break; // stopped inside this segment: by the bound, or by room
    }
    return run;
}

// Copies the first n events of q to out and drops them from q (with the segments they empty).
// copy false: drops them only (they were handed out in place).
static void queue_take(reader_t *r, tqueue_t *q, size_t n, reader_event_t *out, bool copy) {
    while (n) {
        seg_t *s = &q->segs[q->s_head];
        size_t k = s->tail - s->head < n ? s->tail - s->head : n;
        if (copy) {
            memcpy(out, s->b->ev + s->head, k * sizeof *out);
            out += k;
        }
        s->head += k;
        n -= k;
        if (s->head == s->tail) {
            ebuf_unref(r, s->b);
            q->s_head++;
        }
    }
    if (q->s_head == q->s_tail) {
        q->s_head = q->s_tail = 0;
        // A thread that has ended gives its segment array back once its events are out: a
        // trace of many short threads kept one for every thread it had (~0.9 KiB each; bench/
        // README.md, session 16). A later event of the tid grows a new one.
        if (q->ended) {
            free(q->segs);
            q->segs = NULL;
            q->s_cap = 0;
        }
    }
}

// Reads n bytes at file offset off into p. 0, or -1 with err set (a short file says so too).
static int read_at(reader_t *r, uint64_t off, void *p, size_t n, errmsg_t *err) {
    for (size_t got = 0; got < n;) {
        ssize_t k = pread(r->fd, (uint8_t *)p + got, n - got, (off_t)(off + got));
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            errmsg_set(err, "%s: read error at offset %llu: %s", r->path,
                       (unsigned long long)(off + got), k < 0 ? strerror(errno) : "file shrank");
            return -1;
        }
        got += (size_t)k;
    }
    return 0;
}

// Decodes a deferred segment's chunk again, from the file, into memory (on the reading thread:
// only traces that hold more than the cap between two SYNCs pay it). The chunk verified and
// decoded whole when it was framed; anything else now means the file changed under us.
static int reload_seg(reader_t *r, seg_t *s, errmsg_t *err) {
    dchunk_t *c = &r->reload;
    TRY_IO(read_at(r, s->file_off, &c->h, CHUNK_HDR, err));
    c->in = xgrow(c->in, &c->in_cap, (size_t)c->h.stored_bytes + 1, 1);
    TRY_IO(read_at(r, s->file_off + CHUNK_HDR, c->in, c->h.stored_bytes, err));
    c->file_off = s->file_off;
    c->frame_bytes = CHUNK_HDR + c->h.stored_bytes;
    c->keep = true;
    if (!r->reload_dctx && !(r->reload_dctx = ZSTD_createDCtx())) {
        errmsg_set(err, "%s: out of memory", r->path);
        return -1;
    }
    dchunk_decode(c, r->reload_dctx);
    if (!c->crc_ok || !c->ok || c->n_ev != s->tail || c->ev[0].time_ns != s->t0) {
        errmsg_set(err, "%s: the chunk at offset %llu changed while the trace was being read",
                   r->path, (unsigned long long)s->file_off);
        return -1;
    }
    for (size_t i = 0; i < s->n_patch; i++)
        c->ev[s->patch[2 * i]].stack = s->patch[2 * i + 1];
    free(s->patch);
    s->patch = NULL;
    s->n_patch = 0;
    s->b = ebuf_take_chunk(r, c);
    r->n_buffered += s->tail;
    return 0;
}

static int release(reader_t *r, errmsg_t *err) {
    if (r->ready_ref) {
        ebuf_unref(r, r->ready_ref); // the last batch: handed out whole, no longer valid
        r->ready_ref = NULL;
    }
    ebuf_t *out = NULL; // the merge's output, taken when the first run is copied
    size_t n = 0;
    const bool all = r->eof;
    const heap_ent_t wm = {.time_ns = r->watermark, .tid = 0};
    while (r->heap_n && n < READY_MAX) {
        heap_ent_t *top = &r->heap[0];
        tqueue_t *q = top->q;
        seg_t *head = &q->segs[q->s_head];
        if (!head->b) {
            // deferred: loaded once the top may leave (it is the least key: if it may not,
            // nothing may), so what is loaded goes out at once, at least its first event
            if (!all && !key_less(top, &wm))
                break;
            if (reload_seg(r, head, err) < 0) {
                if (out)
                    ebuf_unref(r, out);
                r->ready_n = r->ready_pos = 0;
                return -1;
            }
        }
        // bound = min(runner-up's key, (watermark, tid 0)); nothing at or above it leaves q now
        const heap_ent_t *bound = all ? NULL : &wm;
        if (r->heap_n > 1) {
            const heap_ent_t *b =
                r->heap_n > 2 && key_less(&r->heap[2], &r->heap[1]) ? &r->heap[2] : &r->heap[1];
            if (!bound || key_less(b, bound))
                bound = b;
        }
        size_t run = run_length(q, bound, READY_MAX - n);
        if (run == 0)
            break; // the top is not below the watermark: nothing more to release
        const seg_t *s = &q->segs[q->s_head];
        // a run that goes on into the queue's next chunk ends with this one's events, to be
        // handed out where they lie: the next call starts the next chunk's (a thread alone
        // crossed a chunk boundary at every other batch, and each such batch was copied: ~90% of
        // the reading thread's copying on c_churn, which perf on 16 cores put at 0.24 s of its
        // 0.44 s of work)
        const bool alone = n == 0 && run >= IN_PLACE_MIN && s->tail - s->head >= IN_PLACE_MIN;
        if (alone && run > s->tail - s->head)
            run = s->tail - s->head;
        if (alone) {
            // in place: valid while the batch holds the chunk's buffer
            r->ready = s->b->ev + s->head;
            r->ready_ref = s->b;
            atomic_fetch_add_explicit(&s->b->refs, 1, memory_order_relaxed);
            queue_take(r, q, run, NULL, false);
        } else {
            if (!out)
                out = ebuf_get_out(r);
            queue_take(r, q, run, out->ev + n, true);
        }
        n += run;
        if (q->s_head == q->s_tail) {
            if (--r->heap_n)
                heap_replace_top(r, r->heap[r->heap_n]);
        } else {
            const uint64_t t = seg_head_time(&q->segs[q->s_head]);
            if (r->heap_n > 1)
                heap_replace_top(r, (heap_ent_t){.time_ns = t, .tid = q->tid, .q = q});
            else
                top->time_ns = t;
        }
        if (alone)
            break; // one run per call: the next one goes to a merge's output or in place again
    }
    if (out) {
        r->ready = out->ev;
        r->ready_ref = out;
    }
    r->ready_n = n;
    r->ready_pos = 0;
    r->n_buffered -= n;
    return 0;
}

// Following, after a pause: look at the file again from where framing stopped.
static void resume(reader_t *r) {
    r->caught_up = false;
    r->framed_all = false;
    r->file_eof = false;
}

// Makes r->ready non-empty: 1, or 0 at the end of the trace (following: of what is written so
// far), or -1 on I/O error.
static int refill(reader_t *r, errmsg_t *err) {
    if (r->caught_up)
        resume(r);
    for (;;) {
        TRY_IO(release(r, err));
        if (r->ready_n)
            return 1;
        if (r->eof || r->caught_up)
            return 0;
        TRY_IO(advance(r, err));
    }
}

void reader_follow(reader_t *r) { r->follow = true; }

void reader_keep_threads(reader_t *r) { r->keep_threads = true; }

void reader_follow_stop(reader_t *r) {
    r->follow = false;
    if (r->caught_up)
        resume(r);
}

bool reader_ended(const reader_t *r) { return r->eof; }

bool reader_writer_gone(const reader_t *r) {
    // kill(pid, 0) answers ESRCH only when no such process exists (EPERM: it does, another
    // user's). A trace from another pid namespace may name a pid that exists here: then the
    // caller's no-growth limit ends the wait.
    return r->hdr.pid && kill((pid_t)r->hdr.pid, 0) != 0 && errno == ESRCH;
}

uint64_t reader_chunks_framed(const reader_t *r) { return r->n_framed; }

uint64_t reader_decode_waited_ns(const reader_t *r) { return decode_pool_waited_ns(r->pool); }

size_t reader_decode_most_in_flight(const reader_t *r) {
    return decode_pool_most_in_flight(r->pool);
}

uint64_t reader_chunks_deferred(const reader_t *r) { return r->n_deferred; }

int reader_next(reader_t *r, reader_event_t *ev, errmsg_t *err) {
    if (r->ready_pos == r->ready_n) {
        int rc = refill(r, err);
        if (rc <= 0)
            return rc;
    }
    *ev = r->ready[r->ready_pos++];
    return 1;
}

int reader_next_batch(reader_t *r, const reader_event_t **evs, size_t *n, errmsg_t *err) {
    *n = 0;
    if (r->ready_pos == r->ready_n) {
        int rc = refill(r, err);
        if (rc <= 0)
            return rc;
    }
    *evs = r->ready + r->ready_pos;
    *n = r->ready_n - r->ready_pos;
    r->ready_pos = r->ready_n;
    return 1;
}

int reader_next_batch_keep(reader_t *r, const reader_event_t **evs, size_t *n,
                           reader_batch_t **keep, errmsg_t *err) {
    *keep = NULL;
    int rc = reader_next_batch(r, evs, n, err);
    if (rc == 1) {
        *keep = r->ready_ref; // the reader lets go of it: release() will not
        r->ready_ref = NULL;
    }
    return rc;
}

void reader_batch_done(reader_t *r, reader_batch_t *keep) {
    if (keep)
        ebuf_unref(r, keep);
}

int reader_read_process(reader_t *r, errmsg_t *err) {
    // the first chunk read (or found damaged) is the META chunk or nothing will be
    if (r->caught_up)
        resume(r);
    while (!r->exe && !r->eof && !r->caught_up &&
           r->damage.chunks_ok + r->damage.chunks_damaged == 0)
        TRY_IO(advance(r, err));
    return 0;
}

int reader_load_defs(reader_t *r, errmsg_t *err) {
    r->defs_only = true;
    r->follow = false; // definitions of the whole file: what is written is all there is
    if (r->caught_up)
        resume(r);
    while (!r->eof)
        TRY_IO(advance(r, err));
    // drop whatever earlier reader_next calls had buffered: reader_next now reports the end
    for (size_t i = 0; i < r->n_queues; i++) {
        tqueue_t *q = r->queues[i];
        for (size_t k = q->s_head; k < q->s_tail; k++) {
            if (q->segs[k].b)
                ebuf_unref(r, q->segs[k].b);
            free(q->segs[k].patch);
        }
        q->s_head = q->s_tail = 0;
    }
    r->heap_n = 0;
    r->n_buffered = 0;
    r->ready_n = r->ready_pos = 0;
    if (r->ready_ref) {
        ebuf_unref(r, r->ready_ref);
        r->ready_ref = NULL;
    }
    return 0;
}

// ---- accessors ----

const uint64_t *reader_stack(const reader_t *r, uint64_t id, uint32_t *n) {
    const stack_ref_t *s = hmap_get(&r->stacks, id);
    if (!s) {
        *n = 0;
        return NULL;
    }
    *n = s->n;
    return s->frames;
}

size_t reader_n_stacks(const reader_t *r) { return hmap_count(&r->stacks); }

const reader_module_t *reader_modules(const reader_t *r, size_t *n) {
    *n = r->n_modules;
    return r->modules;
}

const reader_thread_t *reader_threads(const reader_t *r, size_t *n) {
    *n = r->n_threads;
    return r->threads;
}

const hpt_file_hdr_t *reader_header(const reader_t *r) { return &r->hdr; }

const reader_damage_t *reader_damage(const reader_t *r) { return &r->damage; }

const reader_trailer_t *reader_trailer(const reader_t *r) {
    return r->has_trailer ? &r->trailer : NULL;
}

const reader_cpu_t *reader_cpu(const reader_t *r) { return &r->cpu; }

const reader_allocator_t *reader_allocators(const reader_t *r, size_t *n) {
    *n = r->n_allocs;
    return r->allocs;
}

const reader_rss_t *reader_rss(const reader_t *r) { return &r->rss; }

size_t reader_cpu_stacks(const reader_t *r, const uint64_t **ids, const uint64_t **counts) {
    *ids = r->cpu_ids;
    *counts = r->cpu_counts;
    return r->cpu_n;
}

const char *reader_path(const reader_t *r) { return r->path; }

const char *reader_exe(const reader_t *r) { return r->exe; }

const char *const *reader_argv(const reader_t *r, size_t *argc) {
    *argc = r->argc;
    return r->argv;
}

uint64_t reader_offset(const reader_t *r) { return file_pos(r); }
