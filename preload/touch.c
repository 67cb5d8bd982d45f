// SPDX-License-Identifier: MIT
#include "touch.h"

#include "compiler.h"
#include "config.h"
#include "real.h"

#include <dlfcn.h>
#include <emmintrin.h>
#include <immintrin.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#define PAGE 4096u
#define LINE 64u
#define CHUNK (255u * 16u) // the most bytes count_equal's 8-bit lane counters can take

// Line stride of a block: 1 (every byte) up to the sample size, then the power of two that
// keeps the lines measured within it, but never more than one page (PAGE / LINE lines), so that
// every page of a large block has a measured line and a page the program faulted in is seen
// (docs/trace-format.md#touch). A block that grows by realloc gets a stride that is a multiple
// of its old one, so every line it measures was measured (filled) before the copy.
static inline size_t stride_lines(size_t usable) {
    if (HP_LIKELY(usable <= hp_config.touch_sample_bytes))
        return 1;
    // the least shift with (lines >> shift) <= budget, i.e. lines / (budget + 1) < 1 << shift:
    // its bit length (one division in place of a loop whose exit mispredicted on c_churn's
    // sizes), capped at one line a page (PAGE / LINE = 1 << 6)
    size_t q = usable / LINE / (hp_config.touch_sample_bytes / LINE + 1);
    unsigned shift = q ? 64u - (unsigned)__builtin_clzll(q) : 0;
    _Static_assert(PAGE / LINE == 1u << 6, "the cap is one line a page");
    return (size_t)1 << (shift < 6 ? shift : 6);
}

// 16 x 0xff from offset 16, so that tail_mask + 16 - k keeps the last k lanes of a vector.
static const uint8_t tail_mask[32] = {
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

static inline uint64_t hsum(__m128i counters) {
    __m128i s = _mm_sad_epu8(counters, _mm_setzero_si128());
    return (uint64_t)_mm_cvtsi128_si64(s) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(s, s));
}

// Bytes equal to the pattern and bytes equal to zero in [p, p + n), n <= CHUNK. SSE2: per
// 16 bytes one load, two compares, two subtractions (a compare gives -1 for equal lanes).
static void count_equal(const uint8_t *p, size_t n, uint64_t *eq_pat, uint64_t *eq_zero) {
    const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN), zero = _mm_setzero_si128();
    __m128i a = zero, z = zero;
    size_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
        a = _mm_sub_epi8(a, _mm_cmpeq_epi8(v, pat));
        z = _mm_sub_epi8(z, _mm_cmpeq_epi8(v, zero));
    }
    size_t rest = n - i;
    if (rest && n >= 16) {
        // the last 16 bytes again, with the lanes already counted masked off
        __m128i v = _mm_loadu_si128((const __m128i *)(p + n - 16));
        __m128i keep = _mm_loadu_si128((const __m128i *)(tail_mask + rest));
        a = _mm_sub_epi8(a, _mm_and_si128(_mm_cmpeq_epi8(v, pat), keep));
        z = _mm_sub_epi8(z, _mm_and_si128(_mm_cmpeq_epi8(v, zero), keep));
        rest = 0;
    }
    uint64_t ea = hsum(a), ez = hsum(z);
    for (; rest; rest--, i++) {
        ea += p[i] == HPT_TOUCH_PATTERN;
        ez += p[i] == 0;
    }
    *eq_pat += ea;
    *eq_zero += ez;
}

// The same counts with AVX2 where the CPU has it (hp_touch_init): half the instructions, 32
// bytes a step. Measuring the block was the largest part of a free's cost (callgrind, c_churn:
// ~240 instructions a free, of them ~130 in count_equal's loop). The figures are the same.
static bool use_avx2;

