# Helpers the experiment scripts share (sourced from the repository root): last FILE prints its
# last line, cut to 160 characters; same REF.json OTHER.json... says for each whether its tokens
# and output hashes equal the first's (the last JSON line of each `ferry run --json`).
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
