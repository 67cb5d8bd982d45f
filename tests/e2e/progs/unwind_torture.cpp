// SPDX-License-Identifier: MIT
// Stacks that change under the unwinder's reuse of the previous walk: deep recursion (past the
// frame limit), longjmp out of a recursion, C++ exceptions unwinding through frames whose
// destructors allocate, frames rebuilt at the same depth by different callers, and threads.
// Run with HEAPPROF_UNWIND=check: every stack is compared with an uncached libunwind walk.
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static void *volatile sink;
static thread_local std::jmp_buf jump;

__attribute__((noinline)) static void touch(size_t n) {
    void *p = std::malloc(n);
    sink = p;
    std::free(p);
}

__attribute__((noinline)) static int deep(int depth, int limit) {
    touch(16 + depth % 64);
    if (depth == limit)
        return depth;
    int r = deep(depth + 1, limit) + 1;
    touch(32);
    return r;
}

__attribute__((noinline)) static void jump_from(int depth) {
    touch(24);
    if (depth > 0)
        jump_from(depth - 1);
    else
        std::longjmp(jump, 1);
    touch(1); // not reached: the innermost call jumps out
}

// setjmp in a frame of its own, so the caller's locals are not live across the jump
__attribute__((noinline)) static void jump_round(int depth) {
    if (setjmp(jump) == 0)
        jump_from(depth);
}

struct Noisy {
    std::string s;
    ~Noisy() {
        // allocates while an exception unwinds through this frame
        std::string t = s + " unwound";
        sink = &t;
        touch(t.size());
    }
};

__attribute__((noinline)) static void throw_from(int depth) {
    Noisy n{std::string(40, 'x')};
    touch(48);
    if (depth == 0)
        throw std::runtime_error("deep failure with a long message to allocate");
    throw_from(depth - 1);
}

// Two callers reach the same allocation at the same stack depth: the walk joins, the tail differs.
__attribute__((noinline)) static void leaf() {
    touch(64);
}
__attribute__((noinline)) static void caller_a() {
    leaf();
    asm volatile("" ::: "memory");
}
__attribute__((noinline)) static void caller_b() {
    leaf();
    asm volatile("" ::: "memory");
}

static void work(unsigned seed) {
    for (int round = 0; round < 200; round++) {
        deep(0, 20 + (round * 7 + seed) % 150); // up to 170 frames: past every frame limit
        jump_round(5 + round % 30);
        touch(80); // right after the longjmp: the old log describes frames that are gone
        try {
            throw_from(3 + round % 20);
        } catch (const std::exception &e) {
            touch(std::string(e.what()).size());
        }
        (round & 1) ? caller_a() : caller_b();
        std::vector<int> v;
        for (int i = 0; i < 100; i++)
            v.push_back(i);
        sink = v.data();
    }
}

int main() {
    std::vector<std::thread> threads;
    for (unsigned t = 0; t < 4; t++)
        threads.emplace_back(work, t);
    work(99);
    for (auto &t : threads)
        t.join();
    std::puts("ok");
    return 0;
}
