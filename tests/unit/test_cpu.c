// SPDX-License-Identifier: MIT
// CPU samples, the pure parts: the CPU_SAMPLE and CPU_INFO records through hpt_codec.h (signed
// time deltas, truncation), the perf ring's sample parser fed with synthetic bytes, and the CFI
// walk of a copied stack (it must follow the copy and refuse memory outside it).
#include "../../preload/cpu.h" // not analyzer/model/cpu.h, which the include path finds first
#include "format/hpt_codec.h"
#include "unwind.h"

#include <criterion/criterion.h>
#include <linux/perf_event.h>
#include <pthread.h>
#include <string.h>

// ---- codec ----

static size_t put_sample(uint8_t *p, uint64_t *prev_t, uint64_t t, uint64_t tid, uint64_t stack) {
    uint8_t *s = p;
    *p++ = HPT_REC_CPU_SAMPLE;
    p = hpt_put_varint(p, hpt_zigzag((int64_t)(t - *prev_t)));
    *prev_t = t;
    p = hpt_put_varint(p, tid);
    p = hpt_put_varint(p, stack);
    return (size_t)(p - s);
}

Test(cpu, sample_records_round_trip_with_times_going_back) {
    uint8_t buf[256];
    size_t n = 0;
    uint64_t prev = 1000;
    static const uint64_t times[] = {5000, 4000, 4000, 9000000000ull, 1000};
    for (size_t i = 0; i < 5; i++)
        n += put_sample(buf + n, &prev, times[i], 100 + i, 7 * i);
    hpt_dstate_t st = {.time_ns = 1000};
    const uint8_t *p = buf, *end = buf + n;
    for (size_t i = 0; i < 5; i++) {
        hpt_rec_t r;
        memset(&r, 0, sizeof r);
        p = hpt_rec_decode(p, end, &st, &r);
        cr_assert(p, "record %zu", i);
        cr_expect_eq(r.tag, HPT_REC_CPU_SAMPLE);
        cr_expect_eq(r.time_ns, times[i]);
        cr_expect_eq(r.tid, 100 + i);
        cr_expect_eq(r.stack, 7 * i);
    }
    cr_expect_eq(p, end);
}

Test(cpu, info_record_round_trips_and_truncation_fails) {
    uint8_t buf[128], *p = buf;
    const char *why = "HEAPPROF_CPU=0";
    *p++ = HPT_REC_CPU_INFO;
    p = hpt_put_varint(p, HPT_CPU_PERF);
    p = hpt_put_varint(p, 997);
    p = hpt_put_varint(p, 123456);
    p = hpt_put_varint(p, 3);
    p = hpt_put_varint(p, strlen(why));
    memcpy(p, why, strlen(why));
    p += strlen(why);
    hpt_dstate_t st = {0};
    hpt_rec_t r;
    cr_assert_eq(hpt_rec_decode(buf, p, &st, &r), p);
    cr_expect_eq(r.counters[0], HPT_CPU_PERF);
    cr_expect_eq(r.counters[1], 997);
    cr_expect_eq(r.counters[2], 123456);
    cr_expect_eq(r.counters[3], 3);
    cr_expect_eq(r.str_len, strlen(why));
    cr_expect_eq(memcmp(r.str, why, r.str_len), 0);
    for (const uint8_t *cut = buf; cut < p; cut++) {
        hpt_dstate_t s2 = {0};
        cr_expect_null(hpt_rec_decode(buf, cut, &s2, &r), "decoded from %td bytes", cut - buf);
    }
}

// ---- the perf sample parser ----

typedef struct builder {
    uint8_t b[4096];
    size_t n;
} builder_t;

static void u64(builder_t *b, uint64_t v) {
    memcpy(b->b + b->n, &v, 8);
    b->n += 8;
}

