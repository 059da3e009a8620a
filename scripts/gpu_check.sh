#!/usr/bin/env bash
# The one script for the GPU machine: builds ferry with CUDA (sm_90), runs the CUDA op harness,
# the unit tests, tiny models on both backends, the comparisons with transformers, ferry bench
# and the transformers peer, in one call. Full logs go under $OUT (the device tool brings them
# back); a short table is printed last. Each step is time-boxed and independent of the others.
#
#   scripts/gpu_check.sh [STAGE...]   run in the order given; default, most important first:
#     build harness tiny bench_ar1 peer_ar1 compare_tiny compare_8b bench_8b peer_8b
#     compare_parts unit
#   and on request: ops_bench (the CUDA op micro-benchmarks, bench/cuda_ops_bench.cpp),
#   stream_tiny, stream_ar1, sanitize (demand layering: plans, budgets, races), peer_vram,
#   bytes_tiny, bytes_ar1 (byte paths: probe, registered/bounce/pageable, pack)
#
# Binaries built on the development machine can be carried instead of building here (device
# time): scripts/gpu_prebuild.sh puts them and the few shared libraries they need into .gpu/;
# FERRY_PREBUILT=.gpu makes every stage use them (carry .gpu).
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${OUT:-$PWD/out}
LOGS=${FERRY_GPU_LOGS:-/tmp/ferry-gpu-logs}  # many logs; $OUT gets them as one archive
mkdir -p "$OUT" "$LOGS"
build=${FERRY_BUILD_DIR:-build-gpu}
if [ -n "${FERRY_PREBUILT:-}" ]; then
  build=$FERRY_PREBUILT
  export LD_LIBRARY_PATH="$PWD/$FERRY_PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
