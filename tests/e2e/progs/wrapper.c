// SPDX-License-Identifier: MIT
// An xmalloc-style wrapper, as sqlite3Malloc, jv_mem_alloc or git's xmalloc, from three
// functions that allocate 10, 20 and 30 blocks of 100, 200 and 300 bytes: the report names
// those sites by the three functions, found to be past a wrapper from the machine code alone
// (stripped too), or with --alloc-fn xmalloc. make_node is no wrapper but a real site called
// from two places (push_evens: 4 blocks of 16 bytes, push_odds: 5): it fills the block it
// allocates. leak_me leaks one block of 777 bytes, stdio its buffer.
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

// One block never freed, from a function of the program's own (test_report.c: --suppress).
__attribute__((noinline)) void leak_me(void) { sink[63] = malloc(777); }

int main(void) {
    leak_me();
    load_alpha();
    load_beta();
    load_gamma();
    for (int i = 0; i < 60; i++)
        free(sink[i]);
    for (struct node *n = push_odds(push_evens(NULL)), *next; n; n = next) {
        next = n->next;
        free(n);
    }
    puts("wrapper done");
    return 0;
}
