#!/usr/bin/env bash
# The checks the GPU machine must keep passing, each a named stage that a caller selects: the CUDA
# build, the CUDA op harness, the unit tests, tiny models on both backends, the comparisons with
# transformers, ferry bench and its sweep, the byte paths, compute-sanitizer, the start-up times
# and the transformers peer. Full logs go under $OUT (the device tool brings them back); a short
# table is printed last. Each step is time-boxed and independent of the others.
#
#   scripts/gpu_check.sh STAGE|GROUP...  run in the order given (a group: its stages in turn)
#   scripts/gpu_check.sh --help          the stages and groups (also with no argument)
#   scripts/gpu_check.sh default         build harness tiny bench_ar1 peer_ar1 compare_tiny ...
#
# Binaries built on the development machine can be carried instead of building here (device
# time): scripts/gpu_prebuild.sh puts them and the few shared libraries they need into .gpu/;
# FERRY_PREBUILT=.gpu makes every stage use them (carry .gpu). bench/experiments/ sources this
# file for replays of past sessions' measurements and stages that answer one question.
set -uo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
OUT=${OUT:-$root/out}
LOGS=${FERRY_GPU_LOGS:-/tmp/ferry-gpu-logs}  # many logs; $OUT gets them as one archive
build=${FERRY_BUILD_DIR:-build-gpu}
[ -n "${FERRY_PREBUILT:-}" ] && build=$FERRY_PREBUILT
models=${FERRY_MODELS:-/tmp/ferry-models}
stage_sources=("${BASH_SOURCE[0]}")  # the files whose stage_NAME() lines --help lists
groups=(  # NAME: its stages; a group may need more than one device call of 600 s
  "default: build harness tiny bench_ar1 peer_ar1 compare_tiny compare_8b compare_ar1 bench_8b
    peer_8b compare_parts unit"  # what a call with no stage ran before
  "compare: compare_tiny compare_parts compare_8b compare_ar1"
  "bench: bench_ar1 bench_8b bench_vram_ar1"
  "sweep: sweep_ar1 sweep_8b"
  "bytes: bytes_tiny bytes_ar1"
  "start: start_ar1"
  "peer: peer_ar1 peer_8b peer_vram"
)
declare -a table
export PYTHONUNBUFFERED=1

