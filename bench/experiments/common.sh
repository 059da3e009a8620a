# Helpers the experiment scripts share (sourced from the repository root): last FILE prints its
# last line, cut to 160 characters; same REF.json OTHER.json... says for each whether its tokens
# and output hashes equal the first's (the last JSON line of each `ferry run --json`); summary DIR
# prints a line per DIR/bench_*.json (`ferry bench --json`): total, prediction, stages, peak.
last() { tail -n 1 "$1" | cut -c1-160; }
same() {  # same REF.json OTHER.json...: tokens and hashes equal?
  python3 - "$@" <<'PY'
import json, sys
def last(p):
    try: return json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e: return {"error": f"{p}: {e}"}
keys = ["tokens", "logits_hash", "prefill_logits_hash", "actions_hash"]
ref = last(sys.argv[1])
for p in sys.argv[2:]:
    r = last(p)
    bad = [k for k in keys if k in ref and r.get(k) != ref.get(k)]
    print(f"{p.split('/')[-1]:44s}", "same" if not bad else "DIFFERENT " + ",".join(bad),
          r.get("error", ""))
PY
}
summary() {
  python3 - "$1" <<'PY'
import json, sys, glob, os
for p in sorted(glob.glob(f"{sys.argv[1]}/bench_*.json")):
    try: b = json.loads(open(p).read().strip().splitlines()[-1])
    except Exception as e:
        print(os.path.basename(p), "no result:", open(p[:-4] + "err").read()[-300:]); continue
    st = b.get("stages", {}); pk = b.get("device_peak_bytes", {})
    print(f"{os.path.basename(p):24s} total {st.get('total', {}).get('median_s')} s, predicted "
          f"{b.get('prediction', {}).get('total_s')}, stages "
          f"{[(k, round(s.get('median_s', 0), 4)) for k, s in st.items() if k != 'total']}, "
          f"outside peak {pk.get('outside')} ({pk.get('outside_method')})")
PY
}
