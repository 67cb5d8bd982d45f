// SPDX-License-Identifier: MIT
// Entry patching (preload/patch.c) on functions of this test, written in assembly so their
// first instructions are known: a RIP-relative load is moved into the trampoline and still
// reads the same variable; a conditional branch among the first instructions (rel8, and rel32
// with a BND prefix) is moved and still goes both ways; jrcxz, a jump back into the patched
// bytes and a function shorter than a jump are refused. The ALLOCATOR record round-trips.
#include "format/hpt_codec.h"
#include "patch.h"

#include <criterion/criterion.h>
#include <string.h>

long hp_test_counter = 40;

// rip_load(x) = hp_test_counter + x; its first instruction is a 7-byte RIP-relative load
__asm__(".text\n"
        ".globl rip_load\n"
        ".type rip_load, @function\n"
        "rip_load:\n"
        "  mov hp_test_counter(%rip), %rax\n"
        "  add %rdi, %rax\n"
        "  ret\n"
        ".globl rip_load_end\n"
        "rip_load_end:\n"
        ".size rip_load, .-rip_load\n"
        // branch_first(x) = x ? 1 : 0, a conditional jump within the first five bytes
        ".globl branch_first\n"
        ".type branch_first, @function\n"
        "branch_first:\n"
        "  test %rdi, %rdi\n"
        "  je 1f\n"
        "  mov $1, %eax\n"
        "  ret\n"
        "1:\n"
        "  xor %eax, %eax\n"
        "  ret\n"
        ".globl branch_first_end\n"
        "branch_first_end:\n"
        // far_branch(x) = x ? 7 : 3: `bnd jne rel32` first (the target 200 bytes on), as
        // glibc built for CET writes its branches
        ".globl far_branch\n"
        ".type far_branch, @function\n"
        "far_branch:\n"
        "  test %rdi, %rdi\n"
        "  .byte 0xf2, 0x0f, 0x85\n"
        "  .long 4f - (. + 4)\n"
        "  mov $3, %eax\n"
        "  ret\n"
        "  .skip 200, 0xcc\n"
        "4:\n"
        "  mov $7, %eax\n"
        "  ret\n"
        ".globl far_branch_end\n"
        "far_branch_end:\n"
        // rcx_first(x): jrcxz has no opposite of its own form: refused
        ".globl rcx_first\n"
        ".type rcx_first, @function\n"
        "rcx_first:\n"
        "  mov %rdi, %rcx\n"
        "  jrcxz 5f\n"
        "  mov $1, %eax\n"
        "  ret\n"
        "5:\n"
        "  xor %eax, %eax\n"
        "  ret\n"
        ".globl rcx_first_end\n"
        "rcx_first_end:\n"
        // loop_back(n): counts to n; its loop jumps back to byte 2, inside the first five
        ".globl loop_back\n"
        ".type loop_back, @function\n"
        "loop_back:\n"
        "  xor %eax, %eax\n"
        "2:\n"
        "  inc %eax\n"
        "  cmp %edi, %eax\n"
        "  jl 2b\n"
        "  ret\n"
        ".globl loop_back_end\n"
        "loop_back_end:\n"
        // jmp_first(x) = rip_load(x) through a short jump over padding, as a shim that only
        // forwards (Rust's __rust_alloc with the default allocator) may look
        ".globl jmp_first\n"
        ".type jmp_first, @function\n"
        "jmp_first:\n"
        "  jmp 3f\n"
        "  nop\n"
        "  nop\n"
        "  nop\n"
        "3:\n"
        "  jmp rip_load\n"
        ".globl jmp_first_end\n"
        "jmp_first_end:\n"
        ".globl tiny\n"
        ".type tiny, @function\n"
        "tiny:\n"
        "  ret\n"
        ".globl tiny_end\n"
        "tiny_end:\n"
        // functions that do nothing, as glibc's _dl_debug_state: a lone ret (or endbr64; ret),
        // then the assembler's padding to the next 16-byte boundary
        ".p2align 4\n"
        ".globl empty_ret\n"
        ".type empty_ret, @function\n"
        "empty_ret:\n"
        "  ret\n"
        ".p2align 4\n"
        ".globl empty_endbr\n"
        ".type empty_endbr, @function\n"
        "empty_endbr:\n"
        "  endbr64\n"
        "  ret\n"
        ".p2align 4\n"
        // a ret with code right behind it (a jump target, say), not padding
        ".globl ret_then_code\n"
        ".type ret_then_code, @function\n"
        "ret_then_code:\n"
        "  ret\n"
        "  mov $7, %eax\n"
        "  ret\n"
        ".p2align 4\n"
        // glibc 2.36's _dl_debug_state, byte for byte: ret, then the padding its assembler
        // wrote (data16 data16 cs nopw 0(%rax,%rax,1); nopl 0(%rax)): what the shim patches
        // in every process, checked without a disassembler
        ".globl empty_glibc\n"
        ".type empty_glibc, @function\n"
        "empty_glibc:\n"
        "  .byte 0xc3, 0x66, 0x66, 0x2e, 0x0f, 0x1f, 0x84, 0, 0, 0, 0, 0, 0x0f, 0x1f, 0x40, 0\n"
        ".p2align 4\n"
        // endbr64; ret; then int3s and a one-byte nop
        ".globl empty_int3\n"
        ".type empty_int3, @function\n"
        "empty_int3:\n"
        "  .byte 0xf3, 0x0f, 0x1e, 0xfa, 0xc3, 0xcc, 0xcc, 0x90, 0xcc, 0xcc, 0xcc, 0xcc\n"
        "  .byte 0x66, 0x90, 0xcc, 0xcc\n"
        ".p2align 4\n"
        // ret, then an instruction that starts like a long nop but is not one (0f 1f /1)
        ".globl ret_then_hint\n"
        ".type ret_then_hint, @function\n"
        "ret_then_hint:\n"
        "  .byte 0xc3, 0x0f, 0x1f, 0x08, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc\n"
        "  .byte 0xcc, 0xcc, 0xcc, 0xcc\n"
        ".p2align 4\n");

