# SPDX-License-Identifier: MIT
# Sums over a callgrind output file, for the bench scripts that count instructions
# (hot_instr.sh, analyzer_instr.sh); sourced, not run.

# Total Ir of callgrind file $1; with $2, the total of that event instead (DLmr, DLmw: a run with
# --cache-sim=yes).
cg_totals() {
    awk -v ev="${2:-Ir}" '/^events:/ {for (i = 2; i <= NF; i++) if ($i == ev) c = i}
        /^totals:/ {print (c ? $c : 0) + 0}' "$1"
}

# Ir of the entries of callgrind file $1 that match pattern $2, summed, from callgrind_annotate's
# listing ($3: yes for inclusive, no for self; $4: the event, Ir unless named). Inclusive: match the entries that name the
# function's object (callgrind_annotate also lists the code inlined into a function once per
# source file it comes from, without the object; the object's entry holds it). Self: any line,
# inlined parts included. Run from /: from inside the source tree callgrind_annotate shortens
# paths and lists a function's parts apart.
cg_sum() {
    (cd / && callgrind_annotate --inclusive="$3" --threshold=100 --show="${4:-Ir}" \
        --sort="${4:-Ir}" "$1" 2>/dev/null) |
        awk -v pat="$2" '/file:function/ {f = 1; next} f && /^-- Auto/ {exit}
            f && $0 ~ pat {v = $1; gsub(",", "", v); s += v} END {print s + 0}'
}
