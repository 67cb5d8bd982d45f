#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Include cycles among the modules of one source directory (issue 19): a module is a file's
# basename without .c/.h (x.c and x.h are one module), and A -> B when A.c or A.h has
# `#include "...B.h"`, resolved from the including file's directory, then from DIR (the include
# path the build gives it). System includes (<...>) and quoted ones that resolve to nothing under
# DIR are ignored. Prints every elementary cycle as `a -> b -> a` and exits 1 if there is any;
# otherwise prints one line and exits 0. Exit 2 on bad usage.
#
# With --layers R1,R2,... (subdirectories of DIR, lowest first) it also checks that a file
# includes only headers of its own room or a lower one, and prints each include that points up
# as `room/file -> room/header`; files outside the listed rooms are an error too.
#
#   python3 tests/check_include_cycles.py preload
#   python3 tests/check_include_cycles.py analyzer --layers core,trace,symbols,model,analyze,out,cmd
import os
import re
import sys

INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
BLOCK_COMMENT = re.compile(r"/\*.*?\*/", re.S)
SOURCE_EXTS = (".c", ".h")


def module_of(path):
    return os.path.splitext(os.path.basename(path))[0]


def source_files(root):
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            if name.endswith(SOURCE_EXTS):
                yield os.path.join(dirpath, name)


def inside(path, root):
    return os.path.commonpath([path, root]) == root


def resolve(target, including_dir, root):
    for base in (including_dir, root):
        cand = os.path.realpath(os.path.join(base, target))
        if inside(cand, root) and os.path.isfile(cand):
            return cand
    return None


def layer_violations(root, layers):
    """Includes that point from a room to a higher one, and files in no listed room."""
    rank = {name: i for i, name in enumerate(layers)}
    bad = []
    for path in source_files(root):
        rel = os.path.relpath(path, root)
        room = rel.split(os.sep)[0] if os.sep in rel else None
        if room not in rank:
            bad.append("%s is in no room of --layers" % rel)
            continue
        with open(path, encoding="utf-8", errors="replace") as f:
            text = BLOCK_COMMENT.sub("", f.read())
        for target in INCLUDE.findall(text):
            dep = resolve(target, os.path.dirname(path), root)
            if dep is None:
                continue
            drel = os.path.relpath(dep, root)
            droom = drel.split(os.sep)[0] if os.sep in drel else None
            if droom in rank and rank[droom] > rank[room]:
                bad.append("%s -> %s" % (rel, drel))
    return bad


def build_graph(root):
    """Returns ({module: set(modules it includes)}, [warnings])."""
    graph = {}
    homes = {}  # module -> directories its files are in, to warn about basename clashes
    warnings = []
    for path in source_files(root):
        mod = module_of(path)
        graph.setdefault(mod, set())
        homes.setdefault(mod, set()).add(os.path.dirname(path))
        with open(path, encoding="utf-8", errors="replace") as f:
            text = BLOCK_COMMENT.sub("", f.read())
        for target in INCLUDE.findall(text):
            dep = resolve(target, os.path.dirname(path), root)
            if dep is None:
                continue
            dmod = module_of(dep)
            if dmod != mod:
                graph[mod].add(dmod)
    for mod, dirs in sorted(homes.items()):
        if len(dirs) > 1:
            warnings.append("module %s has files in %d directories (%s): they count as one"
                            % (mod, len(dirs), ", ".join(sorted(os.path.relpath(d, root)
                                                                 for d in dirs))))
    for deps in list(graph.values()):
        for d in deps:
            graph.setdefault(d, set())
    return graph, warnings


def strongly_connected(graph):
    """Tarjan's algorithm, iterative. Returns a list of components (lists of modules)."""
    index, low, on_stack, stack, comps = {}, {}, set(), [], []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, it = work[-1]
            advanced = False
            for nxt in it:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph[nxt]))))
                    advanced = True
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            if advanced:
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    m = stack.pop()
                    on_stack.discard(m)
                    comp.append(m)
                    if m == node:
                        break
                comps.append(comp)
    return comps


def elementary_cycles(graph):
    """Every elementary cycle once, each starting at its smallest module (by name): for each
    module s in name order, the simple paths back to s through modules greater than s in the
    same strongly connected component (Johnson's decomposition, searched depth-first)."""
    cycles = []
    comp_of = {}
    for i, comp in enumerate(strongly_connected(graph)):
        for m in comp:
            comp_of[m] = i
    for s in sorted(graph):
        allowed = {m for m in graph if comp_of[m] == comp_of[s] and m > s}
        if not allowed and s not in graph[s]:
            continue
        path = [s]
        on_path = {s}
        work = [iter(sorted(graph[s]))]
        while work:
            advanced = False
            for nxt in work[-1]:
                if nxt == s:
                    cycles.append(path + [s])
                elif nxt in allowed and nxt not in on_path:
                    path.append(nxt)
                    on_path.add(nxt)
                    work.append(iter(sorted(graph[nxt])))
                    advanced = True
                    break
            if not advanced:
                work.pop()
                on_path.discard(path.pop())
    return cycles


def main(argv):
    layers = None
    if len(argv) == 4 and argv[2] == "--layers":
        layers = [x for x in argv[3].split(",") if x]
        argv = argv[:2]
    if len(argv) != 2 or argv[1] in ("-h", "--help") or layers == []:
        sys.stderr.write("usage: check_include_cycles.py DIR [--layers ROOM,ROOM,...]\n")
        return 2
    root = os.path.realpath(argv[1])
    if not os.path.isdir(root):
        sys.stderr.write("check_include_cycles.py: %s is not a directory\n" % argv[1])
        return 2
    graph, warnings = build_graph(root)
    for w in warnings:
        sys.stderr.write("check_include_cycles.py: warning: %s\n" % w)
    cycles = elementary_cycles(graph)
    for c in sorted(cycles, key=lambda c: (len(c), c)):
        print(" -> ".join(c))
    if layers:
        bad = layer_violations(root, layers)
        for b in bad:
            print(b)
        if bad:
            print("%d include%s against the layers %s in %s"
                  % (len(bad), "" if len(bad) == 1 else "s", " < ".join(layers), argv[1]))
            return 1
    if cycles:
        print("%d include cycle%s among %d modules in %s"
              % (len(cycles), "" if len(cycles) == 1 else "s", len(graph), argv[1]))
        return 1
    print("no include cycles among %d modules in %s%s"
          % (len(graph), argv[1], "; every include keeps to the layers " + " < ".join(layers)
             if layers else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