long rip_load(long x);
extern const char rip_load_end[], branch_first_end[], loop_back_end[], tiny_end[],
    jmp_first_end[], far_branch_end[], rcx_first_end[];
long jmp_first(long x);
long branch_first(long x);
long far_branch(long x);
long rcx_first(long x);
int loop_back(int n);
void tiny(void);
void empty_ret(void);
void empty_endbr(void);
void ret_then_code(void);
void empty_glibc(void);
void empty_int3(void);
void ret_then_hint(void);

static size_t size_of(const void *fn, const char *end) {
    return (size_t)(end - (const char *)fn);
}

static const void *code(void (*fn)(void)) {
    const void *p;
    memcpy(&p, &fn, sizeof p);
    return p;
}

static long (*orig_rip_load)(long);

static long wrapped_rip_load(long x) {
    return orig_rip_load(x) + 1000;
}

Test(patch, a_rip_relative_first_instruction_is_moved_and_still_reads_its_variable) {
    long (*volatile call)(long) = rip_load; // through a pointer: the compiler cannot fold it
    cr_assert_eq(call(2), 42);
    const void *fn = code((void (*)(void))rip_load);
    cr_assert_null(hp_patch_check(fn, size_of(fn, rip_load_end)));
    long (*w)(long) = wrapped_rip_load;
    uintptr_t wa;
    memcpy(&wa, &w, sizeof wa);
    const char *why = hp_patch_entry((void *)fn, size_of(fn, rip_load_end), wa, &orig_rip_load);
    cr_assert_null(why, "%s", why);
    cr_expect_eq(call(2), 1042, "the entry jumps to the wrapper");
    cr_expect_eq(orig_rip_load(2), 42, "the trampoline runs the original");
    hp_test_counter = 50;
    cr_expect_eq(orig_rip_load(2), 52, "the moved load reads the same variable");
}

static long (*orig_jmp_first)(long);

static long wrapped_jmp_first(long x) {
    return orig_jmp_first(x) + 2000;
}

Test(patch, a_leading_jump_becomes_an_absolute_one_in_the_trampoline) {
    long (*volatile call)(long) = jmp_first;
    cr_assert_eq(call(1), 41);
    const void *fn = code((void (*)(void))jmp_first);
    long (*w)(long) = wrapped_jmp_first;
    uintptr_t wa;
    memcpy(&wa, &w, sizeof wa);
    const char *why = hp_patch_entry((void *)fn, size_of(fn, jmp_first_end), wa, &orig_jmp_first);
    cr_assert_null(why, "%s", why);
    cr_expect_eq(call(1), 2041);
    cr_expect_eq(orig_jmp_first(1), 41, "the trampoline follows the jump");
}

static long (*orig_branch_first)(long), (*orig_far_branch)(long);

static long wrapped_branch_first(long x) {
    return orig_branch_first(x) + 3000;
}

static long wrapped_far_branch(long x) {
    return orig_far_branch(x) + 4000;
}

static void patch_branching(long (*fn)(long), const char *end, long (*w)(long),
                            long (**orig)(long), long zero, long nonzero, long added) {
    long (*volatile call)(long) = fn;
    cr_assert_eq(call(0), zero);
    cr_assert_eq(call(5), nonzero);
    const void *at = code((void (*)(void))fn);
    uintptr_t wa;
    memcpy(&wa, &w, sizeof wa);
    const char *why = hp_patch_entry((void *)at, size_of(at, end), wa, orig);
    cr_assert_null(why, "%s", why);
    cr_expect_eq(call(0), zero + added, "the entry jumps to the wrapper");
    cr_expect_eq(call(5), nonzero + added);
    cr_expect_eq((*orig)(0), zero, "the moved branch taken (or not) as before");
    cr_expect_eq((*orig)(5), nonzero);
}

Test(patch, a_conditional_branch_among_the_first_instructions_is_moved) {
    patch_branching(branch_first, branch_first_end, wrapped_branch_first, &orig_branch_first, 0,
                    1, 3000);
}