// 64 x 0 then 64 x 0xff: tail_mask64 + k keeps the last k lanes of 64 bytes (two vectors).
static const uint8_t tail_mask64[128] = {
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,    0,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

__attribute__((target("avx2"))) static inline uint64_t hsum256(__m256i counters) {
    __m256i s = _mm256_sad_epu8(counters, _mm256_setzero_si256());
    __m128i t = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (uint64_t)_mm_cvtsi128_si64(t) + (uint64_t)_mm_cvtsi128_si64(_mm_unpackhi_epi64(t, t));
}

// 16 to 64 bytes, most blocks (glibc's smallest usable sizes are 24, 40, 56 and 72): two
// overlapping loads whose compare masks are counted with popcnt, the second's lanes that the
// first already counted masked off; no loop and no lane sums. Every CPU with AVX2 has popcnt.
__attribute__((target("avx2,popcnt"))) static inline void
count_small_avx2(const uint8_t *p, size_t n, uint64_t *eq_pat, uint64_t *eq_zero) {
    unsigned pa, za, pb, zb;
    if (n <= 32) {
        const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN), zero = _mm_setzero_si128();
        __m128i x = _mm_loadu_si128((const __m128i *)p);
        __m128i y = _mm_loadu_si128((const __m128i *)(p + n - 16));
        unsigned keep = (0xffffu << (32 - n)) & 0xffffu; // y's last n - 16 lanes
        pa = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, pat));
        za = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(x, zero));
        pb = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(y, pat)) & keep;
        zb = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(y, zero)) & keep;
    } else {
        const __m256i pat = _mm256_set1_epi8((char)HPT_TOUCH_PATTERN),
                      zero = _mm256_setzero_si256();
        __m256i x = _mm256_loadu_si256((const __m256i *)p);
        __m256i y = _mm256_loadu_si256((const __m256i *)(p + n - 32));
        unsigned keep = ~0u << (64 - n); // y's last n - 32 lanes
        pa = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, pat));
        za = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(x, zero));
        pb = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(y, pat)) & keep;
        zb = (unsigned)_mm256_movemask_epi8(_mm256_cmpeq_epi8(y, zero)) & keep;
    }
    *eq_pat += (uint64_t)(__builtin_popcount(pa) + __builtin_popcount(pb));
    *eq_zero += (uint64_t)(__builtin_popcount(za) + __builtin_popcount(zb));
}

// count_equal with 32-byte vectors; 16 <= n <= CHUNK (at most 2 x 63 + 2 steps a lane, no
// overflow).
// Inlined into the lean path's measure_whole_avx2 (eq and ez stay in registers there).
__attribute__((target("avx2,popcnt"), always_inline)) static inline void
count_equal_avx2_inl(const uint8_t *p, size_t n, uint64_t *eq_pat, uint64_t *eq_zero) {
    if (n <= 64) {
        count_small_avx2(p, n, eq_pat, eq_zero);
        return;
    }
    // 64 bytes a step, then the last 64 bytes again with the lanes already counted masked off
    // (all of them when n is a multiple of 64): no branch after the loop
    const __m256i pat = _mm256_set1_epi8((char)HPT_TOUCH_PATTERN), zero = _mm256_setzero_si256();
    __m256i a = zero, z = zero;
    size_t i = 0;
    for (; i + 64 <= n; i += 64) {
        __m256i v = _mm256_loadu_si256((const __m256i *)(p + i));
        __m256i w = _mm256_loadu_si256((const __m256i *)(p + i + 32));
        a = _mm256_sub_epi8(a, _mm256_cmpeq_epi8(v, pat));
        z = _mm256_sub_epi8(z, _mm256_cmpeq_epi8(v, zero));
        a = _mm256_sub_epi8(a, _mm256_cmpeq_epi8(w, pat));
        z = _mm256_sub_epi8(z, _mm256_cmpeq_epi8(w, zero));
    }
    size_t rest = n - i; // 0 to 63
    __m256i v = _mm256_loadu_si256((const __m256i *)(p + n - 64));
    __m256i w = _mm256_loadu_si256((const __m256i *)(p + n - 32));
    __m256i kv = _mm256_loadu_si256((const __m256i *)(tail_mask64 + rest));
    __m256i kw = _mm256_loadu_si256((const __m256i *)(tail_mask64 + rest + 32));
    a = _mm256_sub_epi8(a, _mm256_and_si256(_mm256_cmpeq_epi8(v, pat), kv));
    z = _mm256_sub_epi8(z, _mm256_and_si256(_mm256_cmpeq_epi8(v, zero), kv));
    a = _mm256_sub_epi8(a, _mm256_and_si256(_mm256_cmpeq_epi8(w, pat), kw));
    z = _mm256_sub_epi8(z, _mm256_and_si256(_mm256_cmpeq_epi8(w, zero), kw));
    // both lane sums at once: [a's, z's] in one vector
    __m256i sa = _mm256_sad_epu8(a, zero), sz = _mm256_sad_epu8(z, zero);
    __m256i t = _mm256_add_epi64(_mm256_unpacklo_epi64(sa, sz), _mm256_unpackhi_epi64(sa, sz));
    __m128i u = _mm_add_epi64(_mm256_castsi256_si128(t), _mm256_extracti128_si256(t, 1));
    *eq_pat += (uint64_t)_mm_cvtsi128_si64(u);
    *eq_zero += (uint64_t)_mm_extract_epi64(u, 1);
}

