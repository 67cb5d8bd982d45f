#!/usr/bin/env bash
# Installs what heapprof needs to build, test and benchmark on Debian 12 (run as root).
# Idempotent: skips apt when every package is already there.
set -euo pipefail
pkgs=(build-essential cmake pkg-config clang libunwind-dev libzstd-dev zlib1g-dev libdeflate-dev libjansson-dev
      libcriterion-dev libyaml-dev libdw-dev libelf-dev libiberty-dev valgrind heaptrack hyperfine rustc
      libxml2-utils libncurses-dev tmux
      libcapstone-dev libjemalloc-dev libmimalloc-dev libgoogle-perftools-dev
      libprotobuf-c-dev protobuf-c-compiler golang-go
      sqlite3 python3 git chromium)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# rustc may come from rustup instead of Debian; either is fine
if command -v rustc >/dev/null 2>&1; then
  missing=("${missing[@]/rustc}")
fi
# the DHAT viewer check (shared/tools/dhat-view-check) runs on Node.js and installs its one npm
# package on first use; machines come with Node.js and npm, Debian's packages are the fallback
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  missing+=(nodejs npm)
fi
missing=($(printf '%s\n' "${missing[@]}" | grep . || true))
if [ ${#missing[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "heapprof: missing packages (${missing[*]}); run as root or install them" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" </dev/null
fi
# the viewer's browser tests (tests/browser) drive the system Chromium with playwright-core; npm ci
# only when the lockfile changed since the last install (never downloads a browser)
browser_dir="$(cd "$(dirname "$0")/.." && pwd)/tests/browser"
if command -v npm >/dev/null 2>&1 &&
   ! cmp -s "$browser_dir/package-lock.json" "$browser_dir/node_modules/.heapprof-lock"; then
  (cd "$browser_dir" && PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 npm ci --no-audit --no-fund \
     --loglevel=error </dev/null &&
   cp package-lock.json node_modules/.heapprof-lock)
fi
