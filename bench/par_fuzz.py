#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/par_fuzz.py: do the analyzer's threads agree with its one thread on damaged traces?

Differential fuzzing of the parallel decode and replay (issue #18): each input is a seed trace
with a few random mutations (bytes flipped, set, inserted or deleted inside chunk payloads or
headers, a cut), after which every chunk's crc32 is recomputed where its framing still holds,
so that most mutations get past the checksum into the record decoder and on to replay. Every
command below runs twice on the same input, once on one thread (HEAPPROF_DECODE_THREADS=0,
HEAPPROF_REPLAY_THREADS=0) and once on many (decode workers, replay threads with tiny rounds so
that every trace makes many of them, a thread that is slow), and the two runs must agree byte
for byte: stdout, stderr and the exit status. A crash (a signal), a hang (the timeout) or a
disagreement is a finding: its input is kept in OUT/ with the commands that show it.

Not a test (random, and minutes long); deterministic for a given --seed. The fixed unit and e2e
tests cover what it finds, once found.

Usage: bench/par_fuzz.py [--bin build/analyzer/heapprof] [--seed N] [--iters N]
                         [--out DIR] [--corpus tests/fuzz/corpus] [--timeout S]
                         [--only report,view,...]
"""
import argparse
import os
import random
import shlex
import struct
import subprocess
import sys
import zlib

FILE_HDR = 56
CHUNK_HDR = 56
MAGIC = b"HPCK"


def fix_crcs(d: bytearray) -> None:
    """Recomputes the crc32 of every chunk whose header and payload lie inside d (as the
    reader's resync walks: chunk by chunk where the framing holds, byte by byte where not)."""
    i = min(FILE_HDR, len(d))
    n = len(d)
    while n - i >= CHUNK_HDR:
        if d[i:i + 4] != MAGIC:
            i += 1
            continue
        stored = struct.unpack_from("<I", d, i + 12)[0]
        if stored > n - i - CHUNK_HDR:
            i += 1
            continue
        hdr = bytearray(d[i:i + CHUNK_HDR])
        hdr[48:52] = b"\0\0\0\0"
        crc = zlib.crc32(bytes(hdr))
        crc = zlib.crc32(bytes(d[i + CHUNK_HDR:i + CHUNK_HDR + stored]), crc)
        struct.pack_into("<I", d, i + 48, crc & 0xffffffff)
        i += CHUNK_HDR + stored


def chunk_spans(d: bytes):
    """(start, header end, payload end) of each chunk the framing finds."""
    out = []
    i = FILE_HDR
    while len(d) - i >= CHUNK_HDR and d[i:i + 4] == MAGIC:
        stored = struct.unpack_from("<I", d, i + 12)[0]
        if stored > len(d) - i - CHUNK_HDR:
            break
        out.append((i, i + CHUNK_HDR, i + CHUNK_HDR + stored))
        i += CHUNK_HDR + stored
    return out


def mutate(seed: bytes, rng: random.Random) -> bytes:
    d = bytearray(seed)
    spans = chunk_spans(seed)
    for _ in range(rng.choice([1, 1, 2, 3, 5])):
        if not d:
            break
        what = rng.random()
        # a place: mostly inside a payload (records), sometimes a header field
        if spans and rng.random() < 0.85:
            s, h, e = rng.choice(spans)
            if rng.random() < 0.8 and e > h:
                pos = rng.randrange(h, e)
            else:
                pos = rng.randrange(s + 8, h)  # past magic/type: the length, counts, bases
        else:
            pos = rng.randrange(len(d))
        pos = min(pos, len(d) - 1)
        if what < 0.45:
            d[pos] ^= 1 << rng.randrange(8)
        elif what < 0.70:
            d[pos] = rng.choice([0, 1, 2, 0x7f, 0x80, 0xff, rng.randrange(256)])
        elif what < 0.80:
            d[pos:pos] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 4)))
        elif what < 0.90:
            del d[pos:pos + rng.randrange(1, 4)]
        else:
            del d[pos:]
    if rng.random() < 0.9:
        fix_crcs(d)
    return bytes(d)


COMMANDS = [
    ["report"],
    ["report", "--json"],
    ["report", "--top", "3", "--short-ms", "0"],
    ["dhat"],
    ["stats"],
    ["stats", "--json"],
    ["flame", "--folded", "--metric", "peak"],
    ["flame", "--folded", "--metric", "leaked"],
    ["flame", "--folded", "--metric", "temporary"],
    ["flame", "--folded", "--metric", "growth"],
    ["massif"],
    ["view", "-o", "-"],
    ["pprof", "-o", "-"],
    ["pprof", "--at", "peak", "-o", "-"],
    ["diff", "{SEED}"],  # the seed before, the input after
    ["diff", "{SEED}", "--metric", "blocks", "--folded"],
]

