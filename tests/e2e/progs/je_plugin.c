// SPDX-License-Identifier: MIT
// A plugin with jemalloc linked into it (libjemalloc_pic.a, its symbols kept local by
// --exclude-libs): its mallocx, rallocx and sdallocx are nobody's imports, so LD_PRELOAD never
// sees them. heapprof must find and hook them when the plugin is dlopen'd (test_static_alloc.c).
#include <stddef.h>

void *mallocx(size_t size, int flags);
void *rallocx(void *ptr, size_t size, int flags);
void sdallocx(void *ptr, size_t size, int flags);
void je_plugin_churn(int n); // what the host looks up with dlsym

// The constructor allocates 10 blocks of 32 bytes and keeps them: it runs inside dlopen, after
// the shim hooked the plugin's allocator (before relocation), so they are in the trace.
static void *kept[10];

__attribute__((constructor, noinline)) static void je_plugin_init(void) {
    for (int i = 0; i < 10; i++)
        kept[i] = mallocx(32, 0);
    __asm__ volatile("" : : "r"(kept) : "memory");
}

// n blocks of 64 bytes, each grown to 128 by rallocx and freed by sdallocx naming its size.
__attribute__((visibility("default"), noinline)) void je_plugin_churn(int n) {
    for (int i = 0; i < n; i++) {
        void *p = mallocx(64, 0);
        __asm__ volatile("" : : "r"(p) : "memory");
        p = rallocx(p, 128, 0);
        __asm__ volatile("" : : "r"(p) : "memory");
        sdallocx(p, 128, 0);
    }
}
