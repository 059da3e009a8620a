#!/usr/bin/env bash
# ferry's main job on a small built-in model: synthesize a tiny Alpamayo-R1 checkpoint (vision
# encoder, language model, diffusion action expert), inspect it, and run one whole inference:
# images -> vision tower -> prefill -> greedy decode -> 10 flow-matching steps -> trajectory.
# Then the same inference with every group streamed, checked identical. CUDA when a GPU is
# present, else the CPU backend. Does all set-up first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
FERRY_BUILD_TARGETS=ferry scripts/build.sh  # what the demo runs, not the tests
build=${FERRY_BUILD_DIR:-build}
out=${FERRY_DEMO_DIR:-build/demo}
model="$out/alpamayo-tiny"
"$build/ferry" synth --preset alpamayo-tiny --out "$model" --seed 1 --force
echo
"$build/ferry" inspect "$model"
echo
"$build/ferry" run --model "$model"
echo
# The same inference with every weight group streamed through the slot ring (what a budget too
# small for the model does to the groups that do not fit): the same output bytes.
"$build/ferry" run --model "$model" --resident none --quiet --json >"$out/streamed.json"
"$build/ferry" run --model "$model" --quiet --json >"$out/resident.json"
python3 - "$out/resident.json" "$out/streamed.json" <<'PY'
import json, sys
a, b = (json.loads(open(p).read().strip().splitlines()[-1]) for p in sys.argv[1:])
keys = ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"]
same = all(a.get(k) == b.get(k) for k in keys)
gb = b.get("streamed_bytes", 0) / 1e6
print(f"streamed run: {gb:.1f} MB through the slot ring, output bytes "
      f"{'identical to' if same else 'DIFFERENT from'} the all-resident run")
sys.exit(0 if same else 1)
PY
