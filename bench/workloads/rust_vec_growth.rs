// SPDX-License-Identifier: MIT
// rust_vec_growth: parse a generated log and collect tokens into Vecs and
// Strings grown by push / format! without with_capacity -- the growth pattern
// a heap profiler should point at.  std only; build with `rustc -O`.
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

const LEVELS: [&str; 4] = ["INFO", "WARN", "DEBUG", "ERROR"];
const MODULES: [&str; 8] = ["net", "db", "auth", "cache", "http", "sched", "io", "gc"];
const ACTIONS: [&str; 6] = ["login", "query", "fetch", "store", "evict", "retry"];

#[inline(never)]
fn generate_log(lines: usize, rng: &mut Rng) -> String {
    let mut text = String::new();
    for i in 0..lines {
        let r = rng.next();
        let line = format!(
            "2024-03-{:02}T{:02}:{:02}:{:02} {} [{}] user={} action={} latency={}ms path=/api/v{}/{}/{}\n",
            1 + (r % 28),
            (r >> 5) % 24,
            (r >> 10) % 60,
            (r >> 16) % 60,
            LEVELS[((r >> 22) % 4) as usize],
            MODULES[((r >> 24) % 8) as usize],
            (r >> 27) % 100_000,
            ACTIONS[((r >> 44) % 6) as usize],
            (r >> 47) % 2000,
            1 + (r >> 58) % 3,
            MODULES[(i % 8) as usize],
            (r >> 32) % 997
        );
        text.push_str(&line);
    }
    text
}

struct Record {
    tokens: Vec<String>,
    fields: Vec<(String, String)>,
    path_parts: Vec<String>,
}

#[inline(never)]
fn parse_line(line: &str) -> Record {
    let mut tokens = Vec::new();
    let mut fields = Vec::new();
    let mut path_parts = Vec::new();
    for tok in line.split_whitespace() {
        tokens.push(tok.to_string());
        if let Some((k, v)) = tok.split_once('=') {
            fields.push((k.to_string(), v.to_string()));
            if k == "path" {
                for part in v.split('/').filter(|p| !p.is_empty()) {
                    path_parts.push(part.to_string());
                }
            }
        }
    }
    Record { tokens, fields, path_parts }
}

#[inline(never)]
fn summarize(records: &[Record]) -> (Vec<String>, Vec<Vec<u32>>) {
    let mut summaries = Vec::new();
    let mut latencies: Vec<Vec<u32>> = Vec::new();
    for _ in 0..MODULES.len() {
        latencies.push(Vec::new());
    }
    for rec in records {
        let module = rec.tokens.get(2).map(|s| s.trim_matches(|c| c == '[' || c == ']')).unwrap_or("");
        let idx = MODULES.iter().position(|m| *m == module).unwrap_or(0);
        let mut lat = 0u32;
        let mut user = String::new();
        for (k, v) in &rec.fields {
            if k == "latency" {
                lat = v.trim_end_matches("ms").parse().unwrap_or(0);
            } else if k == "user" {
                user = v.clone();
            }
        }
        latencies[idx].push(lat);
        summaries.push(format!("{}:{}:{}:{}", module, user, lat, rec.path_parts.join("/")));
    }
    (summaries, latencies)
}

fn main() {
    let lines: usize = env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(120_000);
    let mut rng = Rng(0x9E3779B97F4A7C15);
    let mut checksum: u64 = 0;
    // Several passes so the process does real work without one giant text.
    for _pass in 0..3 {
        let text = generate_log(lines, &mut rng);
        let mut records = Vec::new();
        for line in text.lines() {
            records.push(parse_line(line));
        }
        let (summaries, latencies) = summarize(&records);
        for s in &summaries {
            checksum = checksum.wrapping_mul(31).wrapping_add(s.len() as u64);
        }
        for (i, l) in latencies.iter().enumerate() {
            let sum: u64 = l.iter().map(|&x| x as u64).sum();
            checksum ^= sum.rotate_left(i as u32);
        }
        checksum = checksum.wrapping_add(records.iter().map(|r| r.tokens.len() as u64).sum::<u64>());
    }
    println!("rust_vec_growth lines={} checksum={}", lines, checksum);
}
