#!/usr/bin/env python3
"""Compares the outputs of `ferry run --json` logs in two log folders (gpu_check.sh's
$FERRY_GPU_LOGS of two runs: e.g. without and with FERRY_MAX_SHARED_BYTES, or an sm_90 build and
a PTX-only one): for each log name present in both, whether tokens and output hashes are the
same, and the total times. Exit status 1 when any output differs or nothing was compared.

  scripts/same_outputs.py /tmp/logs-plain /tmp/logs-cap99 [--glob 'run_*_cuda*.log']
"""
import argparse
import glob
import json
import os
import sys

KEYS = ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"]


def last_json(path):
    try:
        with open(path) as f:
            lines = f.read().strip().splitlines()
        return json.loads(lines[-1]) if lines else None
    except (OSError, ValueError):
        return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("a")
    ap.add_argument("b")
    ap.add_argument("--glob", default="run_*_cuda*.log")
    args = ap.parse_args()
    compared = differ = 0
    for path in sorted(glob.glob(os.path.join(args.a, args.glob))):
        name = os.path.basename(path)
        other = os.path.join(args.b, name)
        ja, jb = last_json(path), last_json(other)
        if ja is None or jb is None:
            print(f"{name}: missing or not JSON in {'b' if ja is not None else 'a'}")
            continue
        keys = [k for k in KEYS if k in ja or k in jb]
        bad = [k for k in keys if ja.get(k) != jb.get(k)]
        ta = ja.get("time_s", {}).get("total")
        tb = jb.get("time_s", {}).get("total")
        compared += 1
        differ += bool(bad)
        print(f"{name[:-4]}: {'same' if not bad else 'DIFFERENT (' + ','.join(bad) + ')'} "
              f"({','.join(keys)}); total {ta} s vs {tb} s")
    print(f"{compared} compared, {differ} different")
    return 1 if differ or not compared else 0


if __name__ == "__main__":
    sys.exit(main())