__attribute__((target("avx2,popcnt"))) static void count_equal_avx2(const uint8_t *p, size_t n,
                                                                    uint64_t *eq_pat,
                                                                    uint64_t *eq_zero) {
    if (n >= 16)
        count_equal_avx2_inl(p, n, eq_pat, eq_zero);
    else
        count_equal(p, n, eq_pat, eq_zero);
}

// Every k-th whole line of [p, p + usable) from the start (k > 1): adds the bytes equal to the
// pattern and to zero, returns the offset past the last whole line visited (count_filled
// measures a last line the block cuts short).
__attribute__((target("avx2"))) static size_t count_lines_avx2(const uint8_t *p, size_t usable,
                                                               size_t k, uint64_t *eq,
                                                               uint64_t *ez) {
    const __m256i pat = _mm256_set1_epi8((char)HPT_TOUCH_PATTERN), zero = _mm256_setzero_si256();
    __m256i a = zero, z = zero;
    unsigned vectors = 0;
    size_t off = 0;
    for (; off + LINE <= usable; off += k * LINE) {
        __m256i x = _mm256_loadu_si256((const __m256i *)(p + off));
        __m256i y = _mm256_loadu_si256((const __m256i *)(p + off + 32));
        a = _mm256_sub_epi8(a, _mm256_cmpeq_epi8(x, pat));
        z = _mm256_sub_epi8(z, _mm256_cmpeq_epi8(x, zero));
        a = _mm256_sub_epi8(a, _mm256_cmpeq_epi8(y, pat));
        z = _mm256_sub_epi8(z, _mm256_cmpeq_epi8(y, zero));
        if ((vectors += 2) > 255 - 2) {
            *eq += hsum256(a), *ez += hsum256(z);
            a = z = zero, vectors = 0;
        }
    }
    *eq += hsum256(a), *ez += hsum256(z);
    return off;
}

// The same with SSE2.
static size_t count_lines_sse2(const uint8_t *p, size_t usable, size_t k, uint64_t *eq,
                               uint64_t *ez) {
    // the lane counters summed only when they could overflow
    const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN), zero = _mm_setzero_si128();
    __m128i a = zero, z = zero;
    unsigned vectors = 0;
    size_t off = 0;
    for (; off + LINE <= usable; off += k * LINE) {
        for (unsigned v = 0; v < LINE; v += 16) {
            __m128i x = _mm_loadu_si128((const __m128i *)(p + off + v));
            a = _mm_sub_epi8(a, _mm_cmpeq_epi8(x, pat));
            z = _mm_sub_epi8(z, _mm_cmpeq_epi8(x, zero));
        }
        if ((vectors += LINE / 16) > 255 - LINE / 16) {
            *eq += hsum(a), *ez += hsum(z);
            a = z = zero, vectors = 0;
        }
    }
    *eq += hsum(a), *ez += hsum(z);
    return off;
}

