#!/usr/bin/env bash
# Replays of past GPU sessions' measurements (docs/benchmarks.md has their results): each stage
# is one device call of a session as it ran then, with that session's budgets, flags and
# committed or carried profiles, kept to ask the same question again. They were stages of
# scripts/gpu_check.sh, unchanged; they use its stage mechanism and on_request.sh's stages:
#
#   FERRY_PREBUILT=.gpu bench/experiments/sessions.sh build session9b   (--help: every stage)
# shellcheck source-path=SCRIPTDIR source=on_request.sh
source "$(dirname "${BASH_SOURCE[0]}")/on_request.sh"
stage_sources+=("${BASH_SOURCE[0]}")

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
stage_quick_all() {  # one short call: tiny plans, host paths, memcheck, budgets, profile, probe
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
stage_sweep_quick() {  # a streamed profile and its sweep, real inputs, bounce/pageable at 15 GiB
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

# Session 4, first call: the layer-part groups and the smaller stack limit on CUDA (tiny plans
# and the full-size plans against the all-resident bytes), the budgeted benches at 15 and 8 GiB,
# a profile under the 15 GiB plan (the default) and the measured sweep against its prediction.
stage_session4a() {  # session 4, call 1: stack limit, plans vs all resident, benches, sweep
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
stage_session4b() {  # session 4, call 2: profile and sweep, the start, the map path
  local m="$models/alpamayo-r1-10b"
  planned_profile alpamayo-r1-10b ar1
  measured_sweep_ar1
  stage_start_ar1
  stage_map_tiny
}
# The Qwen3-8B sweep in a short device budget: POINTS budgets, a warm-up and one timed run each.
short_sweep_8b() {  # short_sweep_8b POINTS LIMIT
  planned_profile qwen3-8b 8b "${qwen_workload[@]}"
  step bench_sweep_8b "$2" "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points "$1" --profile "$LOGS/8b.profile.json" --runs 1 --warmup 1 --quiet --json \
    --plot "$OUT/bench_sweep_8b.svg" "${qwen_workload[@]}"
  cp "$LOGS/bench_sweep_8b.log" "$OUT/bench_sweep_8b.json" 2>/dev/null
}
stage_sweep_8b_quick() { short_sweep_8b 6 420; }  # Qwen3-8B over 6 budgets, one run each
# Third call: the planner against the alternatives at 15 and 8 GiB, host memory of concurrent
# processes, the Qwen3-8B sweep.
stage_session4c() {  # session 4, call 3: alternatives, host memory, the Qwen3-8B sweep
  stage_alternatives_ar1
  stage_host_memory_ar1
  stage_sweep_8b
  cp "$LOGS/bench_sweep_8b.log" "$OUT/bench_sweep_8b.json" 2>/dev/null
}

# Session 5, first call: the start after the planner's speedup, the outside peaks again (2.5 GiB
# since the page tables are budgeted), the budgeted benches, and the raw timelines of a profile
# under the 15 GiB plan and of one all resident (where each call's compute span goes).
stage_session5a() {  # session 5, call 1: the start, outside peaks, benches, raw timelines
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
stage_session5b() {  # session 5, call 2: the start, a version-2 profile, its benches, sweep
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
stage_session5c() {  # session 5, call 3: the profile with its sequential pass, sweep, start
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
stage_sweep_8b_12() { short_sweep_8b 12 560; }  # session 5, call 4: Qwen3-8B over 12 budgets

# Fifth call: Qwen3-8B profiled with its pass beside background copies (all resident at
# 15 GiB, so no copy of its own showed the slowdown), measured at the top three budgets of the
# 12-point sweep; Alpamayo's 15 and 8 GiB benches with a fresh profile.
stage_session5e() {  # session 5, call 5: Qwen3-8B beside background copies; Alpamayo 15/8 GiB
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
stage_session6a() {  # session 6, call 1: the lent cache, benches with and without, sweep
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
stage_session6b() {  # session 6, call 2: vision lent too, knapsack; benches, sweep, Qwen3-8B top
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
stage_session6c() {  # session 6, call 3: region reserved first; carried-profile benches, peer
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
stage_session7a() {  # session 7, call 1: cold starts, registered vs storage; probe; pieces
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
stage_session7b() {  # session 7, call 2: dd rates; committed-profile benches; alternatives
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
stage_session7c() {  # session 7, call 3: transformers + Accelerate beside the benches
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
stage_session7d() {  # session 7, call 4: a fresh profile and the measured sweep
  planned_profile alpamayo-r1-10b ar1
  measured_sweep_ar1
}

# Session 7, fifth call (issue 11): the byte paths end to end in one run at 15 GiB on the packed
# checkpoint (every group one range, so every streamed group can be mapped): the probe's rates
# and verdicts, then the chosen plan against map, per-use copy, bounce and all resident.
stage_session7e() {  # session 7, call 5: forced byte paths on the packed checkpoint
  local m="$models/alpamayo-r1-10b" packed="$models/alpamayo-r1-10b-packed"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  [ -f "$packed/config.json" ] || step pack_ar1 300 "$build/ferry" pack "$m" "$packed"
  step forced_paths_ar1 500 python3 scripts/forced_paths.py --ferry "$build/ferry" \
    --model "$packed" --vram 15GiB --json "$OUT/forced_paths_ar1.json"
  tail -8 "$LOGS/forced_paths_ar1.log" | tee "$OUT/forced_paths_ar1.txt"
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
stage_session7f() {  # session 7, call 7: a host smaller than the checkpoint (8 GiB cgroup)
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

# Session 8, first call (issue 11, the planner weighing map): the packed checkpoint profiled at
# 15 GiB with the map pass (every group read in place: C_EXE mapped), the planner's plans at 15
# and 8 GiB with it (does it map anything on this PCIe host?), then the forced paths with that
# profile, so the map row's prediction (from the mapped times) stands beside its measurement.
stage_session8a() {  # session 8, call 1: packed profile with the map pass, plans, forced paths
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
stage_session8b() {  # session 8, call 2: forced paths with the committed packed profile
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
stage_session8c() {  # session 8, call 3: the idle_start_s profile at four sweep budgets
  local m="$models/alpamayo-r1-10b" p="$LOGS/ar1_idle.profile.json"
  ar1_profile profile_idle_ar1 "$p" 300
  step bench_idle_ar1 300 "$build/ferry" bench --model "$m" --profile "$p" --runs 3 --warmup 1 \
    --sweep 11050622508,16690690860,20450736428,22330759212 --json --quiet
  cp "$LOGS/bench_idle_ar1.log" "$OUT/bench_idle_ar1.json" 2>/dev/null
}

# Session 9, first call (issue 9): where the stages' time goes between the calls (timeline dumps,
# all resident and at 15 and 8 GiB, read by scripts/timeline_gaps.py), and --thorough-search
# against the default search at 15 and 8 GiB, every plan from the committed profile.
stage_session9a() {  # session 9, call 1: timelines resident and at 15/8 GiB; thorough search
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
stage_session9b() {  # session 9, call 2: profile without the events' cost; 12-budget sweep
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
stage_session9c() {  # session 9, call 3: that sweep again (carried .gpu/ar1_9.profile.json)
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json" sweep_9c_ar1
}

# Session 9, fourth call: the same profile's sweep again with the copy order kept between
# inferences (StreamingProvider::begin), one bench at 20.80 GiB with its timeline beside it.
stage_session9d() {  # session 9, call 4: copy order kept between inferences; 20.80 GiB timeline
  local m="$models/alpamayo-r1-10b" p="${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "$p" sweep_9d_ar1
  step tl9_top_ar1 120 "$build/ferry" bench --model "$m" --profile "$p" --runs 3 --warmup 1 \
    --vram 22330759212 --json --quiet --timeline-out "$LOGS/tl9_top_ar1.json"
}
# Session 9, fifth call: Qwen3-8B, a fresh profile (no map pass) and the 12-budget sweep.
stage_session9e() {  # session 9, call 5: Qwen3-8B, a fresh profile and the 12-budget sweep
  planned_profile qwen3-8b 8b "${qwen_workload[@]}" --no-map-pass
  step sweep_9e_8b 480 "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points 12 --profile "$LOGS/8b.profile.json" --runs 1 --warmup 1 --quiet --json \
    "${qwen_workload[@]}"
  cp "$LOGS/sweep_9e_8b.log" "$OUT/sweep_9e_8b.json" 2>/dev/null
}

# Session 9, sixth call (the fifth was cut off): Qwen3-8B, a fresh profile and four budgets of
# the eighth session's sweep (its top three and one link-bound), warm-up + 1 run each.
stage_session9f() {  # session 9, call 6: Qwen3-8B at four budgets
  planned_profile qwen3-8b 8b "${qwen_workload[@]}" --no-map-pass
  step sweep_9f_8b 300 "$build/ferry" bench --model "$models/qwen3-8b" \
    --sweep 9.92GiB,12.45GiB,13.72GiB,14.98GiB --profile "$LOGS/8b.profile.json" --runs 1 \
    --warmup 1 --quiet --json "${qwen_workload[@]}"
  cp "$LOGS/sweep_9f_8b.log" "$OUT/sweep_9f_8b.json" 2>/dev/null
}

# Session 9, seventh call: the top three budgets of the sweep again, each with its timeline
# written out (vision ran 1-2 ms over its prediction there when something streamed).
stage_session9g() {  # session 9, call 7: the top three budgets with timelines
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  step sweep_9g_ar1 300 "$build/ferry" bench --model "$models/alpamayo-r1-10b" \
    --profile "${FERRY_PREBUILT:-.gpu}/ar1_9.profile.json" --runs 3 --warmup 1 \
    --sweep 16690690860,20450736428,22330759212 --json --quiet --timeline-out "$LOGS/tl9g"
  cp "$LOGS/sweep_9g_ar1.log" "$OUT/sweep_9g_ar1.json" 2>/dev/null
}

# Session 9, eighth call: a profile whose second pass also runs beside background copies (the
# last resort for calls no copy overlapped: vision.patch, which uploads the pixels), then the
# top three budgets and 10.29 GiB with their timelines.
stage_session9h() {  # session 9, call 8: second pass beside copies; four budgets, timelines
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
stage_session10a() {  # session 10, call 1: bf16 pixels; outputs, plans, profile, benches
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
stage_session10d() {  # session 10, call 2: the profile and benches again, 12-budget sweep
  local p="$LOGS/ar1_10.profile.json"
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  ar1_profile profile_10_ar1 "$p" 120
  [ -f "$p" ] || return
  benches10 "$p"
  sweep9 "$p" sweep_10d_ar1
}
# Session 10, the 12-budget sweep with the profile of an earlier call (carried in .gpu/).
stage_session10b() {  # session 10: the 12-budget sweep, carried .gpu/ar1_10.profile.json
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 "${FERRY_PREBUILT:-.gpu}/ar1_10.profile.json" sweep_10b_ar1
}
# Session 10, third call: Qwen3-8B over 12 budgets with the committed profile of the ninth
# session (its workload has no images: nothing of this session's change is in its times).
stage_session10c() {  # session 10, call 3: Qwen3-8B over 12 budgets, committed profile 02c
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
stage_session11a() {  # session 11, call 1: Alpamayo over 12 budgets, committed profile d
  synth alpamayo-r1-10b >"$LOGS/synth_alpamayo-r1-10b.log" 2>&1
  sweep9 bench/profiles/h200-alpamayo-r1-10b-2026-12-02d.profile.json sweep_11a_ar1
}
# Session 11, the warm-up question in one call (the machine is given back after 30 s idle, so
# every call starts a fresh one): the two lowest budgets twice, one process each, then the
# 12-budget sweep; the link's state sampled every second throughout, and each process's link
# peak at its start in its JSON (machine.h2d_gbs).
stage_session11f() {  # session 11, call 3: the two lowest budgets twice, the sweep; link sampled
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
stage_session11g() {  # session 11, call 5: profiles timed in passes; both sweeps
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
stage_session11b() {  # session 11, call 4: Qwen3-8B over 12 budgets, committed profile 02c
  synth qwen3-8b >"$LOGS/synth_qwen3-8b.log" 2>&1
  step sweep_11b_8b 560 "$build/ferry" bench --model "$models/qwen3-8b" --sweep auto \
    --sweep-points 12 --profile bench/profiles/h200-qwen3-8b-1500-2026-12-02c.profile.json \
    --runs 1 --warmup 1 --quiet --json --plot "$LOGS/sweep_11b_8b.svg" "${qwen_workload[@]}"
  cp "$LOGS/sweep_11b_8b.log" "$OUT/sweep_11b_8b.json" 2>/dev/null
}

# The start in a short device budget and its table.
start_quick_table() {
  stage_start_quick
  start_table "$LOGS"/start_serial.log "$LOGS"/start_overlap.log "$LOGS"/start_overlap2.log |
    tee "$OUT/start_ar1.txt"
}

# Why planning is 3-4x slower beside the registration (fifth session): the overlapped start with
# smaller and larger registration pieces, planning's parts printed.
stage_start_pieces() {  # the overlapped start with 64 MiB and 1 GiB registration pieces
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

if [[ ${BASH_SOURCE[0]} == "$0" ]]; then main "$@"; fi
