#!/usr/bin/env bash
# Fifteenth session (2026-12-04): compressed groups on the H200 (issue 24). Needs .gpu
# (scripts/gpu_prebuild.sh; carry .gpu). Stages, each sized for one device call:
#   a  the decode tests; tiny models streamed/resident compressed against all resident, CPU and
#      CUDA, memcheck on a compressed streamed run; synthesize alpamayo-r1-10b --init normal and
#      run it all resident (the reference bytes)
#   b  alpamayo-r1-10b at 8 GiB: raw and --compress-at-open (the planner's forms), output bytes
#      against all resident, ferry bench (warm-up + median of 3) with the outside peaks
#   c  the same at 15 and 4 GiB
# Logs in /tmp/s15 (one archive of them under $OUT: the device tool brings back 8 files); a
# summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${OUT:-out}; mkdir -p "$DEST"
OUT=/tmp/s15; rm -rf "$OUT"; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.gpu/lib
F=.gpu/ferry; M=/tmp/m
W=(--images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)  # the reference workload
. bench/experiments/common.sh  # last, same, summary
all_groups() { "$F" inspect "$1" --json | python3 -c \
  "import json,sys; print(','.join(g['name'] for g in json.load(sys.stdin)['groups'] if not g['name'].endswith('.embed')))"; }  # the embedding stays on the host when nothing is resident
synth_ar1() {
  [ -f "$M/ar1n/config.json" ] && return
  /usr/bin/time -f "synth %e s" "$F" synth --preset alpamayo-r1-10b --out "$M/ar1n" --seed 1 \
    --init normal >"$OUT/synth_ar1.log" 2>&1; tail -n 1 "$OUT/synth_ar1.log"
}
ref_ar1() {  # the all-resident bytes, kept on the machine between calls
  [ -f "$M/ar1_all.json" ] || /usr/bin/time -f "run all resident %e s" "$F" run --model \
    "$M/ar1n" "${W[@]}" --json --quiet >"$M/ar1_all.json" 2>"$OUT/ar1_all.err"
  cp "$M/ar1_all.json" "$OUT/"
}
bench_pair() {  # bench_pair BUDGET: raw and compressed runs and benches
  local v=$1
  "$F" run --model "$M/ar1n" "${W[@]}" --vram "$v" --json --quiet >"$OUT/ar1_${v}_raw.json" \
    2>"$OUT/ar1_${v}_raw.err"
  /usr/bin/time -f "run compressed %e s" "$F" run --model "$M/ar1n" "${W[@]}" --vram "$v" \
    --compress-at-open --json --quiet >"$OUT/ar1_${v}_z.json" 2>"$OUT/ar1_${v}_z.err"
  tail -n 2 "$OUT/ar1_${v}_z.err"
  same "$OUT/ar1_all.json" "$OUT/ar1_${v}_raw.json" "$OUT/ar1_${v}_z.json"
  "$F" plan --model "$M/ar1n" --vram "$v" --compress-at-open >"$OUT/plan_${v}_z.txt" 2>&1
  grep -c compressed "$OUT/plan_${v}_z.txt"
  for z in raw z; do
    a=(); [ $z = z ] && a=(--compress-at-open)
    "$F" bench --model "$M/ar1n" --vram "$v" --runs 3 --warmup 1 --json --quiet "${a[@]}" \
      >"$OUT/bench_${v}_$z.json" 2>"$OUT/bench_${v}_$z.err"
  done
}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,driver_version --format=csv,noheader
for s in "$@"; do
  case $s in
    a)
      .gpu/tests/ferry_cuda_tests --gtest_filter='ExponentDecode*:CudaBackendDecode*' \
        >"$OUT/decode_tests.log" 2>&1; echo "decode tests: $(last "$OUT/decode_tests.log")"
      for p in alpamayo-tiny qwen3-tiny; do
        "$F" synth --preset "$p" --out "$M/$p" --seed 1 --init normal >/dev/null 2>&1
        names=$(all_groups "$M/$p")
        tw=(); [ $p = alpamayo-tiny ] && tw=(--tokens 4 --steps 2 --images 1)
        "$F" run --model "$M/$p" "${tw[@]}" --backend cpu --json --quiet >"$OUT/${p}_cpu.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet >"$OUT/${p}_cuda.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none \
          >"$OUT/${p}_stream.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none --compress-at-open \
          --compressed "$names" >"$OUT/${p}_stream_z.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --compress-at-open \
          --compressed "$names" >"$OUT/${p}_resident_z.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none --mode sequential \
          --compress-at-open --compressed "$names" >"$OUT/${p}_seq_z.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none --compress-at-open \
          --compressed "$names" --graphs off >"$OUT/${p}_stream_z_nographs.json" 2>>"$OUT/$p.err"
        tail -n 3 "$OUT/$p.err"
        same "$OUT/${p}_cpu.json" "$OUT/${p}"_{cuda,stream,stream_z,resident_z,seq_z,stream_z_nographs}.json
      done
      names=$(all_groups "$M/alpamayo-tiny")
      compute-sanitizer --tool memcheck --error-exitcode 9 "$F" run --model "$M/alpamayo-tiny" \
        --json --quiet --resident none --compress-at-open --compressed "$names" --tokens 2 \
        --steps 1 --images 1 >"$OUT/memcheck_z.log" 2>&1
      echo "memcheck streamed compressed: rc=$? $(grep -m1 'ERROR SUMMARY' "$OUT/memcheck_z.log")"
      [ -n "${S15_TINY_ONLY:-}" ] && continue  # a check of this script on a machine without the GPU
      synth_ar1; ref_ar1; tail -n 1 "$OUT/ar1_all.err"
      "$F" inspect "$M/ar1n" >"$OUT/inspect_ar1.txt" 2>&1
      ;;
    b) synth_ar1; ref_ar1; bench_pair 8GiB ;;
    c) synth_ar1; ref_ar1; bench_pair 15GiB; bench_pair 4GiB ;;
    *) echo "unknown stage $s (a, b, c)"; exit 2 ;;
  esac
done
summary "$OUT"
tar czf "$DEST/s15_$(IFS=; echo "$*").tgz" -C /tmp s15
