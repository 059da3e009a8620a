#!/usr/bin/env python3
"""Where a stage's time goes between its calls, from `ferry bench --timeline-out FILE`
(or one run of `ferry profile --timeline-out FILE`: --run N, the first by default).

Per stage: the host clock's stage time of that run, the sum of the calls' compute spans, the
gaps between consecutive calls split into back to back (under --b2b, default 3 us: the timing
events' own cost), after a copy wait, after a host step (the call before it ends a decode
token or a flow step) and the stage's entry gap (from the previous stage's last call, or the
origin, to its first call), the device's stage time (previous stage's last call to this one's), and what the host clock
counted beyond it.
With --profile, the profile's C_EXE (alone, back to back) of the same calls beside the spans.

A profile's timelines have no host clock per stage: their wall and host-dev columns are "-".
The inputs' upload (the origin to when the pixels are on the device, before any call or copy)
is printed first.

    scripts/timeline_gaps.py TIMELINE.json [--run N] [--profile PROFILE.json] [--json]
"""

import argparse
import json
import statistics
import sys

PHASES = ["vision", "prefill", "decode", "expert"]


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def profile_exe(profile):
    """(group, phase) -> C_EXE alone from a profile, or None."""
    if profile is None:
        return None
    out = {}
    for g in profile.get("groups", []):
        for phase, t in g.get("exe_s", {}).items():
            out[(g["name"], phase)] = t
    return out


def analyse(tl, exe, b2b):
    calls = tl["calls"]
    stats = {p: {"calls": 0, "spans_s": 0.0, "b2b_gaps": [], "wait_gaps_s": 0.0,
                 "step_gaps": [], "entry_gap_s": 0.0, "last_end": None, "first_start": None,
                 "profile_exe_s": 0.0, "profile_missing": 0} for p in PHASES}
    prev_end = 0.0
    prev = None
    for c in calls:
        s = stats[c["phase"]]
        s["calls"] += 1
        s["spans_s"] += c["end"] - c["start"]
        gap = c["start"] - prev_end
        if prev is None or prev["phase"] != c["phase"]:
            s["entry_gap_s"] += gap
            s["first_start"] = c["start"]
        elif "copy_end" in c and c["copy_end"] >= prev_end + b2b:
            s["wait_gaps_s"] += gap
        elif prev["step"] != c["step"]:
            s["step_gaps"].append(gap)
        elif gap <= b2b:
            s["b2b_gaps"].append(gap)
        else:
            s["step_gaps"].append(gap)  # an idle gap with no copy to wait for: the host
        if exe is not None:
            t = exe.get((c["group"], c["phase"]))
            if t is None:
                s["profile_missing"] += 1
            else:
                s["profile_exe_s"] += t
        s["last_end"] = c["end"]
        prev_end = c["end"]
        prev = c
    rows = {}
    for p in PHASES:
        s = stats[p]
        if s["calls"] == 0:
            continue
        wall = tl.get("stage_wall_s", {}).get(p)
        gaps = sum(s["b2b_gaps"]) + s["wait_gaps_s"] + sum(s["step_gaps"]) + s["entry_gap_s"]
        row = {
            "calls": s["calls"],
            "stage_wall_s": wall,
            "spans_s": s["spans_s"],
            "entry_gap_s": s["entry_gap_s"],
            "b2b_gaps": len(s["b2b_gaps"]),
            "b2b_gap_median_s": statistics.median(s["b2b_gaps"]) if s["b2b_gaps"] else None,
            "b2b_gaps_s": sum(s["b2b_gaps"]),
            "wait_gaps_s": s["wait_gaps_s"],
            "step_gaps": len(s["step_gaps"]),
            "step_gaps_s": sum(s["step_gaps"]),
            "step_gap_median_s": statistics.median(s["step_gaps"]) if s["step_gaps"] else None,
            # The device's stage time: from the previous stage's last call (or the origin) to
            # this stage's last call, as the predictor counts it.
            "device_s": s["spans_s"] + gaps,
            # What the host clock counted beyond that: the synchronize at the stage's end and
            # the host's return from it, less the same at the previous stage's end.
            "host_minus_device_s": None if wall is None else wall - s["spans_s"] - gaps,
        }
        if exe is not None:
            row["profile_exe_s"] = s["profile_exe_s"]
            row["profile_missing"] = s["profile_missing"]
        rows[p] = row
    return rows


def ms(x):
    return "-" if x is None else f"{x * 1e3:.3f}"


def us(x):
    return "-" if x is None else f"{x * 1e6:.2f}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("timeline")
    ap.add_argument("--profile")
    ap.add_argument("--b2b", type=float, default=3e-6, help="back-to-back gap limit (s)")
    ap.add_argument("--run", type=int, default=0, help="the run of a profile's timelines")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    tl = load(a.timeline)
    if tl.get("format") == "ferry-timelines" and tl.get("version") == 2:
        runs = tl.get("runs", [])
        if not 0 <= a.run < len(runs):
            sys.exit(f"{a.timeline}: no run {a.run} (it has {len(runs)})")
        tl = runs[a.run]
    elif tl.get("format") != "ferry-timeline":
        sys.exit(f"{a.timeline}: not a ferry timeline (ferry bench or profile --timeline-out)")
    rows = analyse(tl, profile_exe(load(a.profile) if a.profile else None), a.b2b)
    if a.json:
        print(json.dumps({"inputs_end_s": tl.get("inputs_end"), "stages": rows}, indent=1))
        return
    if tl.get("inputs_end") is not None:
        print(f"inputs on the device at {ms(tl['inputs_end'])} ms")
    cols = ["stage", "calls", "wall ms", "spans ms", "entry ms", "b2b n", "b2b med us",
            "b2b ms", "wait ms", "step n", "step med us", "step ms", "device ms", "host-dev ms"]
    if a.profile:
        cols.append("profile C_EXE ms")
    print(" | ".join(cols))
    for p, r in rows.items():
        cells = [p, str(r["calls"]), ms(r["stage_wall_s"]), ms(r["spans_s"]), ms(r["entry_gap_s"]),
                 str(r["b2b_gaps"]), us(r["b2b_gap_median_s"]), ms(r["b2b_gaps_s"]),
                 ms(r["wait_gaps_s"]), str(r["step_gaps"]), us(r["step_gap_median_s"]),
                 ms(r["step_gaps_s"]), ms(r["device_s"]), ms(r["host_minus_device_s"])]
        if a.profile:
            cells.append(ms(r["profile_exe_s"]))
        print(" | ".join(cells))


if __name__ == "__main__":
    main()
