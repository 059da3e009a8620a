#!/usr/bin/env bash
# ferry's main job on a small built-in model: synthesize a tiny Alpamayo-R1 checkpoint, inspect it
# and run one inference (CUDA when present, else CPU). Does all set-up first.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${FERRY_BUILD_DIR:-build}
out=${FERRY_DEMO_DIR:-build/demo}
"$build/ferry" synth --preset alpamayo-tiny --out "$out/alpamayo-tiny" --seed 1
"$build/ferry" inspect "$out/alpamayo-tiny"
