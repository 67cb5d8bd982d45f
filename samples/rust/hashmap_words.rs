// SPDX-License-Identifier: MIT
// hashmap_words: word counting with HashMap<String, usize> over a generated text, plus HashSets,
// built by CMake with rustc -C opt-level=3 -g and no frame pointers. Exercises hashbrown table
// growth (no with_capacity), one String per token (dropped again when the word is already
// counted) and a sort of the results. Deterministic: the text comes from an LCG; the HashMap's
// random hash seed changes iteration order between runs but neither the counts printed (sorted)
// nor the number of allocations (no removals, so growth depends only on the item count).

use std::collections::{HashMap, HashSet};

const N_WORDS: usize = 100_000;
const SYLLABLES: [&str; 32] = [
    "ka", "to", "ri", "ne", "mu", "sa", "lo", "vi", "de", "pa", "zu", "fe", "go", "hi", "ja", "bo",
    "ce", "ly", "qu", "wa", "xe", "yo", "th", "st", "ar", "en", "or", "il", "um", "ex", "on", "ba",
];

struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (self.0 >> 33) as u32
    }
}

/// A word of 1-4 syllables; low-numbered syllables are likelier, so the counts are skewed.
fn next_word(rng: &mut Lcg) -> String {
    let n = 1 + (rng.next() % 4) as usize;
    let mut w = String::new();
    for _ in 0..n {
        let a = rng.next() as usize % SYLLABLES.len();
        let b = rng.next() as usize % SYLLABLES.len();
        w.push_str(SYLLABLES[a.min(b)]);
    }
    w
}

fn main() {
    let mut rng = Lcg(2024);
    let mut counts: HashMap<String, usize> = HashMap::new();
    let mut long_words: HashSet<String> = HashSet::new();
    let mut bigrams: HashSet<(u64, u64)> = HashSet::new();
    let mut prev_len = 0u64;
    for _ in 0..N_WORDS {
        let word = next_word(&mut rng);
        let len = word.len() as u64;
        bigrams.insert((prev_len, len * 1000 + word.as_bytes()[0] as u64));
        prev_len = len;
        if word.len() >= 7 && !long_words.contains(&word) {
            long_words.insert(word.clone());
        }
        *counts.entry(word).or_insert(0) += 1;
    }

    let mut top: Vec<(&String, &usize)> = counts.iter().collect();
    top.sort_by(|x, y| y.1.cmp(x.1).then_with(|| x.0.cmp(y.0)));
    for (word, n) in top.iter().take(10) {
        println!("{} {}", word, n);
    }
    let mut h = 14695981039346656037u64;
    for (word, n) in &top {
        h = (h ^ (word.len() as u64 * 131 + **n as u64)).wrapping_mul(1099511628211);
    }
    println!(
        "distinct {} long {} bigrams {} checksum {:016x}",
        counts.len(),
        long_words.len(),
        bigrams.len(),
        h
    );
}