fi
models=${FERRY_MODELS:-/tmp/ferry-models}
stages=("$@")
((${#stages[@]})) || stages=(build harness tiny bench_ar1 peer_ar1 compare_tiny compare_8b
  compare_ar1 bench_8b peer_8b compare_parts unit)
declare -a table
export PYTHONUNBUFFERED=1

# step NAME SECONDS CMD...: output in $LOGS/NAME.log; records rc, seconds, last line.
step() {
  local name=$1 limit=$2; shift 2
  local t0 rc dt
  t0=$(date +%s.%N)
  timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  dt=$(python3 -c "print(f'{$(date +%s.%N)-$t0:.1f}')")
  table+=("$(printf '%-26s rc=%-3s %6ss  %s' "$name" "$rc" "$dt" "$(tail -n 1 "$LOGS/$name.log" | cut -c1-100)")")
  # Kept current after every step, so a call cut short still brings back what ran.
  printf '%s\n' "${table[@]}" >"$OUT/summary.txt"
  tar czf "$OUT/logs.tgz" -C "$(dirname "$LOGS")" "$(basename "$LOGS")" 2>/dev/null
  return $rc
}
synth() {  # synth PRESET: once per machine
  [ -f "$models/$1/config.json" ] || "$build/ferry" synth --preset "$1" --out "$models/$1" --seed 1
}

nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv \
  >"$LOGS/gpu.txt" 2>&1
mkdir -p "$models"

stage_build() {
  if [ -n "${FERRY_PREBUILT:-}" ]; then
    step prebuilt 10 "$build/ferry" --help
    return
  fi
  step configure 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_PYTHON=OFF
  step build 400 cmake --build "$build" -j "$(nproc)" --target ferry ferry_tests ferry_cuda_tests \
    ferry_vision_dump ferry_expert_dump
}
stage_harness() { step cuda_harness 300 "$build/tests/ferry_cuda_tests"; }
stage_ops_bench() {
  step build_ops_bench 400 cmake --build "$build" -j "$(nproc)" --target ferry_cuda_bench
  step ops_bench 300 "$build/bench/ferry_cuda_bench"
}
stage_unit() { step unit_tests 300 "$build/tests/ferry_tests" --gtest_brief=1; }
stage_tiny() {  # the same tokens and hashes on the CPU and CUDA backends
  local preset be
  for preset in qwen3-tiny qwen3-vl-tiny alpamayo-tiny; do
    synth "$preset" >/dev/null 2>&1
    for be in cpu cuda; do
      step "run_${preset}_$be" 120 "$build/ferry" run --model "$models/$preset" --backend "$be" --json
    done
    step "run_${preset}_cuda_nographs" 120 "$build/ferry" run --model "$models/$preset" \
      --backend cuda --json --graphs off
    step "graphs_${preset}" 10 python3 - "$LOGS/run_${preset}_cuda.log" \
      "$LOGS/run_${preset}_cuda_nographs.log" <<'PY'
import json, sys
a, b = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
keys = [k for k in ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"] if k in a]
bad = [k for k in keys if a[k] != b[k]]
print("cuda graphs on vs off:", "identical" if not bad else "DIFFER in " + ",".join(bad))
sys.exit(1 if bad else 0)
PY
    step "same_${preset}" 10 python3 - "$LOGS/run_${preset}_cpu.log" "$LOGS/run_${preset}_cuda.log" <<'PY'
import json, sys
a, b = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
keys = ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"]
same = {k: a.get(k) == b.get(k) for k in keys if k in a}
print("cpu vs cuda:", " ".join(f"{k}={'same' if v else 'DIFFER'}" for k, v in same.items()),
      "| tokens", a["tokens"][:12])
sys.exit(0 if same.get("tokens") else 1)
PY
  done
}
stage_compare_tiny() {  # issue 3: transformers vs ferry's CPU backend
  step compare_qwen3-tiny 300 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-tiny" --backend cpu --tokens 8
  step compare_qwen3-vl-tiny 300 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-vl-tiny" --backend cpu --tokens 8
}
stage_compare_parts() {
  step compare_vision_tiny 300 python3 scripts/compare_vision_transformers.py --build "$build" --floor
  step compare_expert_tiny 300 python3 scripts/compare_expert_transformers.py --build "$build" --floor
}
stage_compare_8b() {  # issue 4: full size, CUDA backend
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step compare_qwen3-8b 400 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-8b" --backend cuda --prompt-tokens 1500 --tokens 21
}
stage_compare_ar1() {  # issue 4: Alpamayo-R1-10B's language model, full size, reference workload
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step compare_alpamayo-r1-10b 400 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/alpamayo-r1-10b" --backend cuda --images 16 --image-size 320x576 \
    --prompt-tokens 3007 --tokens 21
}
bench_one() {  # bench_one PRESET [SUFFIX ARGS...]
  local preset=$1 suffix=${2:-}
  shift; shift || true
  synth "$preset" >"$LOGS/synth_$preset.log" 2>&1
  step "bench_$preset$suffix" 400 "$build/ferry" bench --model "$models/$preset" --runs 3 --json "$@"
}
peer_one() {
  synth "$1" >/dev/null 2>&1
  step "peer_$1" 400 python3 bench/peer_transformers.py --model "$models/$1" --runs 3 --json
}
stage_bench_ar1() { bench_one alpamayo-r1-10b; }
profile_one() {  # every op timed alone (ungraphed): where each stage's time goes
  synth "$1" >/dev/null 2>&1
  step "profile_$1" 400 "$build/ferry" bench --model "$models/$1" --runs 1 --warmup 1 --profile \
    --profile-top 25
}
stage_profile_ar1() { profile_one alpamayo-r1-10b; }
stage_profile_8b() { profile_one qwen3-8b; }
stage_bench_ar1_nographs() { bench_one alpamayo-r1-10b _nographs --graphs off; }
stage_bench_8b_nographs() { bench_one qwen3-8b _nographs --graphs off; }
stage_peer_ar1() { peer_one alpamayo-r1-10b; }
stage_bench_8b() { bench_one qwen3-8b; }
stage_peer_8b() { peer_one qwen3-8b; }

# --- demand layering (issue 8) ---------------------------------------------------------------
# Device memory as nvidia-smi sees it, sampled every 20 ms while CMD runs: the outside check of
# a budget. Writes the peak (MiB, used minus what was used before) to $LOGS/NAME.smi.
watched() {  # watched NAME CMD...
  local name=$1; shift
  local base
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits | head -1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 >"$LOGS/$name.smi.raw" 2>/dev/null &
  local smi=$!
  "$@"
  local rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 -c "import sys; v=[int(x) for x in open('$LOGS/$name.smi.raw').read().split() if x.isdigit()]; print(max(v)-$base if v else -1)" >"$LOGS/$name.smi"
  return $rc
}
# same_as REF LOG: the outputs of two run --json logs are identical.
same_as() {
  python3 - "$1" "$2" <<'PY'
import json, sys
a, b = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:3])
keys = [k for k in ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"] if k in a]
bad = [k for k in keys if a.get(k) != b.get(k)]
peak = b.get("device_peak_bytes", {})
print("same as all-resident:", "yes" if not bad else "NO, differs in " + ",".join(bad),
      "| books", peak.get("ferry_books"), "driver", peak.get("outside"),
      "| streamed", b.get("streamed_bytes"), "| total", b["time_s"]["total"])
sys.exit(1 if bad else 0)
PY
}
stream_runs() {  # stream_runs PRESET BUDGET...: every budget and flag plan against all-resident
  local preset=$1; shift
  local m="$models/$preset" args=(--json --quiet)
  [ "$preset" = alpamayo-r1-10b ] && args+=(--images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)
  synth "$preset" >"$LOGS/synth_$preset.log" 2>&1
  step "resident_$preset" 300 "$build/ferry" run --model "$m" "${args[@]}"
  local v
  for v in "$@"; do
    step "vram_${preset}_$v" 300 watched "vram_${preset}_$v" "$build/ferry" run --model "$m" "${args[@]}" --vram "$v"
    step "same_${preset}_$v" 10 same_as "$LOGS/resident_$preset.log" "$LOGS/vram_${preset}_$v.log"
  done
  step "none_$preset" 300 "$build/ferry" run --model "$m" "${args[@]}" --resident none
  step "same_none_$preset" 10 same_as "$LOGS/resident_$preset.log" "$LOGS/none_$preset.log"
  step "seq_$preset" 300 "$build/ferry" run --model "$m" "${args[@]}" --resident none --mode sequential
  step "same_seq_$preset" 10 same_as "$LOGS/resident_$preset.log" "$LOGS/seq_$preset.log"
  step "count_$preset" 300 "$build/ferry" run --model "$m" "${args[@]}" --resident-count 3
  step "same_count_$preset" 10 same_as "$LOGS/resident_$preset.log" "$LOGS/count_$preset.log"
}
stage_stream_tiny() {
  stream_runs alpamayo-tiny 40MB 20MB
  stream_runs qwen3-tiny 30MB
}
stage_stream_ar1() { stream_runs alpamayo-r1-10b 15GiB 12GiB 8GiB 4GiB 2.5GiB; }
stage_sanitize() {  # compute-sanitizer on a tiny streamed run: no races between copy and compute
  local t
  for t in racecheck synccheck; do
    step "sanitize_$t" 300 compute-sanitizer --tool "$t" --error-exitcode 9 "$build/ferry" run \
      --model "$models/alpamayo-tiny" --json --quiet --resident none --tokens 2 --steps 1 --images 1
  done
}
bench_vram() {  # bench_vram PRESET BUDGET [MODE]
  local mode=${3:-pipelined}
  synth "$1" >/dev/null 2>&1
  step "bench_vram_$1_$2_$mode" 500 watched "bench_vram_$1_$2_$mode" "$build/ferry" bench \
    --model "$models/$1" --runs 3 --warmup 1 --json --quiet --vram "$2" --mode "$mode"
}
stage_bench_vram_ar1() {
  local v
  for v in 15GiB 12GiB 8GiB; do bench_vram alpamayo-r1-10b "$v"; done
  bench_vram alpamayo-r1-10b 15GiB sequential
}
stage_peer_vram() {  # transformers + Accelerate under the same caps (slow: one timed run)
  local v
  synth alpamayo-r1-10b >/dev/null 2>&1
  for v in 15GiB 12GiB 8GiB; do
    step "peer_vram_$v" 500 python3 bench/peer_transformers.py --model "$models/alpamayo-r1-10b" \
      --runs 1 --warmup 0 --max-memory "$v" --json
  done
}

# --- byte paths (issue 11; issue 8 d.1) ------------------------------------------------------
# bytes_tiny: the probe (facts, rates, verdicts), the three host paths and the packed checkpoint
# on alpamayo-tiny with every group streamed, each against the all-resident run, and the
# sanitizers on the bounce path. bytes_ar1: the same on the full checkpoint at 15 GiB.
byte_paths() {  # byte_paths PRESET LIMIT RUN_ARGS...
  local preset=$1 limit=$2; shift 2
  local m="$models/$preset" packed="$models/$preset-packed" p
  synth "$preset" >"$LOGS/synth_$preset.log" 2>&1
  step "probe_$preset" "$limit" "$build/ferry" probe --model "$m" --save "$LOGS/rates_$preset.json"
  step "probe_json_$preset" "$limit" "$build/ferry" probe --json --model "$m"
  step "resident_bytes_$preset" 300 "$build/ferry" run --model "$m" "$@"
  for p in registered bounce pageable; do
    step "path_${p}_$preset" 300 "$build/ferry" run --model "$m" "$@" --host-path "$p"
    step "same_path_${p}_$preset" 10 same_as "$LOGS/resident_bytes_$preset.log" "$LOGS/path_${p}_$preset.log"
  done
  step "bounce_seq_$preset" 300 "$build/ferry" run --model "$m" "$@" --host-path bounce --mode sequential
  step "same_bounce_seq_$preset" 10 same_as "$LOGS/resident_bytes_$preset.log" "$LOGS/bounce_seq_$preset.log"
  step "pack_$preset" "$limit" "$build/ferry" pack "$m" "$packed" --force
  step "packed_$preset" 300 "$build/ferry" run --model "$packed" "$@"
  step "same_packed_$preset" 10 same_as "$LOGS/resident_bytes_$preset.log" "$LOGS/packed_$preset.log"
  # host_rate of each path, as run --json reports it
  python3 - "$LOGS"/path_*_"$preset".log "$LOGS/packed_$preset.log" <<'PY' | tee "$OUT/host_paths_$preset.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        continue
    r = j.get("host_rate", {})
    print(f"{path.rsplit('/', 1)[-1][:-4]}: {r.get('path')} {r.get('gb_per_s', 0):.1f} GB/s over "
          f"{r.get('bytes', 0) / 1e6:.0f} MB ({r.get('measured_on')}); total {j['time_s']['total']:.3f} s")
PY
}
stage_bytes_tiny() {
  # (the embedding resident: off the registered path a discrete GPU cannot gather it in place)
  byte_paths alpamayo-tiny 120 --json --quiet --resident text.embed
  local t
  for t in racecheck synccheck; do
    step "sanitize_bounce_$t" 300 compute-sanitizer --tool "$t" --error-exitcode 9 "$build/ferry" \
      run --model "$models/alpamayo-tiny" --json --quiet --resident text.embed --tokens 2 --steps 1 \
      --images 1 --host-path bounce
  done
}
stage_bytes_ar1() {
  byte_paths alpamayo-r1-10b 600 --json --quiet --images 16 --image-size 320x576 \
    --prompt-tokens 3007 --tokens 21 --vram 15GiB
}

for s in "${stages[@]}"; do
  if declare -F "stage_${s//-/_}" >/dev/null; then "stage_${s//-/_}"; else echo "unknown stage $s"; fi
done

echo
echo "== gpu_check on $(sed -n 2p "$LOGS/gpu.txt")"
printf '%s\n' "${table[@]}"
# Demand layering: outside peaks (nvidia-smi, MiB over the idle device) per budget.
for f in "$LOGS"/*.smi; do [ -f "$f" ] && echo "$(basename "$f" .smi): peak $(cat "$f") MiB (nvidia-smi)"; done | tee "$OUT/vram_peaks.txt"
# Stage medians of every bench that ran (ms; floor/time in %).
python3 - "$LOGS"/bench_*.log <<'PY' 2>/dev/null | tee "$OUT/bench_summary.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        continue
    row = [path.rsplit("/", 1)[-1][6:-4], "graphs=" + str(j.get("graphs", {}).get("on"))]
    for name, st in j["stages"].items():
        row.append(f"{name} {st['median_s']*1e3:.1f}ms ({100*st['floor_s']/st['median_s']:.0f}%)")
    print(" | ".join(row))
PY