static void count_filled(const uint8_t *p, size_t usable, hp_touch_t *out) {
    size_t k = stride_lines(usable);
    uint64_t eq = 0, ez = 0, measured = 0;
    bool avx2 = use_avx2;
    if (k == 1) {
        for (size_t off = 0; off < usable; off += CHUNK) {
            size_t n = usable - off < CHUNK ? usable - off : CHUNK;
            if (avx2)
                count_equal_avx2(p + off, n, &eq, &ez);
            else
                count_equal(p + off, n, &eq, &ez);
        }
        measured = usable;
    } else {
        // whole measured lines in one loop; a last line the block cuts short goes through
        // count_equal
        size_t off = avx2 ? count_lines_avx2(p, usable, k, &eq, &ez)
                          : count_lines_sse2(p, usable, k, &eq, &ez);
        measured = (off / (k * LINE)) * LINE;
        if (off < usable) {
            count_equal(p + off, usable - off, &eq, &ez);
            measured += usable - off;
        }
    }
    out->method = k == 1 ? HPT_TOUCH_FILL : HPT_TOUCH_FILL_SAMPLED;
    out->touched = (measured - eq) * k;
    out->touched_nz = (measured - ez) * k;
}

// Blocks above touch_fill_max (docs/trace-format.md#touch, "pattern on resident pages"): only
// the measured bytes on pages that are resident when the block is handed out are filled. Filling
// a resident page costs no memory, and it is the only kind that can hold an earlier block's
// bytes (glibc serves large blocks from the heap once its mmap threshold has risen); a page that
// is not resident reads as zeros once the program faults it in, which differs from the pattern.
// At free only pages resident then are read (reading the rest would map them), so one measure
// counts the bytes written on recycled pages exactly and whole faulted-in pages otherwise.
typedef struct page_count {
    uint64_t measured, eq, ez; // measured bytes on resident pages; of them equal to pattern / 0
} page_count_t;

// What a visit does with each measured range: fill it, count it in place, or queue it to be
// copied by process_vm_readv and counted then (blocks live at exit, which a thread still
// running may free and unmap meanwhile: a range no longer mapped fails the copy with EFAULT
// instead of faulting).
enum visit_op { VISIT_FILL, VISIT_COUNT, VISIT_COPY };

// Ranges of many blocks copied by one process_vm_readv (at most IOV_MAX = 1024 of them, 64 KiB):
// each remembers its block (owner), whose counts it goes to.
#define COPY_RANGES 1024u
typedef struct copy_batch {
    struct iovec local[COPY_RANGES], remote[COPY_RANGES];
    uint16_t owner[COPY_RANGES];
    unsigned n;
    size_t bytes;
    page_count_t *c; // per owner
    bool *failed;    // per owner: a range of it could not be copied
    uint8_t buf[64u << 10];
} copy_batch_t;

typedef struct visit {
    enum visit_op op;
    page_count_t c;      // VISIT_COUNT
    copy_batch_t *copy;  // VISIT_COPY
    uint16_t owner;      // VISIT_COPY
} visit_t;

// Copies and counts the queued ranges. A copy stops at the first range that fails (never
// inside one): the ranges before it count, its block gets no figure, the rest are copied again.
static void copy_flush(copy_batch_t *b) {
    unsigned first = 0;
    pid_t pid = getpid();
    while (first < b->n) {
        ssize_t got = process_vm_readv(pid, b->local + first, b->n - first, b->remote + first,
                                       b->n - first, 0);
        size_t done = got > 0 ? (size_t)got : 0;
        unsigned i = first;
        for (; i < b->n && b->local[i].iov_len <= done; i++) {
            page_count_t *c = &b->c[b->owner[i]];
            const uint8_t *x = b->local[i].iov_base;
            size_t len = b->local[i].iov_len;
            for (size_t off = 0; off < len; off += CHUNK)
                count_equal(x + off, len - off < CHUNK ? len - off : CHUNK, &c->eq, &c->ez);
            c->measured += len;
            done -= len;
        }
        if (i == b->n)
            break;
        b->failed[b->owner[i]] = true;
        first = i + 1;
    }
    b->n = 0;
    b->bytes = 0;
}

