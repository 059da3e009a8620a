#!/usr/bin/env bash
# GPU stages that answer one question and are not among scripts/gpu_check.sh's lasting checks:
# the CUDA op micro-benchmarks, bench's op profile and its runs with graphs off, outputs under
# many budgets and flag plans, real inputs at full size, the planner's plans and the alternatives
# to them, host memory of concurrent processes, the map path, the CUDA runtime's own memory.
# Each was a stage of gpu_check.sh, unchanged. They use its stage mechanism (step, watched,
# same_as; logs under $OUT, the short table last), so its stages can be named in the same call:
#
#   bench/experiments/on_request.sh build stream_tiny map_tiny   (--help: every stage)
# shellcheck source-path=SCRIPTDIR source=../../scripts/gpu_check.sh
source "$(dirname "${BASH_SOURCE[0]}")/../../scripts/gpu_check.sh"
stage_sources+=("${BASH_SOURCE[0]}")

stage_ops_bench() {  # the CUDA op micro-benchmarks (bench/cuda_ops_bench.cpp), built here
  step build_ops_bench 400 cmake --build "$build" -j "$(nproc)" --target ferry_cuda_bench
  step ops_bench 300 "$build/bench/ferry_cuda_bench"
}
# --- where the time goes ---------------------------------------------------------------------
profile_one() {  # every op timed alone (ungraphed): where each stage's time goes
  synth "$1" >/dev/null 2>&1
  step "profile_$1" 400 "$build/ferry" bench --model "$models/$1" --runs 1 --warmup 1 --op-profile \
    --op-profile-top 25
}
stage_profile_ar1() { profile_one alpamayo-r1-10b; }  # bench --op-profile, Alpamayo-R1-10B
stage_profile_8b() { profile_one qwen3-8b; }  # the same, Qwen3-8B
stage_bench_ar1_nographs() {  # ferry bench, Alpamayo-R1-10B, every op launched alone (--graphs off)
  bench_one alpamayo-r1-10b _nographs --graphs off
}
stage_bench_8b_nographs() { bench_one qwen3-8b _nographs --graphs off; }  # the same, Qwen3-8B
# --- demand layering (issue 8) ---------------------------------------------------------------
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
stage_stream_tiny() {  # tiny presets under budgets and flag plans, vs all resident
  # (budgets above the CUDA runtime's own share, ~0.4-0.6 GB, counted)
  stream_runs alpamayo-tiny 800MB 700MB
  stream_runs qwen3-tiny 700MB
}
stage_stream_ar1() {  # Alpamayo-R1-10B, 15 GiB down to 2.3 GiB and flag plans, vs all resident
  stream_runs alpamayo-r1-10b 15GiB 12GiB 8GiB 4GiB 2.5GiB 2.3GiB
}

# Issue 10: ferry run on real inputs, full size; outputs come back in $OUT.
stage_inputs_ar1() {  # real inputs at full size: text, trajectory, picture; the prompt vs transformers
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
# --- the planner (issue 9) ------------------------------------------------------------------
# plan_X: a measured profile under a 15 GiB budget (gpu_check.sh's planned_profile), the
# planner's plans at 15 and 8 GiB, the predicted sweep. alternatives_X: at 15 and 8 GiB the
# planner's plan against the alternatives issue 9 names, predicted and measured side by side
# (scripts/plan_alternatives.py). Each stage fits one device call.
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
stage_plan_ar1() { plan_model alpamayo-r1-10b ar1; }  # plans at 15 and 8 GiB, the predicted sweep
stage_alternatives_ar1() { alternatives_model alpamayo-r1-10b ar1; }  # the plan vs hand-made ones
stage_plan_8b() { plan_model qwen3-8b 8b "${qwen_workload[@]}"; }  # the same, Qwen3-8B
stage_alternatives_8b() {  # the same, Qwen3-8B
  alternatives_model qwen3-8b 8b "${qwen_workload[@]}"
}

# Host memory of 1, 2, 4 concurrent processes on the full checkpoint (issue 11 d.4): anonymous
# memory per process and the machine's used memory growth (bench/host_memory.py).
stage_host_memory_ar1() {  # RssAnon/RssFile of 1, 2, 4 concurrent processes, full size
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step host_memory_ar1 400 python3 bench/host_memory.py --ferry "$build/ferry" \
    --model "$models/alpamayo-r1-10b" --counts 1,2,4 --json "$OUT/host_memory_ar1.json" \
    -- --vram 15GiB --runs 2
}

# The map path (issue 11 d.3): a packed tiny checkpoint with every layer, then every group, read
# in place by its kernels from the registered mapping, against the all-resident bytes; memcheck.
stage_map_tiny() {  # the map path on packed tiny checkpoints against all resident; memcheck
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
stage_runtime() {  # the CUDA context's and cuBLASLt's own device memory, by stack limit
  local ctx=$build/ferry_context_memory
  [ -x "$ctx" ] || ctx=$build/bench/ferry_context_memory
  step context_default 60 "$ctx"
  step context_stack256 60 "$ctx" --stack 256
  step context_stack0 60 "$ctx" --stack 0
}

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
