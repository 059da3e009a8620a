#!/usr/bin/env bash
# Configures and builds ferry into build/ (or $FERRY_BUILD_DIR). Extra arguments go to cmake.
# ccache is used when present (set-up installs it; the build works without).
# FERRY_BUILD_TARGETS (e.g. "ferry"): build only those targets; default: everything.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FERRY_BUILD_DIR:-build}
pybind_dir=$(python3 -m pybind11 --cmakedir 2>/dev/null || true)
args=(-S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=${FERRY_BUILD_TYPE:-Release})
[ -n "$pybind_dir" ] && args+=(-Dpybind11_DIR="$pybind_dir")
if command -v ccache >/dev/null 2>&1; then
  args+=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
fi
cmake "${args[@]}" "$@" >/dev/null
targets=()
for t in ${FERRY_BUILD_TARGETS:-}; do targets+=(--target "$t"); done
cmake --build "$build" -j "$(nproc)" "${targets[@]}"
