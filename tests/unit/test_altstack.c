// SPDX-License-Identifier: MIT
// The alternate signal stacks the shim lends to threads under the CPU-time timer
// (preload/altstack.c): lent only where a thread has none, never over a program's own, reused
// once given back, and where a handler installed with SA_ONSTACK really runs. Each case runs in
// a thread of its own whose alternate stack it sets first (a sanitizer may have given every
// thread one).
#include "altstack.h"

#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

// The least size sigaltstack takes: the signal frame's (AT_MINSIGSTKSZ), at least the
// kernel's fixed 2,048 bytes.
static size_t kernel_min(void) {
    long frame = sysconf(_SC_MINSIGSTKSZ);
    return frame > 2048 ? (size_t)frame : 2048u;
}

static void no_alt_stack(void) {
    stack_t off = {.ss_flags = SS_DISABLE};
    cr_assert_eq(sigaltstack(&off, NULL), 0);
}

static void in_thread(void *(*fn)(void *), void *arg) {
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, fn, arg), 0);
    cr_assert_eq(pthread_join(t, NULL), 0);
}

static volatile uintptr_t handler_local;

static void on_usr1(int s) {
    (void)s;
    volatile char here = 0;
    handler_local = (uintptr_t)&here;
}

typedef struct lent_case {
    void *lent;
    size_t size;
    uintptr_t handler_at;
} lent_case_t;

static void *lend_and_signal(void *arg) {
    lent_case_t *c = arg;
    no_alt_stack();
    cr_assert(hp_altstack_lend(&c->lent));
    cr_assert_not_null(c->lent);
    stack_t cur;
    cr_assert_eq(sigaltstack(NULL, &cur), 0);
    cr_assert_eq(cur.ss_sp, c->lent);
    c->size = cur.ss_size;
    memset(c->lent, 0x5a, c->size); // all of it ours to write
    struct sigaction sa = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigemptyset(&sa.sa_mask);
    cr_assert_eq(sigaction(SIGUSR1, &sa, NULL), 0);
    cr_assert_eq(pthread_kill(pthread_self(), SIGUSR1), 0);
    c->handler_at = handler_local;
    hp_altstack_unlend(c->lent);
    cr_assert_eq(sigaltstack(NULL, &cur), 0);
    cr_expect(cur.ss_flags & SS_DISABLE, "unlend leaves the thread without it");
    return NULL;
}

Test(altstack, a_thread_without_one_is_lent_one_and_handlers_run_there) {
    lent_case_t c = {0};
    in_thread(lend_and_signal, &c);
    cr_expect_geq(c.size, 32 * 1024);
    cr_expect(c.handler_at >= (uintptr_t)c.lent && c.handler_at < (uintptr_t)c.lent + c.size,
              "the SA_ONSTACK handler ran at %#lx, the stack is %p + %zu",
              (unsigned long)c.handler_at, c.lent, c.size);
    cr_expect_eq(hp_altstack_lent(), 0);
}

typedef struct own_case {
    size_t size;
    bool ok;
    void *lent;
    bool kept;
} own_case_t;

static void *lend_over_own(void *arg) {
    own_case_t *c = arg;
    stack_t ss = {.ss_sp = malloc(c->size), .ss_size = c->size};
    cr_assert_not_null(ss.ss_sp);
    cr_assert_eq(sigaltstack(&ss, NULL), 0);
    c->ok = hp_altstack_lend(&c->lent);
    stack_t cur;
    cr_assert_eq(sigaltstack(NULL, &cur), 0);
    c->kept = cur.ss_sp == ss.ss_sp && cur.ss_size == c->size && !(cur.ss_flags & SS_DISABLE);
    no_alt_stack();
    free(ss.ss_sp);
    return NULL;
}

Test(altstack, a_programs_own_stack_is_kept_and_used_only_if_large_enough) {
    own_case_t big = {.size = 64 * 1024}, small = {.size = kernel_min()};
    in_thread(lend_over_own, &big);
    cr_expect(big.ok, "a 64 KiB stack of the program's is enough for our handler");
    cr_expect_null(big.lent);
    cr_expect(big.kept);
    in_thread(lend_over_own, &small);
    cr_expect_not(small.ok, "a stack of the kernel's minimum is too small for the frame and our handler");
    cr_expect_null(small.lent);
    cr_expect(small.kept);
    cr_expect_eq(hp_altstack_mapped(), 0, "nothing mapped for threads that have their own");
}

static void *lend_keep(void *arg) {
    no_alt_stack();
    cr_assert(hp_altstack_lend((void **)arg));
    return NULL; // the thread ends with it installed, as a timer thread does
}

Test(altstack, stacks_given_back_are_lent_again) {
    void *a = NULL, *b = NULL, *c = NULL;
    in_thread(lend_keep, &a);
    in_thread(lend_keep, &b);
    cr_expect_neq(a, b, "two threads' stacks, the first not given back yet");
    cr_expect_eq(hp_altstack_lent(), 2);
    hp_altstack_give_back(a); // its thread is gone: the sampling thread's listing says so
    in_thread(lend_keep, &c);
    cr_expect_eq(c, a);
    cr_expect_eq(hp_altstack_mapped(), 2);
    cr_expect_eq(hp_altstack_lent(), 2);
}

static void *lend_then_fork(void *arg) {
    (void)arg;
    void *mine = NULL, *other = NULL;
    in_thread(lend_keep, &other); // lent to a thread the child will not have
    no_alt_stack();
    cr_assert(hp_altstack_lend(&mine));
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        hp_altstack_fork_child();
        // the forking thread's stays lent (the child runs on it); the other thread's is free
        _exit(hp_altstack_lent() == 1 && hp_altstack_mapped() == 2 ? 0 : 1);
    }
    int st = 0;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_expect(WIFEXITED(st) && WEXITSTATUS(st) == 0, "the fork child's pool");
    hp_altstack_unlend(mine);
    return NULL;
}

Test(altstack, a_fork_child_frees_the_stacks_of_threads_it_lacks) {
    in_thread(lend_then_fork, NULL);
}
