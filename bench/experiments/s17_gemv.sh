#!/usr/bin/env bash
# Seventeenth session (2026-12-06): the fixed-order batch-1 GEMV on the H200 (issue 26 item 1).
# Needs .gpu (scripts/gpu_prebuild.sh plus build/bench/ferry_cuda_bench; carry .gpu). Stages,
# each sized for one device call:
#   a  the whole CUDA test program (the op harness: the GEMV against the CPU at zero tolerance);
#      the op bench (every M = 1 launch config beside the old mma route); the tiny models on
#      CUDA all resident, streamed, sequential and with graphs off, against each other
#   b  alpamayo-r1-10b: all resident, 15 and 8 GiB against the all-resident bytes; ferry bench
#      (warm-up + median of 3) all resident with the new GEMV and with FERRY_DECODE_GEMV=mma
#   c  qwen3-8b (1500-token prompt, 128 tokens): the same bench pair all resident, and 8 GiB
#      with the new GEMV against its all-resident bytes
#   p  ferry probe (the host engine's DRAM read and GEMV rates, alone and beside the link's
#      copies; default workers and 8) and the op bench again
# Logs in /tmp/s17 (one archive under $OUT); a summary last.
set -uo pipefail
cd "$(dirname "$0")/../.."
DEST=${OUT:-out}; mkdir -p "$DEST"
OUT=/tmp/s17; rm -rf "$OUT"; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.gpu/lib
F=.gpu/ferry; M=/tmp/m
W=(--images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)  # the reference workload
Q=(--prompt-tokens 1500 --tokens 128)
. bench/experiments/common.sh  # last, same, summary
synth() {  # synth PRESET DIR
  [ -f "$M/$2/config.json" ] && return
  /usr/bin/time -f "synth $1 %e s" "$F" synth --preset "$1" --out "$M/$2" --seed 1 \
    --init normal >"$OUT/synth_$2.log" 2>&1; tail -n 1 "$OUT/synth_$2.log"
}
bench_pair() {  # bench_pair DIR TAG WORKLOAD...: bench all resident, new GEMV then the old route
  local d=$1 tag=$2; shift 2
  "$F" bench --model "$M/$d" "$@" --runs 3 --warmup 1 --json --quiet \
    >"$OUT/bench_${tag}_gemv.json" 2>"$OUT/bench_${tag}_gemv.err"
  FERRY_DECODE_GEMV=mma "$F" bench --model "$M/$d" "$@" --runs 3 --warmup 1 --json --quiet \
    >"$OUT/bench_${tag}_mma.json" 2>"$OUT/bench_${tag}_mma.err"
}
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu,driver_version --format=csv,noheader
for s in "$@"; do
  case $s in
    a)
      timeout 300 .gpu/tests/ferry_cuda_tests >"$OUT/cuda_tests.log" 2>&1
      echo "cuda tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/cuda_tests.log" | head -3 | tr '\n' ' ')"
      grep -E '^\[  FAILED  \]' "$OUT/cuda_tests.log" | head -20
      timeout 240 .gpu/bench/ferry_cuda_bench >"$OUT/cuda_bench.log" 2>&1
      echo "op bench rc=$?"; grep -E "^linear decode|^  (mma|gemv|cuBLASLt|skinny 4 warps unroll 4)" \
        "$OUT/cuda_bench.log" | head -60
      for p in alpamayo-tiny qwen3-tiny llama-tiny; do
        "$F" synth --preset "$p" --out "$M/$p" --seed 1 --init normal >/dev/null 2>&1
        tw=(); [ $p = alpamayo-tiny ] && tw=(--tokens 4 --steps 2 --images 1)
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet >"$OUT/${p}_cuda.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none \
          >"$OUT/${p}_stream.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none --mode sequential \
          >"$OUT/${p}_seq.json" 2>>"$OUT/$p.err"
        "$F" run --model "$M/$p" "${tw[@]}" --json --quiet --resident none --graphs off \
          >"$OUT/${p}_nographs.json" 2>>"$OUT/$p.err"
        tail -n 2 "$OUT/$p.err"
        same "$OUT/${p}_cuda.json" "$OUT/${p}"_{stream,seq,nographs}.json
      done
      ;;
    b)
      synth alpamayo-r1-10b ar1n
      "$F" run --model "$M/ar1n" "${W[@]}" --json --quiet >"$OUT/ar1_all.json" 2>"$OUT/ar1_all.err"
      for v in 15GiB 8GiB; do
        "$F" run --model "$M/ar1n" "${W[@]}" --vram $v --json --quiet >"$OUT/ar1_$v.json" \
          2>"$OUT/ar1_$v.err"
      done
      same "$OUT/ar1_all.json" "$OUT/ar1_15GiB.json" "$OUT/ar1_8GiB.json"
      bench_pair ar1n ar1_all "${W[@]}"
      ;;
    p)
      timeout 200 .gpu/tests/ferry_cuda_tests --gtest_filter='CudaOps.Linear*' \
        >"$OUT/linear_tests.log" 2>&1
      echo "linear tests rc=$?: $(grep -E '^\[  (PASSED|FAILED) ' "$OUT/linear_tests.log" | head -2 | tr '\n' ' ')"
      "$F" probe >"$OUT/probe.txt" 2>&1; echo "probe rc=$?"; grep -E "^host engine|^h2d" "$OUT/probe.txt"
      "$F" probe --host-threads 8 >"$OUT/probe8.txt" 2>&1; grep -E "^host engine" "$OUT/probe8.txt"
      timeout 240 .gpu/bench/ferry_cuda_bench >"$OUT/cuda_bench.log" 2>&1
      echo "op bench rc=$?"; grep -E "^linear decode|^  (mma|gemv)" "$OUT/cuda_bench.log" | head -40
      ;;
    c)
      synth qwen3-8b q8
      "$F" run --model "$M/q8" "${Q[@]}" --json --quiet >"$OUT/q8_all.json" 2>"$OUT/q8_all.err"
      "$F" run --model "$M/q8" "${Q[@]}" --vram 8GiB --json --quiet >"$OUT/q8_8GiB.json" \
        2>"$OUT/q8_8GiB.err"
      same "$OUT/q8_all.json" "$OUT/q8_8GiB.json"
      bench_pair q8 q8_all "${Q[@]}"
      ;;
    *) echo "unknown stage $s (a, b, c, p)"; exit 2 ;;
  esac
done
summary "$OUT"
tar czf "$DEST/s17_$(IFS=; echo "$*").tgz" -C /tmp s17
