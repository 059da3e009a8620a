#!/usr/bin/env bash
# Runs every test: C++ unit tests (ctest), Python tests (pytest), and a bounded fuzz run.
# Does all set-up first, so it works on a fresh machine. Ends with one summary line.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
# The format check: CI fails on C++ that differs from .clang-format (scripts/format.sh --check).
# On by default; FERRY_FORMAT_CHECK=0 skips it (say why in the commit when you do).
if [ "${FERRY_FORMAT_CHECK:-1}" = 1 ]; then
  echo "== format (scripts/format.sh --check)"
  scripts/format.sh --check
fi
echo "== layers (an include of a higher layer: scripts/check_layers.py)"
scripts/check_layers.py
# With no GPU visible (CI), the CUDA sources compile for sm_90 (what the GPU checks run) and for
# the consumer cards sm_86 (Ampere) and sm_120 (Blackwell), so a kernel that stops building for
# one fails here (FERRY_CI_CUDA_ARCHS overrides the list; CMakeLists.txt has the full one).
cuda_archs=() pip_archs=()
if ! nvidia-smi -L >/dev/null 2>&1; then
  cuda_archs=("-DCMAKE_CUDA_ARCHITECTURES=${FERRY_CI_CUDA_ARCHS:-86-real;90;120-real}")
  pip_archs=(--config-settings "cmake.define.${cuda_archs[0]#-D}")  # the same objects (ccache)
fi
scripts/build.sh "${cuda_archs[@]}"
build=${FERRY_BUILD_DIR:-build}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
echo "== C++ tests"
ctest --test-dir "$build" --output-on-failure -j "$(nproc)" | tee "$logs/ctest.log"
echo "== Python package (pip install .)"
scripts/install_python.sh "${pip_archs[@]}"
echo "== Python tests"
FERRY_BUILD_DIR="$build" python3 -m pytest -q tests/python | tee "$logs/pytest.log"
if [ -x scripts/fuzz.sh ]; then
  echo "== fuzz (bounded)"
  scripts/fuzz.sh "${FERRY_FUZZ_SECONDS:-90}"
fi
# The unit tests under AddressSanitizer + UBSan and ThreadSanitizer (scripts/sanitize.sh, their
# own builds). On by default (~45 minutes on 2 cores from a cold build; CONTRIBUTING.md);
# FERRY_SANITIZE=0 skips them for a quick local run.
sanitized=", sanitizers skipped (FERRY_SANITIZE=0)"
if [ "${FERRY_SANITIZE:-1}" = 1 ]; then
  echo "== sanitizers"
  scripts/sanitize.sh
  sanitized=", ASan + UBSan and TSan found nothing"
fi
# Every step above stops the script on a failure, so reaching here means nothing failed.
cpp=$(sed -n 's/.*tests passed, 0 tests failed out of \([0-9]*\).*/\1/p' "$logs/ctest.log")
py=$(sed -n 's/^\([0-9]*\) passed.*/\1/p' "$logs/pytest.log")
skipped=$(sed -n 's/^[0-9]* passed, \([0-9]*\) skipped.*/\1/p' "$logs/pytest.log")
echo "C++ ${cpp:-0} passed, Python ${py:-0} passed (${skipped:-0} skipped), fuzzing found no crash$sanitized"
echo "tests: $((${cpp:-0} + ${py:-0})) passed, 0 failed, ${skipped:-0} skipped"