// ip, pid/tid, time, abi, regs (bp, sp, ip), size, data, dyn_size
static void sample(builder_t *b, uint64_t abi, uint64_t size, uint64_t dyn) {
    b->n = 0;
    u64(b, 0x401234);
    u64(b, ((uint64_t)77 << 32) | 66);
    u64(b, 123456789);
    u64(b, abi);
    if (abi != PERF_SAMPLE_REGS_ABI_NONE) {
        u64(b, 0x7ffd0100); // bp
        u64(b, 0x7ffd0000); // sp
        u64(b, 0x401234);   // ip
    }
    u64(b, size);
    if (size) {
        for (uint64_t i = 0; i < size; i++)
            b->b[b->n++] = (uint8_t)i;
        u64(b, dyn);
    }
}

Test(cpu, parser_reads_a_sample_as_the_kernel_lays_it_out) {
    builder_t b;
    sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 40);
    hp_cpu_sample_t s;
    cr_assert(hp_cpu_parse_sample(b.b, b.n, &s));
    cr_expect_eq(s.ip, 0x401234);
    cr_expect_eq(s.pid, 66);
    cr_expect_eq(s.tid, 77);
    cr_expect_eq(s.time_ns, 123456789);
    cr_expect(s.has_regs);
    cr_expect_eq(s.bp, 0x7ffd0100);
    cr_expect_eq(s.sp, 0x7ffd0000);
    cr_expect_eq(s.stack_len, 40);
    cr_expect_eq(s.stack[5], 5);
}

Test(cpu, parser_takes_samples_without_registers_or_stack) {
    builder_t b;
    hp_cpu_sample_t s;
    sample(&b, PERF_SAMPLE_REGS_ABI_NONE, 0, 0);
    cr_assert(hp_cpu_parse_sample(b.b, b.n, &s));
    cr_expect(!s.has_regs);
    cr_expect_eq(s.stack_len, 0);
    sample(&b, PERF_SAMPLE_REGS_ABI_64, 0, 0);
    cr_assert(hp_cpu_parse_sample(b.b, b.n, &s));
    cr_expect(s.has_regs);
    cr_expect_eq(s.stack_len, 0);
    cr_expect_null(s.stack);
}

Test(cpu, parser_refuses_truncated_and_inconsistent_samples) {
    builder_t b;
    hp_cpu_sample_t s;
    sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 40);
    for (size_t cut = 0; cut < b.n; cut++)
        cr_expect(!hp_cpu_parse_sample(b.b, cut, &s), "parsed %zu of %zu bytes", cut, b.n);
    cr_expect(!hp_cpu_parse_sample(b.b, b.n + 8, &s), "trailing bytes accepted");
    sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 65); // dyn_size > size
    cr_expect(!hp_cpu_parse_sample(b.b, b.n, &s));
    sample(&b, PERF_SAMPLE_REGS_ABI_64, 64, 0);
    uint64_t huge = UINT64_MAX - 7; // size field overflowing the record
    memcpy(b.b + 7 * 8, &huge, 8);
    cr_expect(!hp_cpu_parse_sample(b.b, b.n, &s));
}

// ---- walking a copied stack ----

static uint8_t copy[64 * 1024];

// The kernel copies the stack without looking at what lies there; under ASan the redzones
// between this test's locals must be copied too, without the memcpy interceptor's checks.
__attribute__((no_sanitize_address, noinline)) static void copy_raw(uint8_t *dst, uintptr_t src,
                                                                    size_t n) {
    for (size_t i = 0; i < n; i++)
        dst[i] = ((const volatile uint8_t *)src)[i];
}

// Takes this function's registers and a copy of the stack above them, as the kernel would for
// a sample, and walks the copy (of at most limit bytes).
__attribute__((noinline, optimize("omit-frame-pointer"))) static uint32_t
walk_copy(uint64_t *out, uint32_t max, size_t limit, uint64_t *ret) {
    uint64_t ip, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                     : "=r"(ip), "=r"(sp), "=r"(bp));
    pthread_attr_t a;
    void *lo;
    size_t size;
    pthread_getattr_np(pthread_self(), &a);
    pthread_attr_getstack(&a, &lo, &size);
    pthread_attr_destroy(&a);
    size_t avail = (size_t)((uintptr_t)lo + size - sp);
    size_t len = avail < sizeof copy ? avail : sizeof copy;
    if (len > limit)
        len = limit;
    copy_raw(copy, (uintptr_t)sp, len);
    *ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
    uint32_t n = hp_unwind_copy(ip, sp, bp, copy, len, out, max);
    __asm__ volatile("" ::: "memory"); // keep the call from becoming a tail call
    return n;
}

