// SPDX-License-Identifier: MIT
// An xmalloc-style wrapper, as sqlite3Malloc, jv_mem_alloc or git's xmalloc, from three
// functions that allocate 10, 20 and 30 blocks of 100, 200 and 300 bytes: the report names
// those sites by the three functions, found to be past a wrapper from the machine code alone
// (stripped too), or with --alloc-fn xmalloc. make_node is no wrapper but a real site called
// from two places (push_evens: 4 blocks of 16 bytes, push_odds: 5): it fills the block it
// allocates. counted_malloc and new_tracked both hand the block to bookkeeping (as sqlite3Malloc
// does): counted_malloc is a wrapper by the trace's evidence, four functions call it (count_a..d:
// 1, 2, 3 and 4 blocks of 24 bytes); new_tracked, called by two (track_a, track_b: 1 and 2
// blocks of 40 bytes), stays a site. new_config forwards like xmalloc but only read_config calls
// it (1 block of 48 bytes): one caller is no evidence of a wrapper, so it stays a site. leak_me
// leaks one block of 777 bytes, stdio its buffer.
#include <stdio.h>
#include <stdlib.h>

void *xmalloc(size_t n);
void load_alpha(void);
void load_beta(void);
void load_gamma(void);
void leak_me(void);

struct node {
    long key;
    struct node *next;
};
struct node *make_node(long key, struct node *next);
struct node *push_evens(struct node *list);
struct node *push_odds(struct node *list);
void account(void *p, size_t n);
void *counted_malloc(size_t n);
void *new_tracked(size_t n);
void count_a(void);
void count_b(void);
void count_c(void);
void count_d(void);
void track_a(void);
void track_b(void);
void *new_config(void);
void read_config(void);

__attribute__((noinline)) void *xmalloc(size_t n) {
    void *p = malloc(n);
    if (!p)
        abort();
    return p;
}

static void *volatile sink[64];

__attribute__((noinline)) void load_alpha(void) {
    for (int i = 0; i < 10; i++)
        sink[i] = xmalloc(100);
}

__attribute__((noinline)) void load_beta(void) {
    for (int i = 0; i < 20; i++)
        sink[10 + i] = xmalloc(200);
}

__attribute__((noinline)) void load_gamma(void) {
    for (int i = 0; i < 30; i++)
        sink[30 + i] = xmalloc(300);
}

__attribute__((noinline)) struct node *make_node(long key, struct node *next) {
    struct node *n = malloc(sizeof *n);
    if (!n)
        abort();
    n->key = key;
    n->next = next;
    return n;
}

__attribute__((noinline)) struct node *push_evens(struct node *list) {
    for (long i = 0; i < 4; i++)
        list = make_node(2 * i, list);
    return list;
}

__attribute__((noinline)) struct node *push_odds(struct node *list) {
    for (long i = 0; i < 5; i++)
        list = make_node(2 * i + 1, list);
    return list;
}

static void *volatile last_accounted;
static volatile size_t accounted_bytes;

// weak: its body may be replaced at link time, so gcc cannot assume which registers it keeps
// (-fipa-ra), as for a function in another library
__attribute__((noinline, weak)) void account(void *p, size_t n) {
    last_accounted = p;
    accounted_bytes += n;
}

__attribute__((noinline)) void *counted_malloc(size_t n) {
    void *p = malloc(n);
    if (p)
        account(p, n);
    return p;
}

__attribute__((noinline)) void *new_tracked(size_t n) {
    void *p = malloc(n);
    if (p)
        account(p, n);
    return p;
}

static void *volatile counted[16];

// k blocks from counted_malloc into counted[first..]
#define COUNT_FN(name, first, k)                                                                  \
    __attribute__((noinline)) void name(void) {                                                   \
        for (int i = 0; i < (k); i++)                                                             \
            counted[(first) + i] = counted_malloc(24);                                            \
    }
COUNT_FN(count_a, 0, 1)
COUNT_FN(count_b, 1, 2)
COUNT_FN(count_c, 3, 3)
COUNT_FN(count_d, 6, 4)

__attribute__((noinline)) void track_a(void) { counted[10] = new_tracked(40); }

__attribute__((noinline)) void track_b(void) {
    for (int i = 0; i < 2; i++)
        counted[11 + i] = new_tracked(40);
}

__attribute__((noinline)) void *new_config(void) {
    void *p = malloc(48);
    if (!p)
        abort();
    return p;
}

__attribute__((noinline)) void read_config(void) {
    void *c = new_config();
    __asm__ volatile("" ::"r"(c) : "memory"); // no tail call: read_config stays new_config's caller
    free(c);
}

// One block never freed, from a function of the program's own (test_report.c: --suppress).
__attribute__((noinline)) void leak_me(void) { sink[63] = malloc(777); }

int main(void) {
    leak_me();
    load_alpha();
    load_beta();
    load_gamma();
    for (int i = 0; i < 60; i++)
        free(sink[i]);
    count_a();
    count_b();
    count_c();
    count_d();
    track_a();
    track_b();
    read_config();
    for (int i = 0; i < 13; i++)
        free(counted[i]);
    for (struct node *n = push_odds(push_evens(NULL)), *next; n; n = next) {
        next = n->next;
        free(n);
    }
    puts("wrapper done");
    return 0;
}
