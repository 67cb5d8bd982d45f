// SPDX-License-Identifier: MIT
// Per-thread blocks (thread.h): mapped from mem.c, never the host's malloc; a free list, so a
// program that keeps creating threads reuses the blocks of those that exited. And the start of
// the shim's own threads.
#include "thread.h"

#include "debug.h"
#include "mem.h"

#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

HP_TLS hp_thread_t *hp_tls_thread;

static pthread_mutex_t free_lock = PTHREAD_MUTEX_INITIALIZER;
static hp_thread_t *free_list;

hp_thread_t *hp_thread_attach(void) {
    hp_thread_t *t = hp_tls_thread;
    if (t)
        return t;
    pthread_mutex_lock(&free_lock);
    t = free_list;
    if (t)
        free_list = t->next_free;
    HP_ASSERT(!t || t != free_list); // a block given back twice would serve two threads
    pthread_mutex_unlock(&free_lock);
    if (t)
        memset(t, 0, sizeof *t); // another thread's walk logs name its stack, maybe unmapped now
    else
        t = hp_mem_map(sizeof *t); // zeroed
    // the unwinder's part is aligned to 64 (unwind_cfi.c); mem.c maps whole pages
    HP_ASSERT(((uintptr_t)t & 63) == 0);
    hp_tls_thread = t;
    return t;
}

void hp_thread_detach(void) {
    hp_thread_t *t = hp_tls_thread;
    if (!t)
        return;
    hp_tls_thread = NULL;
    pthread_mutex_lock(&free_lock);
    HP_ASSERT(t != free_list);
    t->next_free = free_list;
    free_list = t;
    pthread_mutex_unlock(&free_lock);
}

void hp_thread_reset(void) {
    if (hp_tls_thread)
        memset(hp_tls_thread, 0, sizeof *hp_tls_thread);
}

void hp_thread_fork_child(void) {
    pthread_mutex_t fresh = PTHREAD_MUTEX_INITIALIZER;
    free_lock = fresh;
}

int hp_thread_spawn(pthread_t *t, void *(*fn)(void *)) {
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int rc = pthread_create(t, NULL, fn, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    return rc;
}

long hp_thread_kernel_count(void) {
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    if (n <= 0)
        return -1;
    buf[n] = 0;
    // the command name, field 2, may hold spaces and parentheses: count from its last ')'
    char *p = strrchr(buf, ')');
    for (int field = 2; p && field < 20; field++)
        p = strchr(p + 1, ' ');
    return p ? strtol(p + 1, NULL, 10) : -1;
}