Test(patch, a_far_conditional_branch_with_a_bnd_prefix_is_moved) {
    patch_branching(far_branch, far_branch_end, wrapped_far_branch, &orig_far_branch, 3, 7,
                    4000);
}

Test(patch, a_jrcxz_among_the_first_instructions_is_refused) {
    const void *fn = code((void (*)(void))rcx_first);
    const char *why = hp_patch_check(fn, size_of(fn, rcx_first_end));
    cr_assert_not_null(why);
    cr_expect(strstr(why, "conditional branch"), "%s", why);
    long (*volatile call)(long) = rcx_first;
    cr_expect_eq(call(0), 0);
    cr_expect_eq(call(5), 1);
}

Test(patch, a_jump_back_into_the_patched_bytes_is_refused) {
    const void *fn = code((void (*)(void))loop_back);
    const char *why = hp_patch_check(fn, size_of(fn, loop_back_end));
    cr_assert_not_null(why);
    cr_expect(strstr(why, "lands in the bytes the patch would overwrite"), "%s", why);
    int (*volatile call)(int) = loop_back;
    cr_expect_eq(call(7), 7, "the refused function still runs");
}

Test(patch, a_function_shorter_than_a_jump_is_refused) {
    const void *fn = code(tiny);
    cr_assert_not_null(hp_patch_check(fn, size_of(fn, tiny_end)));
}

static int n_notified;

static void notified(void) {
    n_notified++;
}

static uintptr_t notified_addr(void) {
    void (*f)(void) = notified;
    uintptr_t a;
    memcpy(&a, &f, sizeof a);
    return a;
}

Test(patch, an_empty_function_is_made_to_call_the_target) {
    void (*volatile a)(void) = empty_ret, (*volatile b)(void) = empty_endbr;
    a();
    b();
    cr_assert_eq(n_notified, 0);
    const char *why = hp_patch_empty((void *)code(empty_ret), notified_addr());
    cr_assert_null(why, "%s", why);
    why = hp_patch_empty((void *)code(empty_endbr), notified_addr());
    cr_assert_null(why, "%s", why);
    a();
    cr_expect_eq(n_notified, 1, "the empty function jumps to the target, which returns");
    b();
    cr_expect_eq(n_notified, 2);
}

Test(patch, the_padding_glibc_and_compilers_write_behind_an_empty_function_is_recognised) {
    void (*volatile a)(void) = empty_glibc, (*volatile b)(void) = empty_int3;
    const char *why = hp_patch_empty((void *)code(empty_glibc), notified_addr());
    cr_assert_null(why, "%s", why);
    why = hp_patch_empty((void *)code(empty_int3), notified_addr());
    cr_assert_null(why, "%s", why);
    a();
    b();
    cr_expect_eq(n_notified, 2);
    cr_expect_str_eq(hp_patch_empty((void *)code(ret_then_hint), notified_addr()),
                     "what follows its return is not padding");
}

Test(patch, a_function_that_does_something_is_not_taken_for_empty) {
    cr_expect_str_eq(hp_patch_empty((void *)code(ret_then_code), notified_addr()),
                     "what follows its return is not padding");
    // (where rip_load sits decides whether its load ends before the next 16-byte boundary:
    // then "it does something", else its bytes there do not decode; refused either way)
    cr_expect_not_null(hp_patch_empty((void *)code((void (*)(void))rip_load), notified_addr()));
    long (*volatile call)(long) = rip_load;
    cr_expect_eq(call(2), 42, "a refused function is left as it was");
}

Test(patch, allocator_record_round_trips_and_truncation_fails) {
    uint8_t buf[128], *p = buf;
    const char *fam = "jemalloc", *detail = "malloc in /bin/x: a call among its first instructions";
    *p++ = HPT_REC_ALLOCATOR;
    p = hpt_put_varint(p, HPT_ALLOC_UNHOOKED);
    p = hpt_put_varint(p, strlen(fam));
    memcpy(p, fam, strlen(fam));
    p += strlen(fam);
    p = hpt_put_varint(p, strlen(detail));
    memcpy(p, detail, strlen(detail));
    p += strlen(detail);
    hpt_dstate_t st = {0};
    hpt_rec_t r;
    memset(&r, 0, sizeof r);
    cr_assert_eq(hpt_rec_decode(buf, p, &st, &r), p);
    cr_expect_eq(r.tag, HPT_REC_ALLOCATOR);
    cr_expect_eq(r.counters[0], HPT_ALLOC_UNHOOKED);
    cr_expect_eq(r.str_len, strlen(fam));
    cr_expect_eq(memcmp(r.str, fam, r.str_len), 0);
    cr_expect_eq(r.str2_len, strlen(detail));
    cr_expect_eq(memcmp(r.str2, detail, r.str2_len), 0);
    for (const uint8_t *cut = buf; cut < p; cut++)
        cr_expect_null(hpt_rec_decode(buf, cut, &st, &r), "truncated at %zu", (size_t)(cut - buf));
}
