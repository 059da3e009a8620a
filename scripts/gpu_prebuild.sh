#!/usr/bin/env bash
# Builds the GPU binaries here (Release, CUDA sm_90) and puts them, with the shared libraries
# they need that a bare GPU machine may lack, into .gpu/ for the device tool to carry:
#   scripts/gpu_prebuild.sh && (device) FERRY_PREBUILT=.gpu scripts/gpu_check.sh STAGES...
# (and bench/experiments/*.sh STAGES..., which use the same stage mechanism)
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FERRY_BUILD_DIR:-build}
FERRY_BUILD_DIR="$build" scripts/build.sh -DFERRY_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=90 >/dev/null
rm -rf .gpu && mkdir -p .gpu/tests .gpu/lib .gpu/bench
cp "$build/ferry" .gpu/
cp "$build/tests/ferry_cuda_tests" "$build/tests/ferry_tests" .gpu/tests/
cp "$build/bench/ferry_context_memory" .gpu/
cp "$build/bench/ferry_exponent_decode_bench" .gpu/bench/  # where gpu_check finds it in a build
for lib in libpcre2-8.so.0 libutf8proc.so.2 libjpeg.so.62 libpng16.so.16; do
  # awk reads to the end: an early exit would stop ldconfig with SIGPIPE, fatal under pipefail
  path=$(ldconfig -p | awk -v l="$lib" '$1 == l && /x86-64/ && !found {print $NF; found = 1}')
  [ -n "$path" ] && cp -L "$path" .gpu/lib/
done
strip --strip-debug .gpu/ferry .gpu/tests/* 2>/dev/null || true
du -sh .gpu
