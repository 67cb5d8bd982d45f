// SPDX-License-Identifier: MIT
// Alternate signal stacks lent to threads that arm their own CPU-time timer (altstack.h).
#include "altstack.h"

#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <unistd.h>

// What our handler adds to the kernel's frame on a stack: on_signal, the walk and its rule
// lookups take under 1 KiB (gcc -fstack-usage); a signal of the program's that we forward runs
// the program's handler there too, hence the room of our own stacks.
#define HANDLER_ROOM 2048u
#define OWN_ROOM (32u * 1024u)

// Threads that hold one of our stacks at once. Each stack is two mappings (a guard page below
// it, so that an overflow faults instead of writing into the next stack); the cap keeps what we
// take of the process's mapping count (vm.max_map_count, 65,530 by default) small. Past it a
// thread is not lent one (it is then armed by the sampling thread's listing, as before).
#define POOL_MAX 4096u

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static void *made[POOL_MAX]; // every stack mapped, lent or free (the fork child's list)
static void *free_stacks[POOL_MAX];
static unsigned n_made, n_free;
static size_t frame_bytes, stack_bytes, guard_bytes; // set once (sizes_once)
static pthread_once_t sizes_once = PTHREAD_ONCE_INIT;

// The kernel's signal frame on this CPU (its vector state: ~1.8 KiB with AVX2, ~3.5 KiB with
// AVX-512), as glibc reports it from the kernel's AT_MINSIGSTKSZ.
static void sizes(void) {
    long frame = sysconf(_SC_MINSIGSTKSZ);
    long page = sysconf(_SC_PAGESIZE);
    frame_bytes = frame > 0 ? (size_t)frame : 4096u; // an AVX-512 frame, where glibc cannot say
    guard_bytes = page > 0 ? (size_t)page : 4096u;
    size_t want = frame_bytes + OWN_ROOM;
    stack_bytes = (want + guard_bytes - 1) / guard_bytes * guard_bytes;
}

// A stack of stack_bytes above a guard page; its base (the lowest usable byte) or NULL.
static void *map_stack(void) {
    char *p = mmap(NULL, guard_bytes + stack_bytes, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
    if (p == MAP_FAILED)
        return NULL;
    if (mprotect(p, guard_bytes, PROT_NONE) != 0) {
        munmap(p, guard_bytes + stack_bytes);
        return NULL;
    }
    return p + guard_bytes;
}

static void *take(void) {
    void *s = NULL;
    pthread_mutex_lock(&lock);
    if (n_free) {
        s = free_stacks[--n_free];
    } else if (n_made < POOL_MAX && (s = map_stack()) != NULL) {
        made[n_made++] = s;
    }
    pthread_mutex_unlock(&lock);
    return s;
}

bool hp_altstack_lend(void **lent) {
    *lent = NULL;
    stack_t cur;
    if (sigaltstack(NULL, &cur) != 0 || pthread_once(&sizes_once, sizes) != 0)
        return false;
    if (!(cur.ss_flags & SS_DISABLE))
        return cur.ss_size >= frame_bytes + HANDLER_ROOM; // the program's: ours would replace it
    void *s = take();
    if (!s)
        return false;
    stack_t ss = {.ss_sp = s, .ss_size = stack_bytes, .ss_flags = 0};
    if (sigaltstack(&ss, NULL) != 0) {
        hp_altstack_give_back(s);
        return false;
    }
    *lent = s;
    return true;
}

void hp_altstack_give_back(void *stack) {
    if (!stack)
        return;
    pthread_mutex_lock(&lock);
    if (n_free < POOL_MAX)
        free_stacks[n_free++] = stack;
    pthread_mutex_unlock(&lock);
}

void hp_altstack_unlend(void *lent) {
    if (!lent)
        return;
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && cur.ss_sp == lent && !(cur.ss_flags & SS_DISABLE)) {
        stack_t off = {.ss_sp = NULL, .ss_size = 0, .ss_flags = SS_DISABLE};
        if (sigaltstack(&off, NULL) != 0)
            return; // still in use (a handler of ours on it? never here): kept out of the pool
    }
    hp_altstack_give_back(lent);
}

unsigned hp_altstack_lent(void) {
    pthread_mutex_lock(&lock);
    unsigned n = n_made - n_free;
    pthread_mutex_unlock(&lock);
    return n;
}

unsigned hp_altstack_mapped(void) {
    pthread_mutex_lock(&lock);
    unsigned n = n_made;
    pthread_mutex_unlock(&lock);
    return n;
}

void hp_altstack_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER; // the holder may be a thread the child lacks
    lock = fresh;
    stack_t cur;
    void *mine = NULL;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE))
        mine = cur.ss_sp; // the kernel copied the forking thread's setting: that one stays lent
    n_free = 0;
    for (unsigned i = 0; i < n_made; i++)
        if (made[i] != mine)
            free_stacks[n_free++] = made[i];
}
