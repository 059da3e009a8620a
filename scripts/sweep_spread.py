#!/usr/bin/env python3
"""The predictor against several processes' sweeps of one model.

    scripts/sweep_spread.py A.json B.json ... [--json]

Each file is what `ferry bench --sweep ... --json` printed (its last line is read). Rows are
matched by their weights' share of the budget (within 0.5%: `--sweep auto` gives every process
the same shares; a list of budgets gives shares a few MiB apart). Per budget it prints each
process's error, the spread of the measurements ((max - min) / min) and the error against their
median; then how many budgets are within 1% in each process and against the median.

The machine's own time moves between processes (docs/benchmarks.md, eleventh session), so a
prediction is judged here against the median of several processes as well as against each.
"""
import argparse
import json
import statistics
import sys


def load(path):
    with open(path, encoding="utf-8") as f:
        lines = [line for line in f.read().splitlines() if line.strip()]
    if not lines:
        raise ValueError(f"{path}: empty")
    j = json.loads(lines[-1])
    rows = j.get("sweep")
    if not isinstance(rows, list) or not rows:
        raise ValueError(f"{path}: no sweep rows (not `ferry bench --sweep --json` output?)")
    for r in rows:
        for key in ("weight_budget", "predicted_s", "measured_s"):
            if not isinstance(r.get(key), (int, float)):
                raise ValueError(f"{path}: a row without {key}")
        if r["measured_s"] <= 0:
            raise ValueError(f"{path}: a row measured {r['measured_s']} s")
    return rows


def match(runs, tolerance=0.005):
    """Rows of the first file, each with the row of every other file at the same weight share."""
    out = []
    for base in runs[0]:
        w = base["weight_budget"]
        row = [base]
        for other in runs[1:]:
            near = min(other, key=lambda r: abs(r["weight_budget"] - w))
            if abs(near["weight_budget"] - w) > tolerance * max(w, 1):
                row = None
                break
            row.append(near)
        if row is not None:
            out.append(row)
    return out


def spread(runs):
    table = []
    for row in match(runs):
        measured = [r["measured_s"] for r in row]
        mid = statistics.median(measured)
        predicted = [r["predicted_s"] for r in row]
        table.append({
            "weight_budget": row[0]["weight_budget"],
            "predicted_s": predicted,
            "measured_s": measured,
            "errors": [(p - m) / m for p, m in zip(predicted, measured)],
            "median_s": mid,
            # each process's prediction against the median (one number when they agree)
            "errors_vs_median": [(p - mid) / mid for p in predicted],
            "spread": (max(measured) - min(measured)) / min(measured),
        })
    return table


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="`ferry bench --sweep --json` outputs")
    ap.add_argument("--json", action="store_true", help="one JSON object")
    a = ap.parse_args(argv)
    try:
        runs = [load(p) for p in a.files]
    except (OSError, ValueError) as e:
        print(f"sweep_spread: {e}", file=sys.stderr)
        return 2
    table = spread(runs)
    if not table:
        print("sweep_spread: no budget is in every file", file=sys.stderr)
        return 2
    n = len(a.files)
    within = [sum(abs(t["errors"][i]) <= 0.01 for t in table) for i in range(n)]
    within_median = sum(all(abs(e) <= 0.01 for e in t["errors_vs_median"]) for t in table)
    if a.json:
        print(json.dumps({"files": a.files, "budgets": table, "within_1pct": within,
                          "within_1pct_of_median": within_median}))
        return 0
    head = "weights GiB  " + "  ".join(f"err {i + 1:>3}" for i in range(n))
    print(head + "    spread  vs median")
    for t in table:
        errs = "  ".join(f"{100 * e:+6.2f}%" for e in t["errors"])
        worst = max(t["errors_vs_median"], key=abs)
        print(f"{t['weight_budget'] / 2**30:11.2f}  {errs}   {100 * t['spread']:6.2f}%  "
              f"{100 * worst:+6.2f}%")
    print(f"within 1%: {', '.join(f'{w} of {len(table)}' for w in within)} (each file); "
          f"{within_median} of {len(table)} against the median of the {n}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