ONE = {"HEAPPROF_DECODE_THREADS": "0", "HEAPPROF_REPLAY_THREADS": "0"}


def many(rng: random.Random):
    env = {
        "HEAPPROF_DECODE_THREADS": str(rng.choice([1, 2, 4])),
        "HEAPPROF_DECODE_SLOTS": str(rng.choice([1, 2, 8, 64])),
        "HEAPPROF_REPLAY_THREADS": str(rng.choice([2, 4, 8])),
        "HEAPPROF_REPLAY_ROUND": str(rng.choice([1, 3, 17, 100, 1000])),
        "HEAPPROF_REPLAY_DEPTH": str(rng.choice([2, 3, 4, 8])),
    }
    if rng.random() < 0.3:
        env["HEAPPROF_REPLAY_SHARDS"] = str(rng.choice([2, 4]))
    if rng.random() < 0.2:
        env["HEAPPROF_TEST_REPLAY_SLOW"] = "1"
    return env


def argv_of(binary, cmd, path, seed_path):
    argv = [binary] + [seed_path if a == "{SEED}" else a for a in cmd]
    # the trace where a command takes it: right after the command's name (diff: after BEFORE)
    argv.insert(3 if cmd[0] == "diff" else 2, path)
    return argv


def run(argv, env_extra, timeout):
    env = {"PATH": "/usr/bin:/bin", "LC_ALL": "C", "TZ": "UTC"}
    env.update({k: v for k, v in os.environ.items() if k.endswith("SAN_OPTIONS")})
    env.update(env_extra)
    try:
        p = subprocess.run(argv, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                           timeout=timeout)
        return p.returncode, p.stdout, p.stderr
    except subprocess.TimeoutExpired:
        return "timeout", b"", b""


def main():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default=os.path.join(root, "build/analyzer/heapprof"))
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--iters", type=int, default=200)
    ap.add_argument("--out", default="/tmp/par_fuzz")
    ap.add_argument("--corpus", default=os.path.join(root, "tests/fuzz/corpus"))
    ap.add_argument("--timeout", type=float, default=60)
    ap.add_argument("--only", default="", help="commands to run, e.g. view,massif")
    a = ap.parse_args()
    commands = [c for c in COMMANDS if not a.only or c[0] in a.only.split(",")]
    if not commands:
        ap.error(f"no command among {a.only}")
    rng = random.Random(a.seed)
    seeds = []
    for name in sorted(os.listdir(a.corpus)):
        with open(os.path.join(a.corpus, name), "rb") as f:
            b = f.read()
        if len(b) > FILE_HDR and b[:8] == b"HEAPPROF":
            seeds.append((name, b))
    os.makedirs(a.out, exist_ok=True)
    findings = 0
    for it in range(a.iters):
        name, seed = rng.choice(seeds)
        data = mutate(seed, rng)
        path = os.path.join(a.out, "cur.hpt")
        with open(path, "wb") as f:
            f.write(data)
        seed_path = os.path.join(a.corpus, name)
        cmd = rng.choice(commands)
        env = many(rng)
        argv = argv_of(a.bin, cmd, path, seed_path)
        r1 = run(argv, ONE, a.timeout)
        r2 = run(argv, env, a.timeout)
        bad = []
        for tag, r in (("one", r1), ("many", r2)):
            if r[0] == "timeout":
                bad.append(f"{tag}: timeout")
            elif r[0] < 0 or r[0] >= 128:
                bad.append(f"{tag}: signal/status {r[0]}")
            elif b"Sanitizer" in r[2] or b"runtime error:" in r[2]:
                bad.append(f"{tag}: a sanitizer's report (status {r[0]})")
        if not bad and r1 != r2:
            which = [k for k, x, y in zip(("status", "stdout", "stderr"), r1, r2) if x != y]
            bad.append("differ in " + ",".join(which))
        if bad:
            findings += 1
            keep = os.path.join(a.out, f"find-{a.seed}-{it}.hpt")
            os.rename(path, keep)
            shown = shlex.join(argv_of(a.bin, cmd, keep, seed_path))
            ones = " ".join(f"{k}={v}" for k, v in ONE.items())
            envs = " ".join(f"{k}={v}" for k, v in env.items())
            print(f"[{it}] {name}: {'; '.join(bad)}\n    one:  {ones} {shown}\n"
                  f"    many: {envs} {shown}", flush=True)
        elif it % 50 == 49:
            print(f"[{it + 1}] ok so far ({findings} findings)", flush=True)
    print(f"par_fuzz: {a.iters} inputs, {findings} findings")
    return 1 if findings else 0


if __name__ == "__main__":
    sys.exit(main())
