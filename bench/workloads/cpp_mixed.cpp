// SPDX-License-Identifier: MIT
// cpp_mixed: std::vector growth, std::unordered_map, std::string building and
// shared_ptr graphs -- typical C++ allocation traffic.
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

static uint64_t rng = 0x0123456789ABCDEFull;
static inline uint64_t next() { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return rng; }

struct Node {
    int id;
    std::string name;
    std::vector<std::shared_ptr<Node>> children;
};

__attribute__((noinline)) static uint64_t grow_vectors(int n)
{
    uint64_t s = 0;
    for (int i = 0; i < n; i++) {
        std::vector<int> v;                       // no reserve
        int len = 16 + (int)(next() % 600);
        for (int k = 0; k < len; k++) v.push_back(k ^ (int)i);
        s += v.size() + (uint64_t)v.back();
    }
    return s;
}

__attribute__((noinline)) static uint64_t build_strings_and_map(int n)
{
    std::unordered_map<std::string, int> m;       // no reserve
    uint64_t s = 0;
    for (int i = 0; i < n; i++) {
        std::string key = "key_";
        key += std::to_string(next() % 50000);
        key += "_suffix_that_defeats_sso";
        m[key] += 1;
        if ((i & 1023) == 0) { s += m.size(); }
    }
    for (auto &kv : m) s += (uint64_t)kv.second * kv.first.size();
    return s;
}

__attribute__((noinline)) static std::shared_ptr<Node> build_tree(int depth, int &counter)
{
    auto n = std::make_shared<Node>();
    n->id = counter++;
    n->name = "node-" + std::to_string(n->id) + "-with-a-long-enough-name";
    if (depth > 0) {
        int kids = 1 + (int)(next() % 4);
        for (int k = 0; k < kids; k++) n->children.push_back(build_tree(depth - 1, counter));
    }
    return n;
}

static uint64_t walk(const std::shared_ptr<Node> &n)
{
    uint64_t s = (uint64_t)n->id + n->name.size();
    for (auto &c : n->children) s += walk(c);
    return s;
}

int main(int argc, char **argv)
{
    int scale = argc > 1 ? atoi(argv[1]) : 40;
    uint64_t s = 0;
    for (int r = 0; r < scale; r++) {
        s += grow_vectors(6000);
        s += build_strings_and_map(60000);
        int counter = 0;
        auto root = build_tree(7, counter);
        s += walk(root);
    }
    printf("cpp_mixed scale=%d checksum=%llu\n", scale, (unsigned long long)s);
    return 0;
}
