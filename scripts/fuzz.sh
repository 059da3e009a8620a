#!/usr/bin/env bash
# Bounded fuzzing of the parsers of hostile input: builds the libFuzzer targets (clang, ASan +
# UBSan) in build-fuzz/ and runs each for an equal share of SECONDS: the safetensors header
# and index parsers seeded with tests/corpus/, the config.json parser seeded with
# tests/fixtures/, the image decoders seeded with tests/fixtures/images/inputs, the tokenizer (tokenizer.json and text)
# seeded with fuzz/tokenizer_seeds/, the .npy reader of ego histories seeded with fuzz/npy_seeds/,
# the compressed weight-group decoder seeded with fuzz/compress_seeds/, the compressed
# checkpoint container seeded with fuzz/container_seeds/ (fuzz/make_container_seeds.py).
# Fails on any crash.
#   scripts/fuzz.sh [SECONDS]    (default 60)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
build=${FERRY_FUZZ_BUILD_DIR:-build-fuzz}
targets=(safetensors_header_fuzz safetensors_index_fuzz config_json_fuzz image_decode_fuzz
         tokenizer_fuzz npy_fuzz compress_decode_fuzz container_fuzz)
per_target=$((seconds / ${#targets[@]}))  # the whole run stays within SECONDS
[ "$per_target" -ge 1 ] || per_target=1

CC=clang CXX=clang++ cmake -S . -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DFERRY_FUZZ=ON -DFERRY_CUDA=OFF -DFERRY_PYTHON=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" --target "${targets[@]}"

declare -A seeds=([safetensors_header_fuzz]=tests/corpus [safetensors_index_fuzz]=tests/corpus
                  [config_json_fuzz]=tests/fixtures [tokenizer_fuzz]=fuzz/tokenizer_seeds
                  [image_decode_fuzz]=tests/fixtures/images/inputs [npy_fuzz]=fuzz/npy_seeds
                  [compress_decode_fuzz]=fuzz/compress_seeds
                  [container_fuzz]=fuzz/container_seeds)
for t in "${targets[@]}"; do
  # New inputs go to the first folder (outside the source tree); the seed folder only seeds.
  work="$build/fuzz-work/$t"
  mkdir -p "$work"
  echo "== $t: ${per_target}s"
  log="$build/fuzz-work/$t.log"
  status=0
  "$build/fuzz/$t" -max_total_time="$per_target" -timeout=10 -rss_limit_mb=2048 \
    -dict=fuzz/safetensors.dict -artifact_prefix="$build/fuzz-work/$t-" -print_final_stats=1 \
    "$work" "${seeds[$t]}" \
    >"$log" 2>&1 || status=$?
  grep -E "INITED|DONE|stat::number_of_executed_units" "$log" || true
  if [ "$status" -ne 0 ]; then
    tail -n 40 "$log" >&2
    echo "fuzz: $t failed (exit $status); log $log, reproducer under $build/fuzz-work/" >&2
    exit 1
  fi
done
echo "fuzz: no crashes"