usage() {
  local re='^stage_([a-z0-9_]+)\(\) \{ *(# *(.*))?' l g m
  echo "usage: ${0##*/} STAGE|GROUP...  (in the order given; logs under \$OUT, FERRY_PREBUILT=.gpu)"
  echo "stages:"
  while IFS= read -r l; do
    [[ $l =~ $re ]] && printf '  %-19s%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[3]}"
  done < <(cat "${stage_sources[@]}")
  echo "groups:"
  for g in "${groups[@]}"; do
    m=(${g#*:})
    printf '  %-19s%s\n' "${g%%:*}" "${m[*]}"
  done
}
# The stages named on the command line, groups expanded; every name checked before any runs.
main() {
  (($#)) || { usage; exit 2; }
  local s g want=()
  for s in "$@"; do
    case $s in -h | --help | help) usage; exit 0 ;; esac
    s=${s//-/_}
    for g in "${groups[@]}"; do [ "${g%%:*}" = "$s" ] && { want+=(${g#*:}); continue 2; }; done
    want+=("$s")
  done
  for s in "${want[@]}"; do
    declare -F "stage_$s" >/dev/null || { echo "unknown stage $s (--help lists them)" >&2; exit 2; }
  done
  setup
  for s in "${want[@]}"; do "stage_$s"; done
  report
}
setup() {
  cd "$root" || exit 1
  mkdir -p "$OUT" "$LOGS" "$models"
  [ -n "${FERRY_PREBUILT:-}" ] &&
    export LD_LIBRARY_PATH="$root/$FERRY_PREBUILT/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv \
    >"$LOGS/gpu.txt" 2>&1
}

# step NAME SECONDS CMD...: output in $LOGS/NAME.log; records rc, seconds, last line.
step() {
  local name=$1 limit=$2; shift 2
  local t0 rc dt
  t0=$(date +%s.%N)
  if declare -F "$1" >/dev/null; then  # a function of this script: run it in a child bash
    timeout "$limit" bash -c "$(declare -f "$1" watched same_as); LOGS='$LOGS'; \"\$@\"" _ "$@" \
      >"$LOGS/$name.log" 2>&1
  else
    timeout "$limit" "$@" >"$LOGS/$name.log" 2>&1
  fi
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

stage_build() {  # cmake and build ferry and its tests (Release, CUDA sm_90), or the carried ones
  if [ -n "${FERRY_PREBUILT:-}" ]; then
    step prebuilt 10 "$build/ferry" --help
    return
  fi
  step configure 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_PYTHON=OFF
  step build 400 cmake --build "$build" -j "$(nproc)" --target ferry ferry_tests ferry_cuda_tests \
    ferry_vision_dump ferry_expert_dump
}
stage_harness() {  # the CUDA op harness: every CUDA op against the CPU reference
  step cuda_harness 300 "$build/tests/ferry_cuda_tests"
}
stage_ops_bench() {
  step build_ops_bench 400 cmake --build "$build" -j "$(nproc)" --target ferry_cuda_bench
  step ops_bench 300 "$build/bench/ferry_cuda_bench"
}
stage_unit() {  # the unit tests (ferry_tests) on the GPU machine
  step unit_tests 300 "$build/tests/ferry_tests" --gtest_brief=1
}
stage_tiny() {  # tiny presets: the same tokens and hashes on CPU and CUDA, graphs on and off
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
stage_compare_tiny() {  # transformers vs ferry's CPU backend, tiny Qwen3 and Qwen3-VL (issue 3)
  step compare_qwen3-tiny 300 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-tiny" --backend cpu --tokens 8
  step compare_qwen3-vl-tiny 300 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-vl-tiny" --backend cpu --tokens 8
}
stage_compare_parts() {  # transformers vs ferry: the tiny vision encoder and action expert
  step compare_vision_tiny 300 python3 scripts/compare_vision_transformers.py --build "$build" --floor
  step compare_expert_tiny 300 python3 scripts/compare_expert_transformers.py --build "$build" --floor
}
stage_compare_8b() {  # transformers vs ferry on CUDA, Qwen3-8B full size (issue 4)
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step compare_qwen3-8b 400 python3 scripts/compare_transformers.py --ferry "$build/ferry" \
    --model "$models/qwen3-8b" --backend cuda --prompt-tokens 1500 --tokens 21
}
stage_compare_ar1() {  # the same, Alpamayo-R1-10B's language model, reference workload (issue 4)
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
stage_bench_ar1() {  # ferry bench, Alpamayo-R1-10B all resident: every stage against its floor
  bench_one alpamayo-r1-10b
}
profile_one() {  # every op timed alone (ungraphed): where each stage's time goes
  synth "$1" >/dev/null 2>&1
  step "profile_$1" 400 "$build/ferry" bench --model "$models/$1" --runs 1 --warmup 1 --op-profile \
    --op-profile-top 25
}
stage_profile_ar1() { profile_one alpamayo-r1-10b; }
stage_profile_8b() { profile_one qwen3-8b; }
stage_bench_ar1_nographs() { bench_one alpamayo-r1-10b _nographs --graphs off; }
stage_bench_8b_nographs() { bench_one qwen3-8b _nographs --graphs off; }
stage_peer_ar1() {  # transformers on the same checkpoint and workload, timed (bench/peer_*.py)
  peer_one alpamayo-r1-10b
}
stage_bench_8b() {  # ferry bench, Qwen3-8B all resident
  bench_one qwen3-8b
}
stage_peer_8b() {  # transformers on Qwen3-8B, timed
  peer_one qwen3-8b
}

# --- demand layering (issue 8) ---------------------------------------------------------------
# Device memory as nvidia-smi sees it, sampled every 20 ms while CMD runs: the outside check of
# a budget. Writes the peak (MiB, used minus what was used before) to $LOGS/NAME.smi.
watched() {  # watched NAME CMD...
  local name=$1; shift
  local base
  base=$(nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits 2>/dev/null | head -1)
  nvidia-smi --query-gpu=memory.used --format=csv,noheader,nounits -lms 20 >"$LOGS/$name.smi.raw" 2>/dev/null &
  local smi=$!
  "$@"
  local rc=$?
  kill $smi 2>/dev/null; wait $smi 2>/dev/null
  python3 -c "v=[int(x) for x in open('$LOGS/$name.smi.raw').read().split() if x.isdigit()]; print(max(v)-${base:-0} if v else -1)" >"$LOGS/$name.smi" 2>/dev/null
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
stage_stream_tiny() {  # budgets above the CUDA runtime's own share (~0.4-0.6 GB, counted)
  stream_runs alpamayo-tiny 800MB 700MB
  stream_runs qwen3-tiny 700MB
}
stage_stream_ar1() { stream_runs alpamayo-r1-10b 15GiB 12GiB 8GiB 4GiB 2.5GiB 2.3GiB; }
stage_sanitize() {  # compute-sanitizer (racecheck, synccheck, memcheck) on tiny streamed runs
  synth alpamayo-tiny >/dev/null 2>&1
  local t
  # racecheck sees shared-memory hazards inside kernels; cuBLASLt's own nvjet kernels report
  # one (vendor code), so ferry's kernels are checked with those excluded, and all of them apart.
  step sanitize_racecheck_ferry 300 compute-sanitizer --tool racecheck --error-exitcode 9 \
    --kernel-name-exclude kns=nvjet "$build/ferry" run --model "$models/alpamayo-tiny" --json \
    --quiet --resident none --tokens 2 --steps 1 --images 1
  step sanitize_racecheck_all 300 compute-sanitizer --tool racecheck --error-exitcode 9 \
    "$build/ferry" run --model "$models/alpamayo-tiny" --json --quiet --resident none --tokens 2 \
    --steps 1 --images 1
  step sanitize_synccheck 300 compute-sanitizer --tool synccheck --error-exitcode 9 "$build/ferry" \
    run --model "$models/alpamayo-tiny" --json --quiet --resident none --tokens 2 --steps 1 --images 1
  # memcheck: out-of-bounds and misaligned accesses anywhere, streamed and resident.
  step sanitize_memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/ferry" \
    run --model "$models/alpamayo-tiny" --json --quiet --resident none --tokens 2 --steps 1 --images 1
  step sanitize_memcheck_resident 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/ferry" run --model "$models/alpamayo-tiny" --json --quiet --tokens 2 --steps 1 --images 1
}
bench_vram() {  # bench_vram PRESET BUDGET [MODE [RUNS]]
  local mode=${3:-pipelined} runs=${4:-3}
  synth "$1" >/dev/null 2>&1
  step "bench_vram_$1_$2_$mode" 500 watched "bench_vram_$1_$2_$mode" "$build/ferry" bench \
    --model "$models/$1" --runs "$runs" --warmup 1 --json --quiet --vram "$2" --mode "$mode"
}
stage_bench_vram_ar1() {  # ferry bench at 15, 8 GiB (pipelined, sequential), peaks seen from outside
  local v
  for v in 15GiB 12GiB 8GiB; do bench_vram alpamayo-r1-10b "$v"; done
  for v in 15GiB 12GiB 8GiB; do bench_vram alpamayo-r1-10b "$v" sequential 1; done
}
stage_peer_vram() {  # transformers + Accelerate under 15, 12, 8 GiB caps (slow: one timed run each)
  local v
  synth alpamayo-r1-10b >/dev/null 2>&1
  for v in 15GiB 12GiB 8GiB; do
    step "peer_vram_$v" 500 python3 bench/peer_transformers.py --model "$models/alpamayo-r1-10b" \
      --runs 1 --warmup 0 --max-memory "$v" --json
  done
}

stage_inputs_ar1() {  # issue 10: ferry run on real inputs, full size; outputs come back in $OUT
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  local d="$OUT/inputs_ar1" m="$models/alpamayo-r1-10b"
  mkdir -p "$d"
  step make_inputs_ar1 120 python3 scripts/make_test_inputs.py "$d"
  step run_inputs_ar1 400 "$build/ferry" run --model "$m" --frames "$d/frames" \
    --ego-history "$d/history.json" --trajectory "$d/trajectory.json" --picture "$d/picture.png" \
    --max-tokens 64
  # Greedy, resident and streamed under a budget (the early stop skips decode calls in the slot
  # ring): the same tokens and hashes.
  local args=(--frames "$d/frames" --ego-history "$d/history.json" --max-tokens 64 --greedy
    --json --quiet)
  step run_inputs_ar1_greedy 400 "$build/ferry" run --model "$m" "${args[@]}" \
    --trajectory "$d/trajectory.csv" --picture "$d/picture.svg"
  step run_inputs_ar1_8gib 400 "$build/ferry" run --model "$m" "${args[@]}" --vram 8GiB
  step same_inputs_ar1_8gib 10 same_as "$LOGS/run_inputs_ar1_greedy.log" \
    "$LOGS/run_inputs_ar1_8gib.log"
  step compare_prompt_ar1 600 python3 scripts/compare_prompt_transformers.py --model "$m" \
    --ferry "$build/ferry" --frames "$d/frames" --ego-history "$d/history.json"
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step qwen3_prompt 300 "$build/ferry" run --model "$models/qwen3-8b" \
    --prompt "Name three rivers of Europe." --max-tokens 32
}
# --- residency planner, profiler, predictor (issue 9) ---------------------------------------
# plan_X: a measured profile under a 15 GiB budget (what a 16 GB card could run), the planner's
# plans at 15 and 8 GiB, the predicted sweep. alternatives_X: at 15 and 8 GiB the planner's plan
# against the alternatives issue 9 names, predicted and measured side by side
# (scripts/plan_alternatives.py). sweep_X: the measured sweep over the same budgets as the
# predicted one. Each stage fits one device call; the profile stays in $LOGS for the next stage
# on a warm machine (and is measured again on a fresh one) and is copied to $OUT.
planned_profile() {  # planned_profile PRESET NAME [WORKLOAD...]
  local preset=$1 name=$2; shift 2
  local p="$LOGS/$name.profile.json"
  synth "$preset" >"$LOGS/synth_$preset.log" 2>&1
  if [ ! -f "$p" ]; then
    step "profile_$name" 500 "$build/ferry" profile --model "$models/$preset" --vram 15GiB \
      --out "$p" --runs 5 --quiet "$@"
  fi
  cp "$p" "$OUT/" 2>/dev/null
}
plan_model() {  # plan_model PRESET NAME [WORKLOAD...]
  local preset=$1 name=$2; shift 2
  local m="$models/$preset" p="$LOGS/$name.profile.json" v
  planned_profile "$preset" "$name" "$@"
  for v in 15GiB 8GiB; do
    step "plan_${name}_$v" 120 "$build/ferry" plan --model "$m" --vram "$v" --profile "$p" \
      --out "$OUT/${name}_$v.plan.json" "$@"
  done
  step "plan_sweep_$name" 300 "$build/ferry" plan --model "$m" --sweep --profile "$p" \
    --plot "$OUT/plan_sweep_$name.svg" "$@"
}
alternatives_model() {  # alternatives_model PRESET NAME [WORKLOAD...]
  local preset=$1 name=$2; shift 2
  local v
  planned_profile "$preset" "$name" "$@"
  for v in 15GiB 8GiB; do
    step "alternatives_${name}_$v" 400 python3 scripts/plan_alternatives.py --ferry "$build/ferry" \
      --model "$models/$preset" --vram "$v" --profile "$LOGS/$name.profile.json" --workdir "$LOGS" \
      --json "$OUT/alternatives_${name}_$v.json" "$@"
  done
}
sweep_model() {  # sweep_model PRESET NAME RUNS [WORKLOAD...]
  local preset=$1 name=$2 runs=$3; shift 3
  planned_profile "$preset" "$name" "$@"
  step "bench_sweep_$name" 590 "$build/ferry" bench --model "$models/$preset" --sweep auto \
    --profile "$LOGS/$name.profile.json" --runs "$runs" --warmup 1 --quiet --json \
    --plot "$OUT/bench_sweep_$name.svg" "$@"
}
qwen_workload=(--prompt-tokens 1500 --tokens 128)
stage_plan_ar1() { plan_model alpamayo-r1-10b ar1; }
stage_alternatives_ar1() { alternatives_model alpamayo-r1-10b ar1; }
stage_sweep_ar1() {  # a measured profile, then bench --sweep auto against its prediction (Alpamayo)
  sweep_model alpamayo-r1-10b ar1 3
}
stage_plan_8b() { plan_model qwen3-8b 8b "${qwen_workload[@]}"; }
stage_alternatives_8b() { alternatives_model qwen3-8b 8b "${qwen_workload[@]}"; }
stage_sweep_8b() {  # the same for Qwen3-8B (1500-token prompt, 128 tokens)
  sweep_model qwen3-8b 8b 1 "${qwen_workload[@]}"
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
stage_bytes_tiny() {  # byte paths, alpamayo-tiny: probe, registered/bounce/pageable, pack, sanitizers
  # (the embedding resident: off the registered path a discrete GPU cannot gather it in place)
  byte_paths alpamayo-tiny 120 --json --quiet --resident text.embed
  local t
  for t in racecheck synccheck; do
    step "sanitize_bounce_$t" 300 compute-sanitizer --tool "$t" --error-exitcode 9 "$build/ferry" \
      run --model "$models/alpamayo-tiny" --json --quiet --resident text.embed --tokens 2 --steps 1 \
      --images 1 --host-path bounce
  done
}
stage_bytes_ar1() {  # byte paths, Alpamayo-R1-10B at 15 GiB: probe, the three host paths, pack
  byte_paths alpamayo-r1-10b 600 --json --quiet --images 16 --image-size 320x576 \
    --prompt-tokens 3007 --tokens 21 --vram 15GiB
}

# The planner's plans at 15, 8 and 2.5 GiB against the all-resident bytes (outside peaks
# watched), then the budgeted benches at 15 and 8 GiB.
budgets_ar1() {
  local m="$models/alpamayo-r1-10b" v
  local args=(--json --quiet --images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step resident_ar1 200 "$build/ferry" run --model "$m" "${args[@]}"
  for v in 15GiB 8GiB 2.5GiB; do
    step "vram_ar1_$v" 200 watched "vram_ar1_$v" "$build/ferry" run --model "$m" "${args[@]}" --vram "$v"
    step "same_ar1_$v" 10 same_as "$LOGS/resident_ar1.log" "$LOGS/vram_ar1_$v.log"
  done
  bench_vram alpamayo-r1-10b 15GiB
  bench_vram alpamayo-r1-10b 8GiB
}
# The measured sweep against the prediction of the profile in $LOGS/ar1.profile.json, as JSON.
measured_sweep_ar1() {
  step bench_sweep_ar1 400 "$build/ferry" bench --model "$models/alpamayo-r1-10b" --sweep auto \
    --json --quiet --profile "$LOGS/ar1.profile.json" --runs 3 --warmup 1 \
    --plot "$OUT/bench_sweep_ar1.svg"
  cp "$LOGS/bench_sweep_ar1.log" "$OUT/bench_sweep_ar1.json" 2>/dev/null
}

# One call for a short device budget, most important first: the merged runtime's outputs on
# CUDA (tiny plans, host paths, memcheck), the planner's plans at full size against the
# all-resident bytes, budgeted benches, a measured profile and the predicted curve, the probe.
stage_quick_all() {
  stream_runs alpamayo-tiny 800MB
  step path_bounce_tiny 120 "$build/ferry" run --model "$models/alpamayo-tiny" --json --quiet \
    --resident text.embed --host-path bounce
  step resident_embed_tiny 120 "$build/ferry" run --model "$models/alpamayo-tiny" --json --quiet \
    --resident text.embed
  step same_bounce_tiny 10 same_as "$LOGS/resident_embed_tiny.log" "$LOGS/path_bounce_tiny.log"
  step sanitize_memcheck 200 compute-sanitizer --tool memcheck --error-exitcode 9 "$build/ferry" \
    run --model "$models/alpamayo-tiny" --json --quiet --resident none --tokens 2 --steps 1 --images 1
  local m="$models/alpamayo-r1-10b"
  budgets_ar1
  step profile_ar1_15g 200 "$build/ferry" profile --model "$m" --vram 15GiB \
    --out "$OUT/ar1.profile.json" --runs 3 --quiet
  step plan_sweep_ar1 60 "$build/ferry" plan --model "$m" --sweep --profile "$OUT/ar1.profile.json" \
    --plot "$OUT/plan_sweep_ar1.svg"
  step bench_profiled_ar1_8g 200 watched bench_profiled_ar1_8g "$build/ferry" bench --model "$m" \
    --runs 3 --warmup 1 --json --quiet --vram 8GiB --profile "$OUT/ar1.profile.json"
  step probe_ar1 200 "$build/ferry" probe --model "$m" --vram 15GiB --save "$OUT/rates_ar1.json"
}

# The planner's sweep (issue 9): a profile with every group streamed through the pipelined ring
# (so each group's C_DMA is its copy span in the pipeline), then the measured curve over the
# planner's budgets against the prediction; then real inputs at full size (issue 10) and the
# bounce and pageable host paths at 15 GiB against the registered one (issue 11).
stage_sweep_quick() {
  local m="$models/alpamayo-r1-10b" d="$OUT/inputs_ar1" p
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step profile_ar1_streamed 200 "$build/ferry" profile --model "$m" --vram 15GiB --resident none \
    --mode pipelined --out "$OUT/ar1.profile.json" --runs 3 --json
  step bench_sweep_ar1 330 "$build/ferry" bench --model "$m" --sweep auto \
    --profile "$OUT/ar1.profile.json" --runs 3 --warmup 1 --plot "$OUT/bench_sweep_ar1.svg"
  mkdir -p "$d"
  step make_inputs_ar1 60 python3 scripts/make_test_inputs.py "$d"
  step run_inputs_ar1 120 "$build/ferry" run --model "$m" --frames "$d/frames" \
    --ego-history "$d/history.json" --trajectory "$d/trajectory.json" --picture "$d/picture.png" \
    --max-tokens 64 --vram 15GiB
  local args=(--json --quiet --images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)
  step ref_ar1_15g 60 "$build/ferry" run --model "$m" "${args[@]}" --vram 15GiB
  for p in bounce pageable; do
    step "path_${p}_ar1" 120 "$build/ferry" run --model "$m" "${args[@]}" --vram 15GiB --host-path "$p"
    step "same_path_${p}_ar1" 10 same_as "$LOGS/ref_ar1_15g.log" "$LOGS/path_${p}_ar1.log"
  done
}

# Host memory of 1, 2, 4 concurrent processes on the full checkpoint (issue 11 d.4): anonymous
# memory per process and the machine's used memory growth (bench/host_memory.py).
stage_host_memory_ar1() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step host_memory_ar1 400 python3 bench/host_memory.py --ferry "$build/ferry" \
    --model "$models/alpamayo-r1-10b" --counts 1,2,4 --json "$OUT/host_memory_ar1.json" \
    -- --vram 15GiB --runs 2
}

# The map path (issue 11 d.3): a packed tiny checkpoint with every layer, then every group, read
# in place by its kernels from the registered mapping, against the all-resident bytes; memcheck.
stage_map_tiny() {
  local p
  for p in alpamayo-tiny qwen3-tiny; do
    synth "$p" >"$LOGS/synth_$p.log" 2>&1
    step "pack_$p" 60 "$build/ferry" pack "$models/$p" "$models/$p-packed" --force
    step "map_ref_$p" 60 "$build/ferry" run --model "$models/$p" --json --quiet
    local layers
    layers=$("$build/ferry" inspect "$models/$p-packed" --json 2>/dev/null | python3 -c '
import json, sys
g = json.load(sys.stdin).get("groups", [])
print(",".join(x["name"] for x in g if ".layers." in x["name"] or ".blocks." in x["name"]))')
    step "map_layers_$p" 60 "$build/ferry" run --model "$models/$p-packed" --json --quiet \
      --resident none --map "$layers"
    step "same_map_layers_$p" 10 same_as "$LOGS/map_ref_$p.log" "$LOGS/map_layers_$p.log"
  done
  step sanitize_memcheck_map 300 compute-sanitizer --tool memcheck --error-exitcode 9 \
    "$build/ferry" run --model "$models/alpamayo-tiny-packed" --json --quiet --resident none \
    --map "$layers" --tokens 2 --steps 1 --images 1
}

# The CUDA runtime's own device memory (bench/context_memory.cpp): the context at the default
# per-thread stack limit and at the one ferry asks for, then cuBLASLt's handle.
stage_runtime() {
  local ctx=$build/ferry_context_memory
  [ -x "$ctx" ] || ctx=$build/bench/ferry_context_memory
  step context_default 60 "$ctx"
  step context_stack256 60 "$ctx" --stack 256
  step context_stack0 60 "$ctx" --stack 0
}

# Session 4, first call: the layer-part groups and the smaller stack limit on CUDA (tiny plans
# and the full-size plans against the all-resident bytes), the budgeted benches at 15 and 8 GiB,
# a profile under the 15 GiB plan (the default) and the measured sweep against its prediction.
stage_session4a() {
  stage_runtime
  stream_runs alpamayo-tiny 800MB
  local m="$models/alpamayo-r1-10b"
  budgets_ar1
  # All resident: the timed runs' median beside the timeline run's span (timing events' cost).
  step bench_resident_ar1 200 "$build/ferry" bench --model "$m" --runs 3 --warmup 1 --json --quiet
  planned_profile alpamayo-r1-10b ar1
  measured_sweep_ar1
}
# Second call: the profile and the measured sweep against its prediction; the start breakdown;
# the map path.
stage_session4b() {
  local m="$models/alpamayo-r1-10b"
  planned_profile alpamayo-r1-10b ar1
  measured_sweep_ar1
  stage_start_ar1
  stage_map_tiny
}
# Third call: the planner against the alternatives at 15 and 8 GiB, host memory of concurrent
# processes.
# The Qwen3-8B sweep in a short device budget: POINTS budgets, a warm-up and one timed run each.
short_sweep_8b() {  # short_sweep_8b POINTS LIMIT
  planned_profile qwen3-8b 8b "${qwen_workload[@]}"
  step bench_sweep_8b "$2" "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points "$1" --profile "$LOGS/8b.profile.json" --runs 1 --warmup 1 --quiet --json \
    --plot "$OUT/bench_sweep_8b.svg" "${qwen_workload[@]}"
  cp "$LOGS/bench_sweep_8b.log" "$OUT/bench_sweep_8b.json" 2>/dev/null
}
stage_sweep_8b_quick() { short_sweep_8b 6 420; }
stage_session4c() {
  stage_alternatives_ar1
  stage_host_memory_ar1
  stage_sweep_8b
  cp "$LOGS/bench_sweep_8b.log" "$OUT/bench_sweep_8b.json" 2>/dev/null
}

# The start at 15 GiB in a short device budget: the old order against the overlapped one.
stage_start_quick() {
  local m="$models/alpamayo-r1-10b" args=(--json --quiet --vram 15GiB --images 16
    --image-size 320x576 --prompt-tokens 3007 --tokens 21)
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step start_warm 300 "$build/ferry" run --model "$m" "${args[@]}"
  step start_serial 300 "$build/ferry" run --model "$m" "${args[@]}" --register-piece 0 \
    --register-threads 0
  step start_overlap 300 "$build/ferry" run --model "$m" "${args[@]}"
  step same_start_overlap 10 same_as "$LOGS/start_serial.log" "$LOGS/start_overlap.log"
  step start_overlap2 300 "$build/ferry" run --model "$m" "${args[@]}"
}

# Session 5, first call: the start after the planner's speedup, the outside peaks again (2.5 GiB
# since the page tables are budgeted), the budgeted benches, and the raw timelines of a profile
# under the 15 GiB plan and of one all resident (where each call's compute span goes).
stage_session5a() {
  start_quick_table
  budgets_ar1
  local m="$models/alpamayo-r1-10b"
  step bench_resident_ar1 200 "$build/ferry" bench --model "$m" --runs 3 --warmup 1 --json --quiet
  step profile_ar1_15g 200 "$build/ferry" profile --model "$m" --vram 15GiB --runs 3 --quiet \
    --out "$OUT/ar1.profile.json" --timeline-out "$OUT/ar1_15g.timelines.json"
  step profile_ar1_resident 200 "$build/ferry" profile --model "$m" --runs 3 --quiet \
    --out "$OUT/ar1_resident.profile.json" --timeline-out "$OUT/ar1_resident.timelines.json"
}

# Second call: the start with the planner on threads; a version-2 profile (C_EXE alone and with
# a copy running) under the 15 GiB plan, the benches at 15 and 8 GiB with its plans, and the
# measured sweep against its prediction.
stage_session5b() {
  start_quick_table
  local m="$models/alpamayo-r1-10b" v
  step profile_ar1 200 "$build/ferry" profile --model "$m" --vram 15GiB --runs 3 --quiet \
    --out "$LOGS/ar1.profile.json" --timeline-out "$OUT/ar1_15g.timelines.json"
  cp "$LOGS/ar1.profile.json" "$OUT/"
  for v in 15GiB 8GiB; do
    step "bench_profiled_ar1_$v" 200 watched "bench_profiled_ar1_$v" "$build/ferry" bench \
      --model "$m" --runs 3 --warmup 1 --json --quiet --vram "$v" --profile "$LOGS/ar1.profile.json"
  done
  step bench_resident_ar1 200 "$build/ferry" bench --model "$m" --runs 3 --warmup 1 --json --quiet
  measured_sweep_ar1
}

# Third call: the profile with its sequential pass (C_EXE alone for every call), the start, and
# the measured sweep against its prediction.
stage_session5c() {
  local m="$models/alpamayo-r1-10b"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step profile_ar1 200 "$build/ferry" profile --model "$m" --vram 15GiB --runs 3 --quiet --json \
    --out "$LOGS/ar1.profile.json" --timeline-out "$OUT/ar1_15g.timelines.json"
  cp "$LOGS/ar1.profile.json" "$OUT/"
  step plan_resident_ar1 60 "$build/ferry" plan --model "$m" --profile "$LOGS/ar1.profile.json" \
    --json
  step bench_resident_ar1 200 "$build/ferry" bench --model "$m" --runs 3 --warmup 1 --json --quiet
  measured_sweep_ar1
  start_quick_table
}
# Fourth call: the Qwen3-8B sweep over 12 budgets (454 s on the H200).
stage_sweep_8b_12() { short_sweep_8b 12 560; }

# Fifth call: Qwen3-8B profiled with its pass beside background copies (all resident at
# 15 GiB, so no copy of its own showed the slowdown), measured at the top three budgets of the
# 12-point sweep; Alpamayo's 15 and 8 GiB benches with a fresh profile.
stage_session5e() {
  planned_profile qwen3-8b 8b "${qwen_workload[@]}"
  step bench_top_8b 300 "$build/ferry" bench --model "$models/qwen3-8b" \
    --sweep 13369103706,14726874272,16084644838 --profile "$LOGS/8b.profile.json" --runs 1 \
    --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/bench_top_8b.log" "$OUT/bench_top_8b.json" 2>/dev/null
  planned_profile alpamayo-r1-10b ar1
  local v
  for v in 15GiB 8GiB; do
    step "bench_profiled_ar1_$v" 200 watched "bench_profiled_ar1_$v" "$build/ferry" bench \
      --model "$models/alpamayo-r1-10b" --runs 3 --warmup 1 --json --quiet --vram "$v" \
      --profile "$LOGS/ar1.profile.json"
  done
}

# Session 6, first call: the lent cache (streamed groups kept in the idle activation region
# after prefill). The CUDA unit tests; a fresh profile; outputs at 15/8/2.5 GiB against the
# all-resident run with outside peaks; 15 and 8 GiB benched with and without the cache; the
# measured sweep; the start with other registration pieces.
# The CUDA unit tests, a fresh profile of Alpamayo, and its planned runs at 15/8/2.5 GiB against
# the all-resident run, peaks watched from outside.
lent_outputs_ar1() {
  local m="$models/alpamayo-r1-10b" v
  step cuda_tests 200 "$build/tests/ferry_cuda_tests" --gtest_brief=1
  planned_profile alpamayo-r1-10b ar1
  step run_resident_ar1 200 "$build/ferry" run --model "$m" --json --quiet
  for v in 15GiB 8GiB 2.5GiB; do
    step "run_lent_ar1_$v" 200 watched "run_lent_ar1_$v" "$build/ferry" run --model "$m" --json \
      --quiet --vram "$v" --profile "$LOGS/ar1.profile.json"
    step "same_lent_ar1_$v" 10 same_as "$LOGS/run_resident_ar1.log" "$LOGS/run_lent_ar1_$v.log"
  done
}
# bench_ar1_at NAME VRAM [FLAGS...]: one benched process with the fresh profile, peaks watched.
bench_ar1_at() {
  local name=$1 v=$2; shift 2
  step "$name" 200 watched "$name" "$build/ferry" bench --model "$models/alpamayo-r1-10b" \
    --runs 3 --warmup 1 --json --quiet --vram "$v" --profile "$LOGS/ar1.profile.json" "$@"
}
stage_session6a() {
  local v
  lent_outputs_ar1
  for v in 15GiB 8GiB; do
    bench_ar1_at "bench_lent_ar1_$v" "$v"
    bench_ar1_at "bench_nolent_ar1_$v" "$v" --no-lent-cache
  done
  measured_sweep_ar1
  stage_start_pieces
}

# Second call: the vision outputs lent too and the knapsack packing. CUDA tests; a fresh
# profile; outputs at 15/8/2.5 GiB against all-resident with outside peaks; 15 and 8 GiB benched
# in two processes each; the measured sweep; Qwen3-8B's top three sweep budgets.
stage_session6b() {
  local v k
  lent_outputs_ar1
  for v in 15GiB 8GiB; do
    for k in 1 2; do bench_ar1_at "bench_lent${k}_ar1_$v" "$v"; done
  done
  measured_sweep_ar1
  planned_profile qwen3-8b 8b "${qwen_workload[@]}"
  step bench_top_8b 300 "$build/ferry" bench --model "$models/qwen3-8b" \
    --sweep 13369103706,14726874272,16084644838 --profile "$LOGS/8b.profile.json" --runs 1 \
    --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/bench_top_8b.log" "$OUT/bench_top_8b.json" 2>/dev/null
}

# Third call: the start with the budget's region reserved before the registration starts
# (several runs, and 64 MiB pieces), then 15 and 8 GiB benched with a carried profile
# (.gpu/ar1.profile.json, call 2's) beside transformers + Accelerate at 15 GiB (one timed run).
stage_session6c() {
  local m="$models/alpamayo-r1-10b" args=(--json --quiet --vram 15GiB --images 16
    --image-size 320x576 --prompt-tokens 3007 --tokens 21) k v
  stage_start_quick
  for k in 3 4; do step "start_overlap$k" 300 "$build/ferry" run --model "$m" "${args[@]}"; done
  step start_piece_64MiB 300 "$build/ferry" run --model "$m" "${args[@]}" --register-piece 64MiB
  step same_start_piece_64MiB 10 same_as "$LOGS/start_serial.log" "$LOGS/start_piece_64MiB.log"
  start_table "$LOGS"/start_serial.log "$LOGS"/start_overlap*.log "$LOGS"/start_piece_*.log |
    tee "$OUT/start_ar1.txt"
  for v in 15GiB 8GiB; do
    step "bench_side_ar1_$v" 200 watched "bench_side_ar1_$v" "$build/ferry" bench --model "$m" \
      --runs 3 --warmup 1 --json --quiet --vram "$v" --profile "${FERRY_PREBUILT:-.gpu}/ar1.profile.json"
  done
  step peer_vram_15GiB 450 python3 bench/peer_transformers.py --model "$m" --runs 1 --warmup 0 \
    --max-memory 15GiB --json
}

# Session 7, first call (issue 11): cold starts (the checkpoint's pages dropped with
# scripts/page_cache.py: only its own files, nothing machine-wide), registered against the
# storage path; the probe with its storage rate; warm starts by registration piece size.
stage_session7a() {
  local m="$models/alpamayo-r1-10b" args=(--json --quiet --vram 15GiB --images 16
    --image-size 320x576 --prompt-tokens 3007 --tokens 21) p k
  step cuda_tests 200 "$build/tests/ferry_cuda_tests" --gtest_brief=1
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step resident_ar1 200 "$build/ferry" run --model "$m" "${args[@]:0:2}" "${args[@]:4}"
  for p in registered storage auto; do
    step "evict_$p" 120 python3 scripts/page_cache.py evict "$m"
    step "cold_$p" 400 "$build/ferry" run --model "$m" "${args[@]}" --host-path "$p"
    step "cached_after_$p" 60 python3 scripts/page_cache.py report "$m"
    step "same_cold_$p" 10 same_as "$LOGS/resident_ar1.log" "$LOGS/cold_$p.log"
  done
  step warm_again 300 "$build/ferry" run --model "$m" "${args[@]}"
  step probe_ar1 400 "$build/ferry" probe --model "$m" --vram 15GiB --passes 1 --json
  for k in 1 2 3; do step "start_default$k" 300 "$build/ferry" run --model "$m" "${args[@]}"; done
  for p in 32MiB 64MiB 1GiB; do
    for k in 1 2; do
      step "start_piece_${p}_$k" 300 "$build/ferry" run --model "$m" "${args[@]}" \
        --register-piece "$p"
    done
  done
  step same_start_piece 10 same_as "$LOGS/start_default1.log" "$LOGS/start_piece_64MiB_1.log"
  # Does planning wait on the memory-map lock that the pinning holds? glibc's heap grown in large
  # steps and never trimmed: fewer address-space changes during planning.
  for k in 1 2; do
    step "start_heap$k" 300 env GLIBC_TUNABLES=glibc.malloc.top_pad=268435456:glibc.malloc.trim_threshold=4294967295:glibc.malloc.mmap_threshold=33554432 \
      "$build/ferry" run --model "$m" "${args[@]}"
  done
  start_table "$LOGS"/cold_*.log "$LOGS"/start_default*.log "$LOGS"/start_piece_*.log \
    "$LOGS"/start_heap*.log |
    tee "$OUT/start_ar1.txt"
  python3 - "$LOGS"/probe_ar1.log <<'PY' | tee "$OUT/probe_ar1.txt"
import json, sys
j = json.loads(open(sys.argv[1]).read())
m = j["model"]
for k, v in list(m["rates"].items()) + [("stream_bounce", m["stream_bounce"]),
                                        ("resident_load", m["resident_load"]),
                                        ("storage", m["storage"])]:
    print(f"{k:14s} {v.get('gb_per_s')} GB/s  {v.get('note', '')[:120]}")
PY
  cp "$LOGS"/cold_*.log "$LOGS"/probe_ar1.log "$OUT/" 2>/dev/null
}

# Session 7, second call (issue 9): the benches at 15 and 8 GiB with the committed H200 profile,
# and the planner's plan against the alternatives (each with the lent cache, as the planner's).
stage_session7b() {
  local m="$models/alpamayo-r1-10b" p=bench/profiles/h200-alpamayo-r1-10b.profile.json v
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  # The storage's own read rate (dd, O_DIRECT, 64 MiB blocks): one shard alone, then every shard
  # at once (five reads in flight); and ferry's storage probe with larger, more parallel buffers.
  local first=("$m"/*.safetensors)
  step storage_dd1 120 dd if="${first[0]}" of=/dev/null bs=64M iflag=direct
  step storage_dd_all 200 bash -c 'for f in "$0"/*.safetensors; do
      dd if="$f" of=/dev/null bs=64M iflag=direct 2>&1 | tail -1 & done; wait' "$m"
  python3 scripts/page_cache.py report "$m" >"$LOGS/cache_7b.log" 2>&1
  for v in 15GiB 8GiB; do
    step "bench_ar1_$v" 200 watched "bench_ar1_$v" "$build/ferry" bench --model "$m" --runs 3 \
      --warmup 1 --json --quiet --vram "$v" --profile "$p"
  done
  for v in 15GiB 8GiB; do
    step "alternatives_ar1_$v" 400 python3 scripts/plan_alternatives.py --ferry "$build/ferry" \
      --model "$m" --vram "$v" --profile "$p" --workdir "$LOGS" \
      --json "$OUT/alternatives_ar1_$v.json"
  done
}
# Session 7, third call: transformers + Accelerate under the same caps, side by side with the
# benches (bench/peer_transformers.py builds without the random init since this session).
stage_session7c() {
  local m="$models/alpamayo-r1-10b" p=bench/profiles/h200-alpamayo-r1-10b.profile.json v
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  for v in 15GiB 8GiB; do
    step "bench_side_ar1_$v" 200 "$build/ferry" bench --model "$m" --runs 3 --warmup 1 --json \
      --quiet --vram "$v" --profile "$p"
    step "peer_vram_$v" 400 python3 bench/peer_transformers.py --model "$m" --runs 1 \
      --warmup 1 --max-memory "$v" --json
  done
}

# Session 7, fourth call (issue 9): a fresh profile and the measured sweep, T_lb's compute term
# now the all-resident run of the sweep's own process where that is smaller.
stage_session7d() {
  planned_profile alpamayo-r1-10b ar1
  measured_sweep_ar1
}

# Session 7, fifth call (issue 11): the byte paths end to end in one run at 15 GiB on the packed
# checkpoint (every group one range, so every streamed group can be mapped): the probe's rates
# and verdicts, then the chosen plan against map, per-use copy, bounce and all resident.
stage_session7e() {
  local m="$models/alpamayo-r1-10b" packed="$models/alpamayo-r1-10b-packed"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  [ -f "$packed/config.json" ] || step pack_ar1 300 "$build/ferry" pack "$m" "$packed"
  step forced_paths_ar1 500 python3 scripts/forced_paths.py --ferry "$build/ferry" \
    --model "$packed" --vram 15GiB --json "$OUT/forced_paths_ar1.json"
  tail -8 "$LOGS/forced_paths_ar1.log" | tee "$OUT/forced_paths_ar1.txt"
}

# Session 8, first call (issue 11, the planner weighing map): the packed checkpoint profiled at
# 15 GiB with the map pass (every group read in place: C_EXE mapped), the planner's plans at 15
# and 8 GiB with it (does it map anything on this PCIe host?), then the forced paths with that
# profile, so the map row's prediction (from the mapped times) stands beside its measurement.
stage_session8a() {
  local m="$models/alpamayo-r1-10b" packed="$models/alpamayo-r1-10b-packed" v
  local p="$LOGS/ar1_packed.profile.json"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  [ -f "$packed/config.json" ] || step pack_ar1 300 "$build/ferry" pack "$m" "$packed"
  [ -f "$p" ] || step profile_map_ar1 480 "$build/ferry" profile --model "$packed" --vram 15GiB \
    --out "$p" --runs 3 --json
  cp "$p" "$OUT/" 2>/dev/null
  for v in 15GiB 8GiB; do
    step "plan_map_ar1_$v" 120 "$build/ferry" plan --model "$packed" --vram "$v" --profile "$p" \
      --json
  done
  step forced_map_ar1 400 python3 scripts/forced_paths.py --ferry "$build/ferry" \
    --model "$packed" --vram 15GiB --profile "$p" --skip-probe --json "$OUT/forced_map_ar1.json"
  tail -8 "$LOGS/forced_map_ar1.log" | tee "$OUT/forced_map_ar1.txt"
}

# Session 8, second call: the forced paths again with the committed packed profile, now that a
# session off the registered path prices its plan with its path's measured copy rate.
stage_session8b() {
  local m="$models/alpamayo-r1-10b" packed="$models/alpamayo-r1-10b-packed"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  [ -f "$packed/config.json" ] || step pack_ar1 300 "$build/ferry" pack "$m" "$packed"
  step forced_path_rates_ar1 400 python3 scripts/forced_paths.py --ferry "$build/ferry" \
    --model "$packed" --vram 15GiB --skip-probe --json "$OUT/forced_path_rates_ar1.json" \
    --profile bench/profiles/h200-alpamayo-r1-10b-packed-2026-12-02.profile.json
  tail -8 "$LOGS/forced_path_rates_ar1.log" | tee "$OUT/forced_path_rates_ar1.txt"
}

# ar1_profile STEP FILE LIMIT: the synthesized Alpamayo-R1-10B profiled at 15 GiB, median of 5, no
# map pass, written to FILE and copied to $OUT.
ar1_profile() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step "$1" "$3" "$build/ferry" profile --model "$models/alpamayo-r1-10b" --vram 15GiB \
    --out "$2" --runs 5 --json --no-map-pass
  cp "$2" "$OUT/" 2>/dev/null
}
# Session 8, third call (issue 9): a profile whose C_EXE are back to back, with what a call adds
# when it starts on an idle engine (idle_start_s), measured against four budgets of the third
# sweep: 10.29 GiB (link-bound), 15.54, 19.05 and 20.80 GiB (the expert compute-bound there
# was predicted 9-10% slow), warm-up + median of 3, and the all-resident run.
stage_session8c() {
  local m="$models/alpamayo-r1-10b" p="$LOGS/ar1_idle.profile.json"
  ar1_profile profile_idle_ar1 "$p" 300
  step bench_idle_ar1 300 "$build/ferry" bench --model "$m" --profile "$p" --runs 3 --warmup 1 \
    --sweep 11050622508,16690690860,20450736428,22330759212 --json --quiet
  cp "$LOGS/bench_idle_ar1.log" "$OUT/bench_idle_ar1.json" 2>/dev/null
}

# Session 9, first call (issue 9): where the stages' time goes between the calls (timeline dumps,
# all resident and at 15 and 8 GiB, read by scripts/timeline_gaps.py), and --thorough-search
# against the default search at 15 and 8 GiB, every plan from the committed profile.
stage_session9a() {
  local m="$models/alpamayo-r1-10b" p=bench/profiles/h200-alpamayo-r1-10b-2026-12-02b.profile.json
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step tl_resident_ar1 200 "$build/ferry" bench --model "$m" --runs 5 --warmup 1 --json --quiet \
    --timeline-out "$OUT/tl_resident_ar1.json"
  local v
  for v in 15GiB 8GiB; do
    step "tl_${v}_ar1" 200 "$build/ferry" bench --model "$m" --vram "$v" --profile "$p" --runs 3 \
      --warmup 1 --json --quiet --timeline-out "$OUT/tl_${v}_ar1.json"
    step "thorough_${v}_ar1" 200 "$build/ferry" bench --model "$m" --vram "$v" --profile "$p" \
      --runs 3 --warmup 1 --json --quiet --thorough-search
  done
  cp "$LOGS"/tl_*_ar1.log "$LOGS"/thorough_*_ar1.log "$OUT/" 2>/dev/null
}

# Session 9, second call (issue 9): a profile with the timing events' cost taken off every span
# and the stage entries measured, the all-resident run's timeline beside it, then the 12-budget
# sweep with the link check at every session's open (JSON: predicted and checked).
stage_session9b() {
  local m="$models/alpamayo-r1-10b" p="$LOGS/ar1_9.profile.json"
  ar1_profile profile_9_ar1 "$p" 300
  step tl9_resident_ar1 120 "$build/ferry" bench --model "$m" --profile "$p" --runs 5 --warmup 1 \
    --json --quiet --timeline-out "$LOGS/tl9_resident_ar1.json"
  sweep9 "$p" sweep_9_ar1
}
sweep9() {  # sweep9 PROFILE NAME: the 12-budget sweep, warm-up + median of 3
  step "$2" 560 "$build/ferry" bench --model "$models/alpamayo-r1-10b" --profile "$1" --runs 3 \
    --warmup 1 --sweep auto --sweep-points 12 --json --quiet --plot "$LOGS/$2.svg"
  cp "$LOGS/$2.log" "$OUT/$2.json" 2>/dev/null
}
# Session 9, third call: the same profile's sweep on another machine start (another process).
stage_session9c() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json" sweep_9c_ar1
}

# Session 9, fourth call: the same profile's sweep again with the copy order kept between
# inferences (StreamingProvider::begin), one bench at 20.80 GiB with its timeline beside it.
stage_session9d() {
  local m="$models/alpamayo-r1-10b" p="${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "$p" sweep_9d_ar1
  step tl9_top_ar1 120 "$build/ferry" bench --model "$m" --profile "$p" --runs 3 --warmup 1 \
    --vram 22330759212 --json --quiet --timeline-out "$LOGS/tl9_top_ar1.json"
}
# Session 9, fifth call: Qwen3-8B, a fresh profile (no map pass) and the 12-budget sweep.
stage_session9e() {
  planned_profile qwen3-8b 8b "${qwen_workload[@]}" --no-map-pass
  step sweep_9e_8b 480 "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points 12 --profile "$LOGS/8b.profile.json" --runs 1 --warmup 1 --quiet --json \
    "${qwen_workload[@]}"
  cp "$LOGS/sweep_9e_8b.log" "$OUT/sweep_9e_8b.json" 2>/dev/null
}

# Session 9, sixth call (the fifth was cut off): Qwen3-8B, a fresh profile and four budgets of
# the eighth session's sweep (its top three and one link-bound), warm-up + 1 run each.
stage_session9f() {
  planned_profile qwen3-8b 8b "${qwen_workload[@]}" --no-map-pass
  step sweep_9f_8b 300 "$build/ferry" bench --model "$models/qwen3-8b" \
    --sweep 9.92GiB,12.45GiB,13.72GiB,14.98GiB --profile "$LOGS/8b.profile.json" --runs 1 \
    --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/sweep_9f_8b.log" "$OUT/sweep_9f_8b.json" 2>/dev/null
}

# Session 9, seventh call: the top three budgets of the sweep again, each with its timeline
# written out (vision ran 1-2 ms over its prediction there when something streamed).
stage_session9g() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step sweep_9g_ar1 300 "$build/ferry" bench --model "$models/alpamayo-r1-10b" \
    --profile "${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json" --runs 3 --warmup 1 \
    --sweep 16690690860,20450736428,22330759212 --json --quiet --timeline-out "$LOGS/tl9g"
  cp "$LOGS/sweep_9g_ar1.log" "$OUT/sweep_9g_ar1.json" 2>/dev/null
}

# Session 9, eighth call: a profile whose second pass also runs beside background copies (the
# last resort for calls no copy overlapped: vision.patch, which uploads the pixels), then the
# top three budgets and 10.29 GiB with their timelines.
stage_session9h() {
  local m="$models/alpamayo-r1-10b" p="$LOGS/ar1_9h.profile.json"
  ar1_profile profile_9h_ar1 "$p" 200
  step sweep_9h_ar1 200 "$build/ferry" bench --model "$m" --profile "$p" --runs 3 --warmup 1 \
    --sweep 11050622508,16690690860,20450736428,22330759212 --json --quiet \
    --timeline-out "$LOGS/tl9h"
  cp "$LOGS/sweep_9h_ar1.log" "$OUT/sweep_9h_ar1.json" 2>/dev/null
}

# Session 10, first call (issue 9): the pixels go up as bf16 before the first call with the
# copies waiting for them. Outputs: CPU and CUDA the same on the tiny presets, every plan of
# alpamayo-tiny and of Alpamayo-R1-10B (15 and 8 GiB) the all-resident run's bytes. Then a
# profile (host.inputs_s), the all-resident run and 15 / 8 GiB benched with their timelines and
# outside peaks.
stage_session10a() {
  local m="$models/alpamayo-r1-10b" p="$LOGS/ar1_10.profile.json" v
  local args=(--json --quiet --images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)
  stage_tiny
  stream_runs alpamayo-tiny 800MB 700MB
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step resident_ar1 200 "$build/ferry" run --model "$m" "${args[@]}"
  for v in 15GiB 8GiB; do
    step "vram_ar1_$v" 200 "$build/ferry" run --model "$m" "${args[@]}" --vram "$v"
    step "same_ar1_$v" 10 same_as "$LOGS/resident_ar1.log" "$LOGS/vram_ar1_$v.log"
  done
  ar1_profile profile_10_ar1 "$p" 200
  benches10 "$p"
}
benches10() {  # benches10 PROFILE: all resident, 15 and 8 GiB benched with their timelines
  local m="$models/alpamayo-r1-10b" v
  step tl10_resident_ar1 120 "$build/ferry" bench --model "$m" --profile "$1" --runs 5 \
    --warmup 1 --json --quiet --timeline-out "$LOGS/tl10_resident_ar1.json"
  for v in 15GiB 8GiB; do
    step "tl10_${v}_ar1" 200 "$build/ferry" bench --model "$m" --vram "$v" --profile "$1" \
      --runs 3 --warmup 1 --json --quiet --timeline-out "$LOGS/tl10_${v}_ar1.json"
  done
}
# Session 10, second call (the first one's profile did not finish in 200 s, with the ninth
# session's last-resort pass beside background copies, now removed): the profile and the benches
# of the first call, then the 12-budget sweep with that profile.
stage_session10d() {
  local p="$LOGS/ar1_10.profile.json"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  ar1_profile profile_10_ar1 "$p" 120
  [ -f "$p" ] || return
  benches10 "$p"
  sweep9 "$p" sweep_10d_ar1
}
# Session 10, the 12-budget sweep with the profile of an earlier call (carried in .gpu/).
stage_session10b() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "${FERRY_PREBUILT:-.gpu}/ar1_10.profile.json" sweep_10b_ar1
}
# Session 10, third call: Qwen3-8B over 12 budgets with the committed profile of the ninth
# session (its workload has no images: nothing of this session's change is in its times).
stage_session10c() {
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step sweep_10c_8b 560 "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points 12 --profile bench/profiles/h200-qwen3-8b-1500-2026-12-02c.profile.json \
    --runs 1 --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/sweep_10c_8b.log" "$OUT/sweep_10c_8b.json" 2>/dev/null
}

# Session 11: the sweeps with each session's budget its fixed bytes at its open plus the weights'
# share (the top budget all resident) and the driver's peak per budget, each with a committed
# profile from another machine start: Alpamayo-R1-10B (profile d, the tenth session's A-C) and
# Qwen3-8B (profile 02c).
stage_session11a() {
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 bench/profiles/h200-alpamayo-r1-10b-2026-12-02d.profile.json sweep_11a_ar1
}
# Session 11, the warm-up question in one call (the machine is given back after 30 s idle, so
# every call starts a fresh one): the two lowest budgets twice, one process each, then the
# 12-budget sweep; the link's state sampled every second throughout, and each process's link
# peak at its start in its JSON (machine.h2d_gbs).
stage_session11f() {
  nvidia-smi --query-gpu=timestamp,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem,power.draw,pstate \
    --format=csv -l 1 >"$LOGS/smi_11f.csv" 2>&1 &
  local smi=$! n
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  for n in 1 2; do
    step "sweep_11f${n}_ar1" 200 "$build/ferry" bench --model "$models/alpamayo-r1-10b" --runs 3 \
      --warmup 1 --sweep 1649879340,3557165100 --json --quiet \
      --profile bench/profiles/h200-alpamayo-r1-10b-2026-12-02d.profile.json
    cp "$LOGS/sweep_11f${n}_ar1.log" "$OUT/sweep_11f${n}_ar1.json" 2>/dev/null
  done
  sweep9 bench/profiles/h200-alpamayo-r1-10b-2026-12-02d.profile.json sweep_11f_ar1
  kill $smi 2>/dev/null
  cp "$LOGS/smi_11f.csv" "$OUT/" 2>/dev/null
}
# Session 11, last call: profiles whose copies are timed after the registration, in passes
# (measure_group_copies), each used in its own process: Alpamayo-R1-10B's 12-budget sweep, then
# Qwen3-8B's profile and the top five budgets of session11b's sweep (its profile from another
# process had its copies 4-20% slow on the first 60% of groups).
stage_session11g() {
  nvidia-smi --query-gpu=timestamp,pcie.link.gen.current,pcie.link.width.current,clocks.sm,clocks.mem,power.draw,pstate \
    --format=csv -l 1 >"$LOGS/smi_11g.csv" 2>&1 &
  local smi=$! q="$LOGS/qwen_11.profile.json"
  ar1_profile profile_11_ar1 "$LOGS/ar1_11.profile.json" 120
  [ -f "$LOGS/ar1_11.profile.json" ] && sweep9 "$LOGS/ar1_11.profile.json" sweep_11g_ar1
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step profile_11_8b 120 "$build/ferry" profile --model "$models/qwen3-8b" --vram 15GiB --out "$q" \
    --runs 5 --json --no-map-pass "${qwen_workload[@]}"
  cp "$q" "$OUT/" 2>/dev/null
  [ -f "$q" ] && step sweep_11g_8b 200 "$build/ferry" bench --model "$models/qwen3-8b" \
    --sweep 10680945870,12038716436,13396487002,14754257568,16112028134 --profile "$q" \
    --runs 1 --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/sweep_11g_8b.log" "$OUT/sweep_11g_8b.json" 2>/dev/null
  kill $smi 2>/dev/null
  cp "$LOGS/smi_11g.csv" "$OUT/" 2>/dev/null
}
stage_session11b() {
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step sweep_11b_8b 560 "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points 12 --profile bench/profiles/h200-qwen3-8b-1500-2026-12-02c.profile.json \
    --runs 1 --warmup 1 --quiet --json --plot "$LOGS/sweep_11b_8b.svg" "${qwen_workload[@]}"
  cp "$LOGS/sweep_11b_8b.log" "$OUT/sweep_11b_8b.json" 2>/dev/null
}

# Session 7, seventh call (issue 11): a host smaller than the checkpoint, emulated with a memory
# cgroup of 8 GiB (cgroup v2 or v1; nothing else on the machine is limited) around one process
# at a time, the checkpoint's pages dropped first: auto (which now reads the cgroup's room) and
# storage run; registered has to fault and pin 22 GB in 8 GiB.
lowmem() {  # lowmem NAME LIMIT_S ARGS...: ferry run inside the cgroup
  local name=$1 limit=$2; shift 2
  python3 scripts/page_cache.py evict "$models/alpamayo-r1-10b" >/dev/null 2>&1
  step "$name" "$limit" bash -c 'echo $$ >"$0/cgroup.procs" && exec "$@"' "$cg" "$build/ferry" run \
    --model "$models/alpamayo-r1-10b" --vram 15GiB --json --quiet "$@"
}
stage_session7f() {
  cg=/sys/fs/cgroup/ferry_lowmem
  if mkdir -p "$cg" 2>/dev/null && echo 8589934592 >"$cg/memory.max" 2>/dev/null; then
    echo "cgroup v2: $cg" >"$LOGS/cgroup.log"
  else
    rmdir "$cg" 2>/dev/null
    cg=/sys/fs/cgroup/memory/ferry_lowmem
    mkdir -p "$cg" && echo 8589934592 >"$cg/memory.limit_in_bytes" ||
      { echo "no memory cgroup here" >"$LOGS/cgroup.log"; return; }
    echo "cgroup v1: $cg" >"$LOGS/cgroup.log"
  fi
  export cg
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step resident_ar1 200 "$build/ferry" run --model "$models/alpamayo-r1-10b" --json --quiet
  lowmem lowmem_auto 200
  step same_lowmem_auto 10 same_as "$LOGS/resident_ar1.log" "$LOGS/lowmem_auto.log"
  lowmem lowmem_registered 90 --host-path registered
  cat "$cg"/memory.peak "$cg"/memory.max_usage_in_bytes "$cg"/memory.events 2>/dev/null \
    >"$LOGS/cgroup_usage.log"
  start_table "$LOGS"/lowmem_*.log | tee "$OUT/lowmem_ar1.txt"
}

# The start in a short device budget and its table.
start_quick_table() {
  stage_start_quick
  start_table "$LOGS"/start_serial.log "$LOGS"/start_overlap.log "$LOGS"/start_overlap2.log |
    tee "$OUT/start_ar1.txt"
}
# start_table LOG...: one line per `run --json` log, its "start" by part.
start_table() {
  python3 - "$@" <<'PY'
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
        s = j["start"]
    except Exception:
        continue
    parts = ["config_s", "checkpoint_s", "backend_s", "tier_s", "plan_s", "reserve_s", "upload_s",
             "upload_wait_s", "register_wait_s", "slots_s", "fallback_s", "runner_s", "other_s",
             "register_s", "register_hidden_s"]
    print(f"{path.rsplit('/', 1)[-1][:-4]}: total {s['total_s']:.3f} s (before main "
          f"{s.get('before_main_s')}), " + ", ".join(f"{k[:-2]} {s[k]:.3f}" for k in parts if k in s) +
          f", {s['register_pieces']} pieces on {s['register_threads']} threads; planning "
          + json.dumps(s.get("plan_parts")) + "; backend " + json.dumps(s.get("backend_parts"))
          + (f"; upload {s['upload_bytes'] / 1e9:.2f} GB" if s.get("upload_bytes") else "")
          + ("; page cache " + json.dumps(s["page_cache"]) if "page_cache" in s else "")
          + (f"; host path {j.get('host_rate', {}).get('path')}, first inference "
             f"{j['time_s']['total']:.3f} s" if "time_s" in j else ""))
PY
}
# Why planning is 3-4x slower beside the registration (fifth session): the overlapped start with
# smaller and larger registration pieces, planning's parts printed.
stage_start_pieces() {
  stage_start_quick
  local m="$models/alpamayo-r1-10b" args=(--json --quiet --vram 15GiB --images 16
    --image-size 320x576 --prompt-tokens 3007 --tokens 21) p
  for p in 64MiB 1GiB; do
    step "start_piece_$p" 300 "$build/ferry" run --model "$m" "${args[@]}" --register-piece "$p"
    step "same_start_piece_$p" 10 same_as "$LOGS/start_serial.log" "$LOGS/start_piece_$p.log"
  done
  start_table "$LOGS"/start_serial.log "$LOGS"/start_overlap.log "$LOGS"/start_overlap2.log \
    "$LOGS"/start_piece_*.log | tee "$OUT/start_ar1.txt"
}

# Fast start (issue 11 item 5): process start to first inference ready at 15 GiB, warm page
# cache, the registration overlapped (default) against the old order (one call per shard, all
# before planning) and with more registering threads; run --json's "start" per log, same bytes.
stage_start_ar1() {  # process start to first inference ready at 15 GiB: serial, overlapped, threads
  stage_start_quick  # the page cache warmed, the old order against the overlapped one
  local m="$models/alpamayo-r1-10b" args=(--json --quiet --vram 15GiB --images 16
    --image-size 320x576 --prompt-tokens 3007 --tokens 21) t
  for t in 2 4; do
    step "start_threads$t" 300 "$build/ferry" run --model "$m" "${args[@]}" --register-threads "$t"
    step "same_start_threads$t" 10 same_as "$LOGS/start_serial.log" "$LOGS/start_threads$t.log"
  done
  start_table "$LOGS"/start_serial.log "$LOGS"/start_overlap.log "$LOGS"/start_threads*.log |
    tee "$OUT/start_ar1.txt"
}

report() {  # the table of every step, then the summaries of the benches that ran
  echo
  echo "== gpu_check on $(sed -n 2p "$LOGS/gpu.txt")"
  printf '%s\n' "${table[@]}"
  # Demand layering: every budgeted bench, its stages, bytes over the link and peaks.
  python3 - "$LOGS"/bench_vram_*.log <<'PY' 2>/dev/null | tee "$OUT/vram_summary.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        continue
    st, peak = j["stages"], j["device_peak_bytes"]
    print(path.rsplit("/", 1)[-1][11:-4], f"total {st['total']['median_s']:.3f}s",
          " ".join(f"{k} {v['median_s']:.3f}s" for k, v in st.items() if k != "total"),
          f"| link {j['streamed_bytes_per_run']/1e9:.1f} GB/run busy {100*st['total']['link_busy']:.0f}%",
          f"| driver peak {peak.get('outside', 0)/2**30:.2f} GiB of {j['plan']['memory'].get('budget', 0)/2**30:.2f}",
          f"| resident {j['plan']['resident_bytes']/2**30:.2f} GiB slots {j['plan']['slots']}")
PY
  # Demand layering: outside peaks (nvidia-smi, MiB over the idle device) per budget.
  local f
  for f in "$LOGS"/*.smi; do [ -f "$f" ] && echo "$(basename "$f" .smi): peak $(cat "$f") MiB (nvidia-smi)"; done | tee "$OUT/vram_peaks.txt"
  # Stage medians of every bench that ran (ms; floor/time in %).
  python3 - "$LOGS"/bench_*.log <<'PY' 2>/dev/null | tee "$OUT/bench_summary.txt"
import json, sys
for path in sys.argv[1:]:
    try:
        j = json.loads(open(path).read().strip().splitlines()[-1])
    except Exception:
        continue
    if "stages" not in j:
        continue
    row = [path.rsplit("/", 1)[-1][6:-4], "graphs=" + str(j.get("graphs", {}).get("on"))]
    for name, st in j["stages"].items():
        row.append(f"{name} {st['median_s']*1e3:.1f}ms ({100*st['floor_s']/st['median_s']:.0f}%)")
    print(" | ".join(row))
PY
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
