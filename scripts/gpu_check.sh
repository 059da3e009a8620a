#!/usr/bin/env bash
# The checks the GPU machine must keep passing, each a stage a caller names (--help lists them).
# Full logs go under $OUT (the device tool brings them back); a short table is printed last. Each
# step is time-boxed and independent of the others.
#   scripts/gpu_check.sh STAGE|GROUP...  in the order given; --help (or nothing) lists them
# scripts/gpu_prebuild.sh builds the binaries on the development machine into .gpu/, with the
# few shared libraries they need; FERRY_PREBUILT=.gpu makes every stage use them (carry .gpu).
# bench/experiments/ sources this file: replays of past sessions, one-question stages.
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
  local re='^stage_([a-z0-9_]+)\(\) \{([^#]*\})? *(# *(.*))?' f l g names
  echo "usage: ${0##*/} STAGE|GROUP...  (in the order given; logs under \$OUT, FERRY_PREBUILT=.gpu)"
  for f in "${stage_sources[@]}"; do
    echo "stages (${f##*/}):"
    while IFS= read -r l; do
      [[ $l =~ $re ]] && printf '  %-19s%s\n' "${BASH_REMATCH[1]}" "${BASH_REMATCH[4]}"
    done <"$f"
  done
  echo "groups:"
  for g in "${groups[@]}"; do names=(${g#*:}) && printf '  %-19s%s\n' "${g%%:*}" "${names[*]}"; done
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
    declare -F "stage_$s" >/dev/null ||
      { echo "unknown stage $s (--help lists them; replays: bench/experiments/)" >&2; exit 2; }
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
  [ -n "${FERRY_PREBUILT:-}" ] && { step prebuilt 10 "$build/ferry" --help; return; }
  step configure 120 cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DFERRY_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DFERRY_PYTHON=OFF
  step build 400 cmake --build "$build" -j "$(nproc)" --target ferry ferry_tests ferry_cuda_tests \
    ferry_vision_dump ferry_expert_dump ferry_exponent_decode_bench
}
stage_harness() { step cuda_harness 300 "$build/tests/ferry_cuda_tests"; }  # the CUDA op harness
stage_smem99() {  # harness and tiny models, shared memory capped at 99 KB as on consumer cards
  local LOGS=$LOGS/smem99; mkdir -p "$LOGS"; export FERRY_MAX_SHARED_BYTES=101376
  stage_harness; stage_tiny; unset FERRY_MAX_SHARED_BYTES; }
stage_decode() {  # the CUDA exponent decoder: its tests, memcheck on hostile input, GB/s by size
  step decode_tests 120 "$build/tests/ferry_cuda_tests" --gtest_filter='ExponentDecode*'
  step decode_memcheck 300 compute-sanitizer --tool memcheck --error-exitcode 1 \
    "$build/tests/ferry_cuda_tests" --gtest_filter='ExponentDecode.Hostile*:ExponentDecode.Random*'
  step decode_bench 200 "$build/bench/ferry_exponent_decode_bench" --sizes 1,8,32,128,512 --init both; }
stage_unit() { step unit_tests 300 "$build/tests/ferry_tests" --gtest_brief=1; }  # the unit tests
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
stage_bench_ar1() { bench_one alpamayo-r1-10b; }  # ferry bench, Alpamayo-R1-10B, all resident
stage_peer_ar1() { peer_one alpamayo-r1-10b; }  # transformers, same workload, timed
stage_bench_8b() { bench_one qwen3-8b; }  # ferry bench, Qwen3-8B, all resident
stage_peer_8b() { peer_one qwen3-8b; }  # transformers on Qwen3-8B, timed

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
stage_bench_vram_ar1() {  # ferry bench at 15/12/8 GiB, pipelined and sequential, outside peaks
  local v
  for v in 15GiB 12GiB 8GiB; do bench_vram alpamayo-r1-10b "$v"; done
  for v in 15GiB 12GiB 8GiB; do bench_vram alpamayo-r1-10b "$v" sequential 1; done
}
stage_peer_vram() {  # transformers + Accelerate under 15/12/8 GiB caps (slow: one timed run each)
  local v
  synth alpamayo-r1-10b >/dev/null 2>&1
  for v in 15GiB 12GiB 8GiB; do
    step "peer_vram_$v" 500 python3 bench/peer_transformers.py --model "$models/alpamayo-r1-10b" \
      --runs 1 --warmup 0 --max-memory "$v" --json
  done
}
# --- residency planner, profiler, predictor (issue 9) ---------------------------------------
# A measured profile under a 15 GiB budget (what a 16 GB card could run), kept in $LOGS for the
# next stage on a warm machine (measured again on a fresh one) and copied to $OUT; the measured
# sweep over the planner's budgets against its prediction. Each stage fits one device call.
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
sweep_model() {  # sweep_model PRESET NAME RUNS [WORKLOAD...]
  local preset=$1 name=$2 runs=$3; shift 3
  planned_profile "$preset" "$name" "$@"
  step "bench_sweep_$name" 590 "$build/ferry" bench --model "$models/$preset" --sweep auto \
    --profile "$LOGS/$name.profile.json" --runs "$runs" --warmup 1 --quiet --json \
    --plot "$OUT/bench_sweep_$name.svg" "$@"
}
qwen_workload=(--prompt-tokens 1500 --tokens 128)
stage_sweep_ar1() { sweep_model alpamayo-r1-10b ar1 3; }  # profile, measured sweep vs prediction
stage_sweep_8b() { sweep_model qwen3-8b 8b 1 "${qwen_workload[@]}"; }  # the same, Qwen3-8B
# --- byte paths (issue 11; issue 8 d.1) ------------------------------------------------------
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

# The start at 15 GiB in a short device budget: the old order against the overlapped one.
stage_start_quick() {  # the start at 15 GiB: the old serial order against the overlapped one
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
