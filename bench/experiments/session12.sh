#!/usr/bin/env bash
# Twelfth session (2026-12-03), one device call after the layering: the PTX-only compute_80 build
# against the sm_90 one (harness, tiny bytes), and Alpamayo-R1-10B at full size: output bytes all
# resident, at 15 and 8 GiB, and all resident under a 99 KB shared-memory cap; ferry bench at 15
# and 8 GiB (warm-up + median of 3) with the outside peaks. Needs .gpu (gpu_prebuild.sh) and
# .gpu-ptx80 (ferry + ferry_cuda_tests built with CMAKE_CUDA_ARCHITECTURES=80-virtual).
set -uo pipefail
cd "$(dirname "$0")/../.."
OUT=${OUT:-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.gpu/lib FERRY_GPU_LOGS=/tmp/gl
F=.gpu/ferry; M=/tmp/m/ar1
W=(--images 16 --image-size 320x576 --prompt-tokens 3007 --tokens 21)
nvidia-smi --query-gpu=name,clocks.sm,temperature.gpu --format=csv,noheader
FERRY_PREBUILT=.gpu scripts/gpu_check.sh tiny >"$OUT/tiny90.txt" 2>&1
FERRY_PREBUILT=.gpu-ptx80 FERRY_GPU_LOGS=/tmp/glp scripts/gpu_check.sh harness tiny >"$OUT/ptx80.txt" 2>&1
grep -E 'cuda_harness|same_' "$OUT/ptx80.txt" | cut -c1-110
scripts/same_outputs.py /tmp/gl /tmp/glp | tail -2
"$F" synth --preset alpamayo-r1-10b --out "$M" --seed 1 2>&1 | tail -1
for v in all 15GiB 8GiB; do
  a=(); [ "$v" != all ] && a=(--vram "$v")
  "$F" run --model "$M" "${W[@]}" "${a[@]}" --json --quiet >"$OUT/ar1_$v.json" 2>"$OUT/ar1_$v.err"
done
FERRY_MAX_SHARED_BYTES=101376 "$F" run --model "$M" "${W[@]}" --json --quiet >"$OUT/ar1_cap99.json" 2>&1
for v in 15GiB 8GiB; do
  "$F" bench --model "$M" --vram "$v" --runs 3 --json --quiet >"$OUT/bench_$v.json" 2>"$OUT/bench_$v.err"
done
python3 - "$OUT" <<'PY'
import json, sys, os
out = sys.argv[1]
def last(p):
    try: return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e: return {"error": str(e)}
keys = ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"]
ref = last(f"{out}/ar1_all.json")
for v in ["all", "15GiB", "8GiB", "cap99"]:
    r = last(f"{out}/ar1_{v}.json")
    print(f"run {v:6s}", "same" if all(r.get(k) == ref.get(k) for k in keys) else "DIFFERENT",
          {k: r.get(k) for k in keys[1:]}, "error" in r and r["error"] or "")
for v in ["15GiB", "8GiB"]:
    b = last(f"{out}/bench_{v}.json")
    st = b.get("stages", {})
    tot = st.get("total", {}).get("median_s")
    pk = b.get("device_peak_bytes", {})
    print(f"bench {v}: total {tot} s, predicted {b.get('prediction', {}).get('total_s')}, "
          f"stages {[(k, round(s.get('median_s', 0), 4)) for k, s in st.items()]}, "
          f"outside peak {pk.get('outside')} ({pk.get('outside_method')})")
PY
