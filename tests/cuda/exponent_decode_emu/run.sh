#!/usr/bin/env bash
# Host emulation of exponent_decode_kernel (no GPU needed): the kernel's source between its
# "kernel begin" and "kernel end" markers, compiled for the host with one std::thread per GPU
# thread and barriers for ballot/shfl/__syncthreads, under AddressSanitizer and UBSan; checked
# against compress::decode_group on normal, mixed and damaged groups.
# Usage: tests/cuda/exponent_decode_emu/run.sh   (from anywhere)
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../.." && pwd)
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
src="$root/src/backend/cuda/exponent_decode.cu"
start=$(grep -n -- '--- kernel begin' "$src" | cut -d: -f1)
end=$(grep -n -- '--- kernel end' "$src" | cut -d: -f1)
sed -n "$((start + 1)),$((end - 1))p" "$src" |
  sed 's/extern __shared__ __align__(16) uint8_t smem\[\];/uint8_t* smem = g_dyn_smem.data();/' \
  > "$out/kernel_body.inc"
g++ -std=c++20 -O1 -g -pthread -fsanitize=address,undefined -fno-sanitize-recover=undefined \
  -I"$root/src" -I"$out" "$here/emu.cpp" "$root/src/compress/group_codec.cpp" \
  "$root/src/compress/xxhash64.cpp" "$root/src/core/status.cpp" "$root/src/core/thread_pool.cpp" \
  -o "$out/emu"
"$out/emu"
