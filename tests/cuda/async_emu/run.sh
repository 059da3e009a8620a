#!/usr/bin/env bash
# Host emulation of attention_mma_async_kernel (no GPU needed): one std::thread per GPU thread,
# barriers for mma/ldmatrix/shfl and __syncthreads, cp.async deferred to cp.async.wait, shared
# memory poisoned with NaN per block. Checks the failing harness shapes against a double reference.
# Usage: tests/cuda/async_emu/run.sh [case-number]   (from the repository root)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d)
src="$here/../../../src/backend/cuda/attention_mma_async.cu"
start=$(grep -n '^template <int DP>$' "$src" | head -1 | cut -d: -f1)
end=$(grep -n '^void launch(const AttnParams' "$src" | cut -d: -f1)
sed -n "${start},$((end - 2))p" "$src" |
  sed 's/bf16_t smem\[2\]\[2\]\[kTileElems\];/&\n  emu_poison(smem, sizeof(smem));/' > "$out/kernel_body.inc"
cp "$here/emu.cpp" "$here/main.cpp" "$out/"
g++ -std=c++20 -O1 -pthread "$out/main.cpp" -o "$out/emu"
"$out/emu" "${1:-0}"
