#!/usr/bin/env bash
# The longest functions per folder of src/ (or of the folders given), by lizard's length (lines
# from signature to closing brace): `scripts/function_lengths.sh [-n TOP] [FOLDER...]`.
# Issue 23 holds src/cli/ under 100 lines a function; lizard's -L 80 warnings name the ones over
# ~80 (`python3 -m lizard -L 80 -C 1000 src/cli`). Needs lizard (requirements-dev.txt).
set -euo pipefail
cd "$(dirname "$0")/.."
top=5
if [ "${1:-}" = "-n" ]; then top=$2; shift 2; fi
folders=("$@")
[ ${#folders[@]} -eq 0 ] && folders=(src/*/)
for dir in "${folders[@]}"; do
  dir=${dir%/}
  echo "$dir"
  # lizard's CSV: nloc, ccn, tokens, params, length, location, file, function, long name, start, end
  python3 -m lizard --csv "$dir" |
    python3 -c '
import csv, sys
rows = [(int(r[4]), r[7], r[6], r[9]) for r in csv.reader(sys.stdin)]
rows.sort(key=lambda r: -r[0])
for length, name, path, line in rows[:int(sys.argv[1])]:
    print(f"  {length:5d}  {name}  {path}:{line}")
' "$top"
done
