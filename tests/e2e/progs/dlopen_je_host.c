// SPDX-License-Identifier: MIT
// dlopen_je_host PLUGIN: loads the plugin (je_plugin.c, jemalloc linked into it) after start,
// then calls its allocating function from two threads that start at once. Prints the counts
// the calls ask of the plugin's allocator (test_static_alloc.c): the trace must hold exactly
// these, hooked when the plugin was loaded.
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#define PER_THREAD 5000

static void (*churn)(int n);
static pthread_barrier_t go;

__attribute__((noinline)) static void *plugin_thread(void *arg) {
    (void)arg;
    pthread_barrier_wait(&go);
    churn(PER_THREAD);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 2)
        return 2;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fprintf(stderr, "dlopen: %s\n", dlerror());
        return 1;
    }
    *(void **)&churn = dlsym(h, "je_plugin_churn"); // POSIX: a function pointer's bits
    if (!churn)
        return 1;
    pthread_t t[2];
    pthread_barrier_init(&go, NULL, 2);
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, plugin_thread, NULL);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    long n = 2L * PER_THREAD;
    // each round: mallocx (a block), rallocx (a new block, DHAT's counting), sdallocx
    printf("allocs=%ld reallocs=%ld frees=%ld bytes=%ld\n", n, n, n, n * (64 + 128));
    return 0;
}
