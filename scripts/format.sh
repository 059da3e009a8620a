#!/usr/bin/env bash
# clang-format over ferry's C++ and CUDA sources (src/ tests/ bench/ fuzz/ python/), with the
# repository's .clang-format.
#   scripts/format.sh            rewrite every file that differs, in place
#   scripts/format.sh --check    change nothing; list the files that differ, exit 1 if any
#   scripts/format.sh [--check] FILE...   only these files
# The files are git's: tracked ones plus new ones not ignored (a file deleted in the working
# tree is skipped). The style is pinned to clang-format 14 (Debian 12's, what scripts/setup.sh
# installs): other versions break some lines differently, so another major version is refused
# unless FERRY_CLANG_FORMAT names the binary to use anyway.
set -euo pipefail
cd "$(dirname "$0")/.."

want_major=14
check=0
if [ "${1:-}" = "--check" ]; then
  check=1
  shift
fi

if [ -n "${FERRY_CLANG_FORMAT:-}" ]; then
  cf=$FERRY_CLANG_FORMAT
else
  cf=$(command -v "clang-format-$want_major" || command -v clang-format || true)
  if [ -z "$cf" ]; then
    echo "format: clang-format not found (scripts/setup.sh installs it)" >&2
    exit 2
  fi
  major=$("$cf" --version | sed -n 's/.*clang-format version \([0-9]*\).*/\1/p')
  if [ "$major" != "$want_major" ]; then
    echo "format: $cf is version ${major:-unknown}, the style is pinned to $want_major" \
      "(set FERRY_CLANG_FORMAT=$cf to use it anyway)" >&2
    exit 2
  fi
fi

files=()
if (($#)); then
  files=("$@")
else
  while IFS= read -r f; do
    [ -f "$f" ] && files+=("$f")
  done < <(git ls-files --cached --others --exclude-standard -- \
             'src/*' 'tests/*' 'bench/*' 'fuzz/*' 'python/*' |
           grep -E '\.(c|cc|cpp|cxx|h|hh|hpp|cu|cuh)$' | sort -u)
fi

if ((check)); then
  differ=()
  for f in "${files[@]}"; do
    "$cf" --style=file "$f" | cmp -s - "$f" || differ+=("$f")
  done
  if ((${#differ[@]})); then
    printf '%s\n' "${differ[@]}"
    echo "format: ${#differ[@]} of ${#files[@]} files differ from .clang-format;" \
      "scripts/format.sh rewrites them (scripts/format.sh FILE... for some)" >&2
    exit 1
  fi
  echo "format: ${#files[@]} files match .clang-format"
else
  changed=0
  for f in "${files[@]}"; do
    if ! "$cf" --style=file "$f" | cmp -s - "$f"; then
      "$cf" --style=file -i "$f"
      echo "$f"
      changed=$((changed + 1))
    fi
  done
  echo "format: $changed of ${#files[@]} files rewritten" >&2
fi
