#!/usr/bin/env bash
# The one script for the GPU machine: builds ferry with CUDA (sm_90), runs the CUDA op harness,
# the unit tests, tiny models on CPU and CUDA, the transformers comparison and the benchmarks,
# in one call. Full logs go under $OUT (the device tool brings them back); a short table is
# printed last.
#
#   scripts/gpu_check.sh [STAGE...]     stages: build harness unit tiny compare bench peer
#                                        (default: build harness unit tiny)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
mkdir -p "$OUT"
build=${FERRY_BUILD_DIR:-build-gpu}
stages=("$@")
((${#stages[@]})) || stages=(build harness unit tiny)
declare -a table

# step NAME CMD...: runs CMD with its output in $OUT/NAME.log, records rc and seconds.
step() {
  local name=$1; shift
  local t0=$(date +%s.%N)
  "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  local dt=$(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')")
  table+=("$(printf '%-28s rc=%-3s %7ss  %s' "$name" "$rc" "$dt" "$(tail -n 1 "$OUT/$name.log" | cut -c1-90)")")
  return $rc
}

has() { local s; for s in "${stages[@]}"; do [ "$s" = "$1" ] && return 0; done; return 1; }

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv \
  >"$OUT/gpu.txt" 2>&1

if has build; then
  pybind_dir=$(python3 -m pybind11 --cmakedir 2>/dev/null || true)
  step configure cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 ${pybind_dir:+-Dpybind11_DIR=$pybind_dir}
  step build cmake --build "$build" -j "$(nproc)"
fi
if has harness && [ -x "$build/tests/ferry_cuda_tests" ]; then
  step cuda_harness "$build/tests/ferry_cuda_tests" --gtest_brief=1
fi
if has unit && [ -x "$build/tests/ferry_tests" ]; then
  step unit_tests "$build/tests/ferry_tests" --gtest_brief=1
fi
if has tiny; then
  mkdir -p "$OUT/models"
  for preset in qwen3-tiny alpamayo-tiny; do
    dir=/tmp/ferry-models/$preset
    [ -d "$dir" ] || "$build/ferry" synth --preset "$preset" --out "$dir" --seed 1 >/dev/null 2>&1
    for be in cpu cuda; do
      step "run_${preset}_$be" "$build/ferry" run --model "$dir" --backend "$be" --json
      cp "$OUT/run_${preset}_$be.log" "$OUT/models/" 2>/dev/null
    done
  done
fi
if has compare && [ -x scripts/compare_transformers.py ]; then
  step compare python3 scripts/compare_transformers.py --ferry "$build/ferry" --work /tmp/ferry-models
fi
if has bench; then
  for preset in qwen3-8b alpamayo-r1-10b; do
    dir=/tmp/ferry-models/$preset
    [ -d "$dir" ] || step "synth_$preset" "$build/ferry" synth --preset "$preset" --out "$dir" --seed 1
    step "bench_$preset" "$build/ferry" bench --model "$dir" --json
  done
fi
if has peer && [ -f bench/peer_transformers.py ]; then
  for preset in qwen3-8b alpamayo-r1-10b; do
    step "peer_$preset" python3 bench/peer_transformers.py --model /tmp/ferry-models/$preset --json
  done
fi

echo
echo "== gpu_check ($(head -2 "$OUT/gpu.txt" | tail -1))"
printf '%s\n' "${table[@]}"