static void visit_range(visit_t *v, uintptr_t a, uintptr_t b) {
    if (v->op == VISIT_FILL) {
        memset((void *)a, HPT_TOUCH_PATTERN, b - a);
    } else if (v->op == VISIT_COUNT) {
        for (uintptr_t x = a; x < b; x += CHUNK)
            count_equal((const uint8_t *)x, b - x < CHUNK ? b - x : CHUNK, &v->c.eq, &v->c.ez);
        v->c.measured += b - a;
    } else {
        copy_batch_t *c = v->copy;
        while (a < b) {
            size_t n = b - a < 4096 ? b - a : 4096;
            if (c->n == COPY_RANGES || c->bytes + n > sizeof c->buf)
                copy_flush(c);
            c->local[c->n] = (struct iovec){c->buf + c->bytes, n};
            c->remote[c->n] = (struct iovec){(void *)a, n};
            c->owner[c->n] = v->owner;
            c->n++;
            c->bytes += n;
            a += n;
        }
    }
}

// The measured bytes of the block [p, p + usable) from byte `from` on that lie in [lo, hi):
// all of them (k == 1), or the parts of every k-th line from the block's start.
static void lines_visit(uintptr_t p, size_t from, size_t usable, size_t k, uintptr_t lo,
                        uintptr_t hi, visit_t *v) {
    lo = lo > p + from ? lo : p + from;
    hi = hi < p + usable ? hi : p + usable;
    if (lo >= hi)
        return;
    if (k == 1) {
        visit_range(v, lo, hi);
        return;
    }
    size_t step = k * LINE;
    // the measured line that starts at or before lo (it may reach into [lo, hi))
    for (uintptr_t s = p + (lo - p) / step * step; s < hi; s += step) {
        uintptr_t a = s > lo ? s : lo, b = s + LINE < hi ? s + LINE : hi;
        if (a < b)
            visit_range(v, a, b);
    }
}

// Visits the measured bytes on every resident page of the block from byte `from` on; -1 if
// mincore failed (a live block is mapped, so it does not; one freed under a VISIT_COPY may be
// unmapped).
static int resident_visit(uint8_t *p, size_t from, size_t usable, visit_t *v) {
    size_t k = stride_lines(usable);
    uintptr_t end = (uintptr_t)p + usable;
    uintptr_t page = ((uintptr_t)p + from) & ~(uintptr_t)(PAGE - 1);
    unsigned char vec[1024]; // 4 MiB a call; the stack of a small thread stays small
    while (page < end) {
        size_t pages = (end - page + PAGE - 1) / PAGE;
        if (pages > sizeof vec)
            pages = sizeof vec;
        if (mincore((void *)page, pages * PAGE, vec) != 0)
            return -1;
        for (size_t i = 0; i < pages; i++, page += PAGE)
            if (vec[i] & 1)
                lines_visit((uintptr_t)p, from, usable, k, page, page + PAGE, v);
    }
    return 0;
}

static void set_counts(hp_touch_t *out, int method, const page_count_t *c, size_t k) {
    out->method = method;
    out->touched = (c->measured - c->eq) * k;
    out->touched_nz = (c->measured - c->ez) * k;
}

static int count_resident(const uint8_t *p, size_t usable, hp_touch_t *out) {
    visit_t v = {.op = VISIT_COUNT};
    if (resident_visit((uint8_t *)p, 0, usable, &v) != 0)
        return -1;
    set_counts(out, HPT_TOUCH_PAGES, &v.c, stride_lines(usable));
    return 0;
}

// glibc's malloc keeps a block's chunk size in the word before it (low 3 bits flags; 2: the
// chunk was mmapped). For a chunk from the heap the usable size is that size less one word.
// Reading it spares a call and glibc's check of the next chunk's header, a second cache miss
// that depends on the first: 7-10 ns a malloc/free pair on c_churn. Taken only when the real
// allocator is glibc's (hp_touch_init) and the word has agreed with malloc_usable_size on the
// program's first TRUST_AFTER heap blocks; any disagreement ends it. mmapped chunks (rare, large)
// always go through the call. The check uses the program's own blocks: allocating test blocks
// would change its heap.
#define TRUST_AFTER 64u
static _Atomic bool glibc_candidate, glibc_trusted;
static _Atomic unsigned agreed;

