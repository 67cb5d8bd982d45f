// SPDX-License-Identifier: MIT
// vector_map: everyday C++ container churn for DHAT-agreement tests: std::vector<int> grown by
// push_back without reserve, std::unordered_map<std::string, int> word counting with rehash
// growth, and std::string building by append and concatenation. Fully deterministic (an LCG, no
// clock, no addresses in the output); prints a checksum so two runs can be compared.
// Exact block counts depend on the standard library's growth policy; see vector_map.expect.

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace {

constexpr int kVectors = 3000;       // vectors of sizes 1..700
constexpr int kBigVectors = 3;       // plus three of 50000, 100000, 150000 elements
constexpr int kVocabulary = 5000;    // distinct words drawn (some collide)
constexpr int kTextWords = 200000;   // words in the generated text
constexpr int kNumbers = 20000;      // numbers appended to one CSV string
constexpr int kConcatStrings = 2000; // strings built by operator+

struct Lcg {
    uint64_t state;
    uint32_t next() {
        state = state * 6364136223846793005ULL + 1442695040888963407ULL;
        return static_cast<uint32_t>(state >> 33);
    }
};

uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 1099511628211ULL; }

uint64_t grow_vectors() {
    uint64_t h = 14695981039346656037ULL;
    std::vector<std::vector<int>> all; // grows too: holds every vector until the end
    for (int i = 0; i < kVectors; i++) {
        std::vector<int> v;
        int n = (i * 7919) % 700 + 1;
        for (int k = 0; k < n; k++)
            v.push_back(k ^ i);
        all.push_back(std::move(v));
    }
    for (int b = 1; b <= kBigVectors; b++) {
        std::vector<int> v;
        for (int k = 0; k < 50000 * b; k++)
            v.push_back(k * b);
        all.push_back(std::move(v));
    }
    for (const auto &v : all) {
        h = mix(h, v.size());
        h = mix(h, static_cast<uint64_t>(v.back()));
    }
    return h;
}

std::string make_word(Lcg &rng) {
    // Lengths 3..20: words over 15 bytes exceed libstdc++'s small-string buffer and allocate.
    size_t len = 3 + rng.next() % 18;
    std::string w;
    for (size_t i = 0; i < len; i++)
        w += static_cast<char>('a' + rng.next() % 26);
    return w;
}

uint64_t count_words(size_t *n_distinct) {
    Lcg rng{42};
    std::vector<std::string> vocabulary;
    for (int i = 0; i < kVocabulary; i++)
        vocabulary.push_back(make_word(rng));

    std::unordered_map<std::string, int> counts; // no reserve: rehash growth is the point
    for (int i = 0; i < kTextWords; i++) {
        // min of two draws skews the text towards the front of the vocabulary, like real text.
        uint32_t a = rng.next() % kVocabulary, b = rng.next() % kVocabulary;
        std::string word = vocabulary[std::min(a, b)];
        ++counts[word];
    }
    *n_distinct = counts.size();

    std::vector<std::pair<std::string, int>> top(counts.begin(), counts.end());
    std::partial_sort(top.begin(), top.begin() + 5, top.end(), [](const auto &x, const auto &y) {
        return x.second != y.second ? x.second > y.second : x.first < y.first;
    });
    uint64_t h = 14695981039346656037ULL;
    for (int i = 0; i < 5; i++) {
        std::printf("top%d %s %d\n", i + 1, top[i].first.c_str(), top[i].second);
        h = mix(h, static_cast<uint64_t>(top[i].second));
    }
    for (const auto &kv : counts)
        h += mix(kv.first.size(), static_cast<uint64_t>(kv.second)); // order-independent
    return h;
}

uint64_t build_strings() {
    std::string csv; // grows by repeated append
    for (int i = 0; i < kNumbers; i++) {
        csv += std::to_string(i * 31);
        csv += ',';
    }
    uint64_t h = mix(14695981039346656037ULL, csv.size());
    for (int i = 0; i < kConcatStrings; i++) {
        std::string s = "item-" + std::to_string(i) + "-of-" + std::to_string(kConcatStrings) +
                        " with a suffix long enough to leave the small buffer";
        h = mix(h, s.size());
    }
    return h;
}

} // namespace

int main() {
    uint64_t h = grow_vectors();
    size_t n_distinct = 0;
    h = mix(h, count_words(&n_distinct));
    h = mix(h, build_strings());
    std::printf("distinct_words %zu\n", n_distinct);
    std::printf("checksum %016llx\n", static_cast<unsigned long long>(h));
    return 0;
}
