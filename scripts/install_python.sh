#!/usr/bin/env bash
# Builds and installs the `ferry` Python package from this checkout (pip install ., scikit-build-
# core), as a user would, with the build dependencies set-up installed (no build isolation, so no
# download) and -Werror on as for the rest of ferry. With ccache, the objects build/ compiled are
# reused (pyproject.toml keeps build-py/ at build/'s depth). Extra arguments go to pip.
set -euo pipefail
cd "$(dirname "$0")/.."
args=(install --no-build-isolation -q --config-settings cmake.define.FERRY_WERROR=ON)
if command -v ccache >/dev/null 2>&1; then
  args+=(--config-settings cmake.define.CMAKE_CXX_COMPILER_LAUNCHER=ccache
         --config-settings cmake.define.CMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  export CCACHE_BASEDIR="$PWD" CCACHE_NOHASHDIR=1
  # scikit-build-core would take CXX from Python's build config (g++), CMake in build/ finds
  # c++: the same compiler, but ccache hashes the command.
  export CC="${CC:-cc}" CXX="${CXX:-c++}"
fi
# A Debian Python marks itself externally managed: pip then needs --break-system-packages.
if python3 -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_path("stdlib"), "EXTERNALLY-MANAGED")) else 1)'
then
  args+=(--break-system-packages)
fi
python3 -m pip "${args[@]}" "$@" .
python3 -c 'import ferry; print("ferry package:", ferry.__file__, "(cuda)" if ferry.cuda else "(cpu)")'
