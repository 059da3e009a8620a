#!/usr/bin/env bash
# ferry's main job on a small built-in model: synthesize a tiny Alpamayo-R1 checkpoint (vision
# encoder, language model, diffusion action expert), inspect it, and run one whole inference:
# images -> vision tower -> prefill -> greedy decode -> 10 flow-matching steps -> trajectory.
# CUDA when a GPU is present, else the CPU backend. Does all set-up first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${FERRY_BUILD_DIR:-build}
out=${FERRY_DEMO_DIR:-build/demo}
model="$out/alpamayo-tiny"
"$build/ferry" synth --preset alpamayo-tiny --out "$model" --seed 1 --force
echo
"$build/ferry" inspect "$model"
echo
"$build/ferry" run --model "$model"
