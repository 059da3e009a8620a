#!/usr/bin/env bash
# Runs every test: C++ unit tests (ctest), Python tests (pytest), and a bounded fuzz run.
# Does all set-up first, so it works on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
scripts/build.sh
build=${FERRY_BUILD_DIR:-build}
echo "== C++ tests"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)"
echo "== Python tests"
FERRY_BUILD_DIR="$build" python3 -m pytest -q tests/python
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  scripts/fuzz.sh "${FERRY_FUZZ_SECONDS:-90}"
fi
