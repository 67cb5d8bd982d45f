#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
"""bench/process_start.py: what recording costs a short process, whole: loading the shim and
its libraries, starting the trace and its thread, the exit flush. What a build, a test suite or
a shell script pays per process under `heapprof run`. Each cell runs the program --runs times in
a row, plain, under each shim (--lib NAME=PATH, default the build's) and under heaptrack, in
--rounds rounds in a rotating order; prints, per program and tool, the wall ms a process
(median over rounds [min..max]), what the tool adds to the plain run, that as a share of what
heaptrack adds, and a process's peak RSS (wait4, in bench/workloads/run_many.c; under heaptrack
that is its script's, so it is not shown). heaptrack does not follow child processes: its
figure for the shell pipeline is the shell's alone, heapprof's all three processes'.

Usage: bench/process_start.py [--runs N] [--rounds R] [--lib NAME=PATH]... [--no-heaptrack]
                              [--heaptrack-runs N]
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PROGRAMS = [
    ("true", ["/bin/true"]),
    ("ls /usr/lib", ["/bin/ls", "/usr/lib"]),
    ("sh -c 'echo x | tr x y'", ["/bin/sh", "-c", "echo x | tr x y"]),
]


def cell(runner, argv, env, runs, out_dir):
    """Wall ms a process and the median peak RSS (KiB) over `runs` runs in a row."""
    r = subprocess.run([runner, str(runs)] + argv, env=env, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"process_start: {' '.join(argv)} failed: {r.stderr.strip()}")
    ns, rss = r.stdout.split()
    if out_dir:
        for f in os.listdir(out_dir):
            os.unlink(os.path.join(out_dir, f))
    return int(ns) / 1e6 / runs, int(rss)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=100, help="processes in a row per cell")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--lib", action="append", default=[], metavar="NAME=PATH")
    ap.add_argument("--no-heaptrack", action="store_true")
    ap.add_argument("--heaptrack-runs", type=int, default=10,
                    help="heaptrack takes ~0.5 s a process here: fewer runs per cell")
    a = ap.parse_args()
    libs = [tuple(s.split("=", 1)) for s in a.lib] or [
        ("heapprof", os.path.join(ROOT, "build/preload/libheapprof.so"))]
    for name, path in libs:
        if not os.path.exists(path):
            sys.exit(f"process_start: no shim at {path} (build first)")
    heaptrack = None if a.no_heaptrack else shutil.which("heaptrack")
    runner = os.path.join(ROOT, "bench/out/bin/run_many")
    os.makedirs(os.path.dirname(runner), exist_ok=True)
    subprocess.run(["gcc", "-O2", "-o", runner, os.path.join(ROOT, "bench/workloads/run_many.c")],
                   check=True)
    tmp = tempfile.mkdtemp(prefix="process_start.")
    base_env = {k: v for k, v in os.environ.items()
                if not k.startswith("HEAPPROF_") and k != "LD_PRELOAD"}
    tools = [("plain", None, base_env, a.runs)]
    for name, path in libs:
        env = dict(base_env, LD_PRELOAD=path, HEAPPROF_QUIET="1",
                   HEAPPROF_OUT=os.path.join(tmp, name, "t.%p.hpt"))
        os.makedirs(os.path.join(tmp, name))
        tools.append((name, os.path.join(tmp, name), env, a.runs))
    if heaptrack:
        os.makedirs(os.path.join(tmp, "heaptrack"))
        tools.append(("heaptrack", os.path.join(tmp, "heaptrack"), base_env, a.heaptrack_runs))
    results = {}  # (program, tool) -> [(ms, rss)]
    try:
        for r in range(a.rounds):
            order = tools[r % len(tools):] + tools[:r % len(tools)]
            for prog, argv in PROGRAMS:
                for name, out_dir, env, runs in order:
                    run_argv = argv
                    if name == "heaptrack":
                        run_argv = [heaptrack, "-o", os.path.join(out_dir, "h")] + argv
                    results.setdefault((prog, name), []).append(
                        cell(runner, run_argv, env, runs, out_dir))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"process start and exit, {a.rounds} rounds of {a.runs} processes a cell "
          f"(heaptrack {a.heaptrack_runs}); {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}")
    print(f"  {'program':26} {'tool':10} {'ms/process':>22} {'added ms':>9} {'/ht':>6} "
          f"{'peak RSS KiB':>12} {'added':>7}")
    for prog, _ in PROGRAMS:
        med = {}
        for name, *_ in tools:
            ms = [m for m, _ in results[(prog, name)]]
            med[name] = (statistics.median(ms), min(ms), max(ms),
                         statistics.median([k for _, k in results[(prog, name)]]))
        ht_added = med["heaptrack"][0] - med["plain"][0] if heaptrack else None
        for name, *_ in tools:
            m, lo, hi, rss = med[name]
            added = m - med["plain"][0]
            rel = f"{added / ht_added:6.3f}" if ht_added and name not in ("plain", "heaptrack") else "     -"
            rss_s = f"{rss:12.0f}" if name != "heaptrack" else f"{'n/a':>12}"
            rss_add = f"{rss - med['plain'][3]:7.0f}" if name not in ("plain", "heaptrack") else "      -"
            print(f"  {prog:26} {name:10} {m:8.2f} [{lo:6.2f}..{hi:6.2f}] "
                  f"{added if name != 'plain' else 0:9.2f} {rel} {rss_s} {rss_add}")


if __name__ == "__main__":
    main()
