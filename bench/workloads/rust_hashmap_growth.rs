// SPDX-License-Identifier: MIT
// rust_hashmap_growth: word and bigram counting over generated text with
// HashMap / HashSet grown by insertion without reserve.  std only; `rustc -O`.
// Iteration order of std HashMap is randomised per process, so the checksum
// only uses order-independent folds.
use std::collections::{HashMap, HashSet};
use std::env;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }
}

#[inline(never)]
fn make_vocab(rng: &mut Rng, n: usize) -> Vec<String> {
    let mut v = Vec::new();
    for _ in 0..n {
        let len = 3 + (rng.next() % 9) as usize;
        let mut w = String::new();
        for _ in 0..len {
            w.push((b'a' + (rng.next() % 26) as u8) as char);
        }
        v.push(w);
    }
    v
}

#[inline(never)]
fn make_text(rng: &mut Rng, vocab: &[String], words: usize) -> String {
    let mut t = String::new();
    for i in 0..words {
        // Zipf-ish: small indices much more common.
        let r = rng.next();
        let idx = ((r % vocab.len() as u64) * (r >> 40 & 0xff) / 256) as usize;
        t.push_str(&vocab[idx]);
        t.push(if i % 17 == 16 { '\n' } else { ' ' });
    }
    t
}

#[inline(never)]
fn count_chunk(chunk: &str) -> (HashMap<String, u32>, HashSet<(String, String)>) {
    let mut counts = HashMap::new();
    let mut bigrams = HashSet::new();
    let mut prev: Option<&str> = None;
    for w in chunk.split_whitespace() {
        *counts.entry(w.to_string()).or_insert(0u32) += 1;
        if let Some(p) = prev {
            bigrams.insert((p.to_string(), w.to_string()));
        }
        prev = Some(w);
    }
    (counts, bigrams)
}

fn main() {
    let words: usize = env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(1_500_000);
    let mut rng = Rng(0xDEADBEEFCAFEF00D);
    let vocab = make_vocab(&mut rng, 20_000);
    let text = make_text(&mut rng, &vocab, words);
    let mut global: HashMap<String, u64> = HashMap::new();
    let mut checksum: u64 = 0;
    // Per-chunk maps (each grows from empty), merged into a global map.
    let lines: Vec<&str> = text.lines().collect();
    for chunk in lines.chunks(200) {
        let joined = chunk.join("\n");
        let (counts, bigrams) = count_chunk(&joined);
        checksum = checksum.wrapping_add(bigrams.len() as u64);
        for (w, c) in counts {
            *global.entry(w).or_insert(0) += c as u64;
        }
    }
    let distinct: HashSet<&String> = global.keys().collect();
    let total: u64 = global.values().sum();
    let lensum: u64 = global.keys().map(|k| k.len() as u64).sum();
    checksum = checksum.wrapping_mul(1_000_003).wrapping_add(total).wrapping_add(lensum << 20) ^ distinct.len() as u64;
    println!("rust_hashmap_growth words={} distinct={} checksum={}", words, distinct.len(), checksum);
}