static bool in_libc(const void *fn, const char **obj) {
    Dl_info info;
    if (!fn || !dladdr(fn, &info) || !info.dli_fname)
        return false;
    if (*obj && strcmp(*obj, info.dli_fname) != 0)
        return false;
    *obj = info.dli_fname;
    const char *base = strrchr(info.dli_fname, '/');
    return strncmp(base ? base + 1 : info.dli_fname, "libc.so", 7) == 0;
}

void hp_touch_init(void) {
    const char *obj = NULL;
    // every entry point of one allocator, and that allocator glibc's own (not another one
    // preloaded or linked in, not libc_malloc_debug.so)
    bool glibc = in_libc((const void *)(uintptr_t)hp_real.malloc, &obj) &&
                 in_libc((const void *)(uintptr_t)hp_real.free, &obj) &&
                 in_libc((const void *)(uintptr_t)hp_real.calloc, &obj) &&
                 in_libc((const void *)(uintptr_t)hp_real.realloc, &obj) &&
                 in_libc((const void *)(uintptr_t)hp_real.memalign, &obj) &&
                 in_libc((const void *)(uintptr_t)hp_real.malloc_usable_size, &obj);
    atomic_store_explicit(&glibc_candidate, glibc, memory_order_relaxed);
    __builtin_cpu_init(); // cpuid only; also checks that the kernel saves the AVX registers
    use_avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
}

HP_NOINLINE static size_t usable_checked(const void *p) {
    size_t real = hp_real.malloc_usable_size((void *)p);
    if (!atomic_load_explicit(&glibc_candidate, memory_order_relaxed))
        return real;
    size_t word = ((const size_t *)p)[-1];
    if (word & 2)
        return real;
    if ((word & ~(size_t)7) - 8 != real) {
        atomic_store_explicit(&glibc_candidate, false, memory_order_relaxed);
        atomic_store_explicit(&glibc_trusted, false, memory_order_relaxed);
        return real;
    }
    // threads may lose a count here (no read-modify-write): that only means more checks
    unsigned n = atomic_load_explicit(&agreed, memory_order_relaxed) + 1;
    atomic_store_explicit(&agreed, n, memory_order_relaxed);
    if (n >= TRUST_AFTER)
        atomic_store_explicit(&glibc_trusted, true, memory_order_relaxed);
    return real;
}

bool hp_touch_set_avx2(bool on) {
    __builtin_cpu_init();
    use_avx2 = on && __builtin_cpu_supports("avx2") && __builtin_cpu_supports("popcnt");
    return use_avx2;
}

bool hp_touch_header_trusted(void) {
    return atomic_load_explicit(&glibc_trusted, memory_order_relaxed) &&
           atomic_load_explicit(&glibc_candidate, memory_order_relaxed);
}

size_t hp_touch_usable(const void *p) {
    if (HP_LIKELY(atomic_load_explicit(&glibc_trusted, memory_order_relaxed))) {
        size_t word = ((const size_t *)p)[-1];
        if (HP_LIKELY(!(word & 2)))
            return (word & ~(size_t)7) - 8;
    }
    return usable_checked(p);
}

// The common case of the event path, lean: a block whose usable size the chunk header gives
// (hp_touch_usable's fast path) and that is measured whole (stride 1: at most the sample size and
// touch_fill_max; count_equal's one chunk). hp_touch_fill_fresh and hp_touch_measure take it in
// a leaf that needs no callee-saved register and makes at most a tail call; anything else goes
// to the general path out of line (bench/hot_instr.sh, touch column on c_churn: 112 -> 80
// instructions an event with the AVX2 fill and count below; docs/design.md#bytes-touched).
static inline __attribute__((always_inline)) size_t lean_usable(const void *p) {
    if (!atomic_load_explicit(&glibc_trusted, memory_order_relaxed))
        return SIZE_MAX;
    size_t word = ((const size_t *)p)[-1];
    if (word & 2)
        return SIZE_MAX;
    size_t n = (word & ~(size_t)7) - 8;
    // 16 bytes or more (glibc's usable sizes are 24 or more); a header that is garbage gives a
    // size over CHUNK or wraps: the general path then
    return n - 16 <= CHUNK - 16 && n <= hp_config.touch_sample_bytes &&
                   n <= hp_config.touch_fill_max
               ? n
               : SIZE_MAX;
}

