// SPDX-License-Identifier: MIT
// A C++ program linked with libtcmalloc.a: operator new and delete, malloc and free are
// tcmalloc's, in the executable itself (test_static_alloc.c). It counts what `workload` asks
// and prints the counts, the exact figures the trace must hold.
#include <cstdio>
#include <cstdlib>
#include <malloc.h> // valloc, pvalloc
#include <new>
#include <vector>

static long allocs, frees;
static long page_bytes; // asked of valloc and pvalloc

// the compiler may drop an allocation it can see is unused: this one is used
static void keep(const void *p) {
    __asm__ volatile("" : : "r"(p) : "memory");
}

struct Node {
    long v[4];
};

__attribute__((noinline)) static long nodes(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        Node *p = new Node{{i, i, i, i}};
        sum += p->v[3];
        keep(p);
        delete p;
    }
    allocs += n;
    frees += n;
    return sum;
}

__attribute__((noinline)) static long arrays(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        int *a = new int[64]();
        sum += a[i % 64];
        keep(a);
        delete[] a;
    }
    allocs += n;
    frees += n;
    return sum;
}

__attribute__((noinline)) static size_t grown(int n) {
    std::vector<int> v; // each new capacity is a new block from operator new
    size_t cap = 0;
    for (int i = 0; i < n; i++) {
        v.push_back(i);
        if (v.capacity() != cap) {
            cap = v.capacity();
            allocs++;
            frees += cap > 1; // the old buffer (none before the first)
        }
    }
    frees++; // the last buffer, when v goes
    return v.size();
}

// C++17's aligned new and delete: a type aligned past what plain new gives
struct alignas(64) Line {
    long v[8];
};

__attribute__((noinline)) static long aligned(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        Line *l = new Line{{i}};
        Line *a = new Line[3]();
        sum += l->v[0] + a[2].v[7];
        keep(l);
        keep(a);
        delete l;
        delete[] a;
    }
    allocs += 2 * n;
    frees += 2 * n;
    return sum;
}

// the nothrow forms, plain and aligned
__attribute__((noinline)) static long nothrow(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        Node *p = new (std::nothrow) Node{{i, 0, 0, 0}};
        int *a = new (std::nothrow) int[16]();
        Line *l = new (std::nothrow) Line{{i}};
        Line *la = new (std::nothrow) Line[2]();
        if (!p || !a || !l || !la)
            std::abort();
        sum += p->v[0] + a[3] + l->v[0] + la[1].v[0];
        keep(p);
        keep(a);
        keep(l);
        keep(la);
        delete p;
        delete[] a;
        delete l;
        delete[] la;
    }
    allocs += 4 * n;
    frees += 4 * n;
    return sum;
}

__attribute__((noinline)) static long c_blocks(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char *p = static_cast<char *>(std::malloc(100));
        p[0] = static_cast<char>(i);
        sum += p[0];
        keep(p);
        std::free(p);
    }
    allocs += n;
    frees += n;
    return sum;
}

// valloc, and pvalloc where the allocator defines it (HP_HAS_PVALLOC: jemalloc does not, and
// glibc's would hand out a block jemalloc's free cannot take): page-aligned, as PartitionAlloc
// (Chromium), tcmalloc and mimalloc export them
__attribute__((noinline)) static long page_blocks(int n) {
    long sum = 0;
    for (int i = 0; i < n; i++) {
        char *p = static_cast<char *>(valloc(100));
        page_bytes += 100;
        p[0] = static_cast<char>(i);
        sum += p[0];
        keep(p);
        std::free(p);
#ifdef HP_HAS_PVALLOC
        char *q = static_cast<char *>(pvalloc(5000));
        page_bytes += 5000;
        q[0] = static_cast<char>(i);
        sum += q[0];
        keep(q);
        std::free(q);
        allocs++;
        frees++;
#endif
    }
    allocs += n;
    frees += n;
    return sum;
}

__attribute__((noinline)) static long workload() {
    return nodes(1000) + arrays(100) + static_cast<long>(grown(1000)) + aligned(300) +
           nothrow(200) + c_blocks(200) + page_blocks(50);
}

int main() {
    long r = workload();
    std::printf("allocs=%ld reallocs=0 frees=%ld result=%ld page_bytes=%ld\n", allocs, frees, r,
                page_bytes);
    return 0;
}
