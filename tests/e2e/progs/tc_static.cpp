// SPDX-License-Identifier: MIT
// A C++ program linked with libtcmalloc.a: operator new and delete, malloc and free are
// tcmalloc's, in the executable itself (test_static_alloc.c). It counts what `workload` asks
// and prints the counts, the exact figures the trace must hold.
#include <cstdio>
#include <cstdlib>
#include <vector>

static long allocs, frees;

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

__attribute__((noinline)) static long workload() {
    return nodes(1000) + arrays(100) + static_cast<long>(grown(1000)) + c_blocks(200);
}

int main() {
    long r = workload();
    std::printf("allocs=%ld reallocs=0 frees=%ld result=%ld\n", allocs, frees, r);
    return 0;
}