static void fill_block(void *p, size_t usable, size_t keep);

// (fill_block, not hp_touch_fill: bench/hot_instr.sh sums the hp_touch_* functions inclusive)
HP_NOINLINE static void fill_general(void *p) {
    fill_block(p, hp_touch_usable(p), 0);
}

// 64 < n <= CHUNK bytes: 64 a step, then the last 64 again. In place of glibc's memset, whose
// size classes cost more instructions (~42 a call on c_churn's 72-520-byte blocks).
__attribute__((target("avx2"))) static void fill_whole_avx2(uint8_t *b, size_t n) {
    const __m256i pat = _mm256_set1_epi8((char)HPT_TOUCH_PATTERN);
    for (size_t i = 0; i + 64 <= n; i += 64) {
        _mm256_storeu_si256((__m256i *)(b + i), pat);
        _mm256_storeu_si256((__m256i *)(b + i + 32), pat);
    }
    _mm256_storeu_si256((__m256i *)(b + n - 64), pat);
    _mm256_storeu_si256((__m256i *)(b + n - 32), pat);
}

void hp_touch_fill_fresh(void *p) {
    size_t n = lean_usable(p);
    if (HP_UNLIKELY(n == SIZE_MAX)) {
        fill_general(p);
        return;
    }
    uint8_t *b = p;
    if (n <= 64) {
        // most blocks: two or four overlapping stores in place of memset's call
        const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN);
        _mm_storeu_si128((__m128i *)b, pat);
        _mm_storeu_si128((__m128i *)(b + n - 16), pat);
        if (n > 32) {
            _mm_storeu_si128((__m128i *)(b + 16), pat);
            _mm_storeu_si128((__m128i *)(b + n - 32), pat);
        }
        return;
    }
    if (HP_LIKELY(use_avx2)) {
        fill_whole_avx2(b, n);
        return;
    }
    memset(b, HPT_TOUCH_PATTERN, n);
}

static void fill_block(void *p, size_t usable, size_t keep) {
    if (keep >= usable)
        return;
    uint8_t *b = p;
    if (usable > hp_config.touch_fill_max) {
        visit_t v = {.op = VISIT_FILL};
        resident_visit(b, keep, usable, &v); // on failure nothing is filled: an upper bound
        return;
    }
    size_t k = stride_lines(usable);
    if (k == 1) {
        size_t n = usable - keep;
        if (n >= 16 && n <= 64) {
            // most blocks: two or four overlapping stores in place of memset's call
            const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN);
            _mm_storeu_si128((__m128i *)(b + keep), pat);
            _mm_storeu_si128((__m128i *)(b + usable - 16), pat);
            if (n > 32) {
                _mm_storeu_si128((__m128i *)(b + keep + 16), pat);
                _mm_storeu_si128((__m128i *)(b + usable - 32), pat);
            }
            return;
        }
        memset(b + keep, HPT_TOUCH_PATTERN, n);
        return;
    }
    // the measured lines past keep; a line keep or the block's end cuts through is filled in part
    const __m128i pat = _mm_set1_epi8((char)HPT_TOUCH_PATTERN);
    for (size_t off = keep / (k * LINE) * (k * LINE); off < usable; off += k * LINE) {
        size_t from = off > keep ? off : keep, to = off + LINE < usable ? off + LINE : usable;
        if (from == off && to == off + LINE) {
            for (unsigned v = 0; v < LINE; v += 16)
                _mm_storeu_si128((__m128i *)(b + off + v), pat);
        } else if (from < to) {
            memset(b + from, HPT_TOUCH_PATTERN, to - from);
        }
    }
}

void hp_touch_fill(void *p, size_t usable, size_t keep) {
    fill_block(p, usable, keep);
}

// One chunk of a block measured whole, counted with AVX2 (the lean path's).
__attribute__((target("avx2,popcnt"))) static void measure_whole_avx2(const uint8_t *p, size_t n,
                                                                      hp_touch_t *out) {
    uint64_t eq = 0, ez = 0;
    count_equal_avx2_inl(p, n, &eq, &ez);
    out->method = HPT_TOUCH_FILL;
    out->touched = n - eq;
    out->touched_nz = n - ez;
}