Test(cpu, copied_stack_walk_follows_the_copy) {
    uint64_t f[64], ret;
    uint32_t n = walk_copy(f, 64, sizeof copy, &ret);
    cr_assert_geq(n, 3, "only %u frames", n);
    cr_expect_eq(f[1], ret, "second frame %#lx is not walk_copy's return address %#lx",
                 (unsigned long)f[1], (unsigned long)ret);
}

Test(cpu, copied_stack_walk_refuses_memory_outside_the_copy) {
    uint64_t f[64], ret;
    uint32_t full = walk_copy(f, 64, sizeof copy, &ret);
    uint32_t cut = walk_copy(f, 64, 16, &ret); // too little to hold walk_copy's frame
    cr_expect_lt(cut, full);
    cr_expect_geq(cut, 1);
    cr_expect_leq(cut, 2);
    uint32_t none = walk_copy(f, 64, 0, &ret);
    cr_expect_eq(none, 1, "an empty copy still gives the interrupted pc");
}

// The timer fallback's walk of the live stack: rules it does not know end the walk and are
// asked for; once taught (hp_unwind_prepare, as the sampling thread does) it walks through.
__attribute__((noinline, optimize("omit-frame-pointer"))) static uint32_t
walk_live(uint64_t *out, uint32_t max, uint64_t *want, uint64_t *ret) {
    uint64_t ip, sp, bp;
    __asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2"
                     : "=r"(ip), "=r"(sp), "=r"(bp));
    *ret = (uint64_t)(uintptr_t)__builtin_return_address(0);
    uint32_t n = hp_unwind_signal(ip, sp, bp, out, max, want);
    __asm__ volatile("" ::: "memory");
    return n;
}

Test(cpu, signal_walk_uses_known_rules_only_and_asks_for_the_rest) {
    uint64_t f[64], want, ret;
    uint32_t n = walk_live(f, 64, &want, &ret);
    cr_assert_eq(n, 1, "a cold table gives only the interrupted pc");
    cr_assert_eq(want, f[0], "and asks for its rule");
    int lessons = 0;
    while (want && lessons < 64) {
        hp_unwind_prepare(want);
        lessons++;
        uint32_t m = walk_live(f, 64, &want, &ret);
        // further, unless the taught rule ends the walk (the outermost frame, or one the
        // simple rules cannot describe)
        cr_assert(m > n || want == 0, "a taught rule must take the walk further");
        n = m;
    }
    cr_expect_eq(want, 0, "still missing a rule after %d lessons", lessons);
    cr_expect_geq(n, 3);
    cr_expect_eq(f[1], ret);
}

// ---- perf events or the timer: the thread-rate rule (hp_cpu_perf_too_dear) ----

// Each new thread costs the kernel HP_CPU_INHERIT_NS for each sampled CPU's event; the switch
// comes where that passes HP_CPU_SWITCH_SHARE of one CPU over the window: 2% of a second is
// 20 ms, i.e. ~2,273 threads a second on 2 CPUs and ~71 on 64.
Test(cpu, perf_is_given_up_when_thread_copies_pass_the_share) {
    const uint64_t sec = 1000000000u;
    cr_expect_not(hp_cpu_perf_too_dear(2272, sec, 2));
    cr_expect(hp_cpu_perf_too_dear(2273, sec, 2));
    cr_expect_not(hp_cpu_perf_too_dear(71, sec, 64));
    cr_expect(hp_cpu_perf_too_dear(72, sec, 64));
    cr_expect_not(hp_cpu_perf_too_dear(71 * 3, 3 * sec, 64), "a rate, not a count");
    cr_expect_not(hp_cpu_perf_too_dear(0, sec, 64));
    cr_expect_not(hp_cpu_perf_too_dear(1000000, 0, 64), "no window: nothing to judge");
    cr_expect_not(hp_cpu_perf_too_dear(1000000, sec, 0), "no events: nothing to give up");
}
