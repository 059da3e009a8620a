#!/usr/bin/env python3
"""The planner's plan against hand-made alternatives at one budget, predicted and measured.

At budget V (with profile P), `ferry plan --out` gives the planner's plan and the weights' share
of the budget; from the plan file's group sizes this script builds the alternatives issue 9
names, each filled greedily in its own order while its groups and two slots of its largest
streamed group fit:

  paper         the non-layer groups (LM head, mergers, patch embedding, expert projections),
                then text layers at the paper's interleaved positions (Eq. 8); vision blocks and
                expert layers always streamed (the paper's rule)
  consecutive   the same groups, text layers 0, 1, 2, ... in a row
  expert_first  the non-layer groups, every expert layer, then interleaved text layers
  text_first    every text layer in order first, then the rest by size

Each is priced by `ferry plan --resident ... --json` (a plan that does not fit is shrunk by its
last group until it does) and, unless --no-bench, measured by `ferry bench --resident ...`
beside `ferry bench --plan <planner's>`. Prints one table; --json writes the rows.
"""
import argparse
import json
import subprocess
import sys

ALIGN = 256


def aligned(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def run_json(cmd):
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        return None, out.stderr.strip().splitlines()[-1] if out.stderr.strip() else "failed"
    return json.loads(out.stdout.strip().splitlines()[-1]), None


def interleaved(k, n):
    """Eq. 8: the k text layers kept resident among n, spread evenly."""
    if k >= n:
        return list(range(n))
    return [i * (n - 1) // k for i in range(k)]


PARTS = (".attn", ".gate_up", ".down")


def layer_of(name):
    """A decoder layer's part group -> the layer ("text.layers.3.attn" -> "text.layers.3")."""
    for p in PARTS:
        if name.endswith(p):
            return name[: -len(p)]
    return name


def units(names):
    """Names grouped by layer, in order: a layer's parts are kept or dropped together, as the
    paper's rules keep whole layers."""
    out = []
    for n in names:
        if out and layer_of(out[-1][-1]) == layer_of(n) != n:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def fill(groups, order, room):
    """Units (lists of names) from `order` kept resident while they and two slots of the largest
    streamed group fit; returns the names."""
    size = {g["name"]: g["bytes"] for g in groups}
    copyable = [g["name"] for g in groups if g["placement"] != "host"]
    chosen = []
    for unit in order:
        trial = chosen + unit
        rest = [size[n] for n in copyable if n not in trial]
        need = sum(size[n] for n in trial) + (2 * aligned(max(rest)) if rest else 0)
        if need <= room:
            chosen = trial
    return chosen


def alternatives(groups, room):
    names = [g["name"] for g in groups if g["placement"] != "host"]
    text = units([n for n in names if n.startswith("text.layers.")])
    vision = units([n for n in names if n.startswith("vision.blocks.")])
    expert = units([n for n in names if n.startswith("expert.layers.")])
    grouped = {n for u in text + vision + expert for n in u}
    other = [[n] for n in names if n not in grouped]
    out = {}

    def best_interleaved(prefix):
        for k in range(len(text), -1, -1):
            order = prefix + [text[i] for i in interleaved(k, len(text))]
            chosen = fill(groups, order, room)
            if len(chosen) == sum(len(u) for u in order):
                return chosen
        return fill(groups, prefix, room)

    out["paper"] = best_interleaved(other)
    out["consecutive"] = fill(groups, other + text, room)
    out["expert_first"] = best_interleaved(other + expert)
    size = {g["name"]: g["bytes"] for g in groups}
    out["text_first"] = fill(groups, text + sorted(other + expert + vision,
                                                   key=lambda u: sum(size[n] for n in u)), room)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--ferry", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--vram", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--runs", default="3")
    ap.add_argument("--no-bench", action="store_true")
    ap.add_argument("--json")
    args, workload = ap.parse_known_args()
    base = [args.ferry]
    common = ["--model", args.model, "--vram", args.vram, "--profile", args.profile] + workload
    plan_file = f"{args.workdir}/planner_{args.vram}.plan.json"
    planner, err = run_json(base + ["plan"] + common + ["--json", "--out", plan_file])
    if planner is None:
        sys.exit(f"ferry plan failed: {err}")
    groups = json.load(open(plan_file))["groups"]
    room = planner["weight_budget"]
    rows = [{"name": "planner", "args": ["--plan", plan_file],
             "predicted_s": planner["prediction"]["total_s"],
             "link_bytes": planner["prediction"]["link_bytes"]}]
    for name, resident in alternatives(groups, room).items():
        while True:
            a = ["--resident", ",".join(resident) if resident else "none"]
            priced, err = run_json(base + ["plan"] + common + a + ["--json"])
            if priced is not None or not resident:
                break
            resident = resident[:-1]
        if priced is None:
            rows.append({"name": name, "error": err})
            continue
        rows.append({"name": name, "args": a, "predicted_s": priced["prediction"]["total_s"],
                     "link_bytes": priced["prediction"]["link_bytes"],
                     "resident": len(resident)})
    if not args.no_bench:
        for r in rows:
            if "args" not in r:
                continue
            got, err = run_json(base + ["bench"] + common + r["args"] +
                                ["--runs", args.runs, "--json", "--quiet"])
            if got is None:
                r["bench_error"] = err
                continue
            r["measured_s"] = got["stages"]["total"]["median_s"]
            r["bound_s"] = got.get("lower_bound", {}).get("total_s")
            r["hidden_fraction"] = got.get("streams", {}).get("hidden_fraction")
    print(f"budget {args.vram}, weights' share {room / 2**30:.2f} GiB, profile {args.profile}")
    print(f"{'plan':14} {'predicted':>10} {'measured':>10} {'error':>8} {'link GB':>8}")
    for r in rows:
        if "predicted_s" not in r:
            print(f"{r['name']:14} {r.get('error', '')}")
            continue
        m = r.get("measured_s")
        err = f"{100 * (r['predicted_s'] - m) / m:+.2f}%" if m else "-"
        print(f"{r['name']:14} {r['predicted_s']:9.4f}s {m if m else float('nan'):9.4f}s "
              f"{err:>8} {r['link_bytes'] / 1e9:8.2f}  {r.get('bench_error', '')}")
    if args.json:
        json.dump(rows, open(args.json, "w"), indent=1)
    best = min((r for r in rows if "measured_s" in r), key=lambda r: r["measured_s"], default=None)
    if best is not None:
        print(f"fastest measured: {best['name']}")
        sys.exit(0 if best["name"] == "planner" or
                 rows[0].get("measured_s", 1e9) <= best["measured_s"] * 1.005 else 1)


if __name__ == "__main__":
    main()