HP_NOINLINE static void measure_general(const void *p, hp_touch_t *out) {
    out->method = -1;
    size_t n = hp_touch_usable(p);
    if (HP_UNLIKELY(n > ((size_t)1 << 46)))
        return; // not a block the allocator knows: leave it to the real free to complain
    if (n <= hp_config.touch_fill_max)
        count_filled(p, n, out);
    else
        count_resident(p, n, out);
}

void hp_touch_measure(const void *p, hp_touch_t *out) {
    size_t n = lean_usable(p);
    if (HP_LIKELY(n != SIZE_MAX && use_avx2)) {
        measure_whole_avx2(p, n, out);
        return;
    }
    measure_general(p, out);
}

// Reads the words before the blocks (glibc's chunk headers) by copy; ok[i]: word[i] was read.
static void read_headers(const uint64_t *addr, size_t n, size_t *word, bool *ok) {
    struct iovec local[HP_TOUCH_LIVE_GROUP], remote[HP_TOUCH_LIVE_GROUP];
    for (size_t i = 0; i < n; i++) {
        local[i] = (struct iovec){&word[i], sizeof *word};
        remote[i] = (struct iovec){(void *)(uintptr_t)(addr[i] - sizeof *word), sizeof *word};
        ok[i] = false;
    }
    pid_t pid = getpid();
    for (size_t first = 0; first < n;) {
        ssize_t got = process_vm_readv(pid, local + first, n - first, remote + first, n - first, 0);
        size_t good = got > 0 ? (size_t)got / sizeof *word : 0;
        for (size_t i = first; i < first + good; i++)
            ok[i] = true;
        first += good + 1; // the one that failed gets no figure
    }
}

void hp_touch_measure_live(const uint64_t *addr, size_t n, hp_touch_t *out) {
    // not reentrant (one batch buffer, 100 KiB, kept out of the stack): the exit's one caller
    // and tests
    static copy_batch_t batch;
    page_count_t c[HP_TOUCH_LIVE_GROUP];
    bool failed[HP_TOUCH_LIVE_GROUP], ok[HP_TOUCH_LIVE_GROUP];
    size_t word[HP_TOUCH_LIVE_GROUP], usable[HP_TOUCH_LIVE_GROUP];
    for (size_t i = 0; i < n; i++)
        out[i].method = -1;
    // the usable size comes from glibc's chunk header, as in hp_touch_usable
    if (n > HP_TOUCH_LIVE_GROUP || !atomic_load_explicit(&glibc_candidate, memory_order_relaxed))
        return;
    read_headers(addr, n, word, ok);
    batch.n = 0;
    batch.bytes = 0;
    batch.c = c;
    batch.failed = failed;
    for (size_t i = 0; i < n; i++) {
        c[i] = (page_count_t){0, 0, 0};
        failed[i] = !ok[i];
        size_t chunk = word[i] & ~(size_t)7, hdr = (word[i] & 2) ? 16 : 8;
        if (failed[i] || chunk <= hdr || chunk - hdr > ((size_t)1 << 46)) {
            failed[i] = true; // not a block's header (freed and reused meanwhile): no figure
            continue;
        }
        usable[i] = chunk - hdr;
        size_t k = stride_lines(usable[i]);
        uintptr_t p = (uintptr_t)addr[i];
        visit_t v = {.op = VISIT_COPY, .copy = &batch, .owner = (uint16_t)i};
        if (usable[i] <= hp_config.touch_fill_max) {
            lines_visit(p, 0, usable[i], k, p, p + usable[i], &v);
            out[i].method = k == 1 ? HPT_TOUCH_FILL : HPT_TOUCH_FILL_SAMPLED;
        } else if (resident_visit((uint8_t *)p, 0, usable[i], &v) == 0) {
            out[i].method = HPT_TOUCH_PAGES;
        } else {
            failed[i] = true;
        }
    }
    copy_flush(&batch);
    for (size_t i = 0; i < n; i++) {
        if (failed[i])
            out[i].method = -1;
        else if (out[i].method >= 0)
            set_counts(&out[i], out[i].method, &c[i], stride_lines(usable[i]));
    }
}
