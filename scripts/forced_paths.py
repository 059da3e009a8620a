#!/usr/bin/env python3
"""The byte paths end to end, in one run: `ferry probe`'s rates and verdicts, then the chosen plan
against the same budget forced onto each other path (issue 11).

  python3 scripts/forced_paths.py --ferry BIN --model DIR --vram 15GiB [--json OUT] [--runs N]
                                  [--profile FILE] [--skip-probe]

Each variant is one `ferry bench` process (a warm-up and --runs timed inferences, the median):

  chosen        the planner's plan on the automatic host path (streamed groups through the slot
                ring from the registered mapping)
  map           the same plan with every streamed group read in place by its kernels (`--map`;
                groups of several tensors need a packed checkpoint: `ferry pack`)
  per_use_copy  the same budget with the host tier pageable: every streamed copy from pageable
                memory
  bounce        the same budget through the bounce ring (the fallback where registration is
                refused; not one of the four endpoints)
  resident      every group resident (`--resident` naming all of them): refused where the budget
                cannot hold them, and the refusal is the row

Every variant's generated tokens are compared with the chosen plan's, and its measured time
with the time the predictor gave its plan (`--profile`: a measured profile; with mapped times,
`ferry profile`'s map pass, the map row is predicted from them; off the registered path, the
prediction with copies at the rate the session measured through that path).
"""
import argparse
import json
import sys

from plan_alternatives import run_json as last_json  # one `ferry ... --json` call, its last line


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vram", required=True)
    ap.add_argument("--runs", default="1")
    ap.add_argument("--json")
    ap.add_argument("--profile", help="a measured profile for plan and bench")
    ap.add_argument("--skip-probe", action="store_true", help="no `ferry probe` first")
    a = ap.parse_args()
    base = ["--model", a.model, "--vram", a.vram]
    planning = base + (["--profile", a.profile] if a.profile else [])

    rates, verdicts = {}, {}
    if not a.skip_probe:
        probe, err = last_json([a.ferry, "probe", "--json", "--passes", "1", *base])
        if probe is None:
            sys.exit(f"forced_paths: probe failed: {err}")
        for v in probe["model"]["verdicts"]:
            verdicts[v["path"]] = verdicts.get(v["path"], 0) + 1
        rates = {k: v.get("gb_per_s") for k, v in probe["model"]["rates"].items()}
    plan, err = last_json([a.ferry, "plan", "--json", *planning])
    if plan is None:
        sys.exit(f"forced_paths: plan failed: {err}")
    streamed = plan["plan"]["streamed"]
    everything = plan["plan"]["resident"] + streamed + plan["plan"]["host"]

    bench = [a.ferry, "bench", "--json", "--quiet", "--warmup", "1", "--runs", a.runs, *planning]
    variants = [
        ("chosen", []),
        ("map", ["--map", ",".join(streamed)] if streamed else None),
        ("per_use_copy", ["--host-path", "pageable"]),
        ("bounce", ["--host-path", "bounce"]),
        ("resident", ["--resident", ",".join(everything)]),
    ]
    rows = []
    want = None
    for name, flags in variants:
        row = {"variant": name}
        if flags is None:
            row["error"] = "nothing streamed in the chosen plan"
        else:
            j, err = last_json(bench + flags)
            if j is None:
                row["error"] = err
            else:
                total = j["stages"]["total"]
                row.update(median_s=total["median_s"], runs_s=total["runs_s"],
                           streamed_gb=j["streamed_bytes_per_run"] / 1e9,
                           host_path=j["host_path"], tokens=j["tokens"],
                           predicted_s=j.get("prediction_on_path",
                                             j.get("prediction", {})).get("total_s"))
                if want is None:
                    want = j["tokens"]
                row["same_tokens"] = j["tokens"] == want
        rows.append(row)
        print(f"forced_paths: {name}: " + (f"{row['median_s']:.3f} s" if "median_s" in row
                                            else row["error"]), file=sys.stderr)

    print(f"budget {a.vram}; rates GB/s {json.dumps(rates)}; verdicts {json.dumps(verdicts)}")
    print(f"{'variant':14s} {'median':>9s} {'predicted':>10s} {'error':>7s} {'streamed GB':>12s}"
          "  same tokens  host path")
    for r in rows:
        if "median_s" in r:
            pred = r.get("predicted_s")
            err = f"{100 * (pred - r['median_s']) / r['median_s']:+6.1f}%" if pred else "-"
            pred = f"{pred:9.3f}s" if pred else "-"
            print(f"{r['variant']:14s} {r['median_s']:8.3f}s {pred:>10s} {err:>7s} "
                  f"{r['streamed_gb']:12.1f}  {'yes' if r['same_tokens'] else 'NO':11s}  "
                  f"{r['host_path'][:60]}")
        else:
            print(f"{r['variant']:14s} {'-':>9s} {'-':>10s} {'-':>7s} {'-':>12s}  {'-':11s}  "
                  f"{r['error'][:100]}")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"vram": a.vram, "rates": rates, "verdicts": verdicts, "rows": rows}, f,
                      indent=1)
    sys.exit(0 if all(r.get("same_tokens", True) for r in rows) else 1)


if __name__ == "__main__":
    main()
