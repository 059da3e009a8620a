#!/usr/bin/env python3
"""Compare ferry's logits with transformers' on the same checkpoint and the same inputs.

Runs `ferry run --json --dump-logits --dump-inputs` on a Qwen3 (Qwen3ForCausalLM), Qwen3-VL
(Qwen3VLForConditionalGeneration) or Alpamayo-R1 (its Qwen3-VL, built by scripts/hf_models.py)
checkpoint folder, e.g. one written by `ferry synth --preset
qwen3-tiny` / `qwen3-vl-tiny`, or the real Qwen3-8B. Then feeds transformers the same token ids
(and, for Qwen3-VL, the same pixel values and image grids) in one teacher-forced forward over the
prompt plus the tokens ferry generated, and compares, row by row, the logits that predict each
generated token: row 0 is the prompt's last position (ferry's prefill), row i the forward that
fed generated token i-1 (ferry's decode step i-1).

Reports max and mean relative error per row and whether the greedy tokens agree; a disagreement
is accepted only at a near-tie of transformers' top two logits. Exit status 1 when a check fails.

Needs torch, transformers (>= 4.57) and numpy; runs on the GPU machine, not in CI.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def run_ferry(args, out_dir):
    logits_path = os.path.join(out_dir, "logits.npy")
    cmd = [args.ferry, "run", "--model", args.model, "--json", "--greedy",
           "--tokens", str(args.tokens), "--seed", str(args.seed),
           "--dump-logits", logits_path, "--dump-inputs", out_dir]
    if args.backend:
        cmd += ["--backend", args.backend]
    if args.prompt_tokens:
        cmd += ["--prompt-tokens", str(args.prompt_tokens)]
    if args.images is not None:
        cmd += ["--images", str(args.images)]
    if args.image_size:
        cmd += ["--image-size", args.image_size]
    print("+", " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, check=True, capture_output=True, text=True)
    summary = json.loads(proc.stdout.strip().splitlines()[-1])
    logits = np.load(logits_path)
    inputs = {}
    for name in ("input_ids", "position_ids", "generated_ids", "pixel_values", "image_grid_thw"):
        path = os.path.join(out_dir, name + ".npy")
        if os.path.exists(path):
            inputs[name] = np.load(path)
    return summary, logits, inputs


def load_model(model_dir, device):
    import torch
    import transformers

    with open(os.path.join(model_dir, "config.json")) as f:
        cfg = json.load(f)
    model_type = cfg.get("model_type")
    if model_type == "alpamayo_r1":  # its VLM is a Qwen3-VL: compare the language model's logits
        import hf_models

        vlm = hf_models.alpamayo_vlm(cfg, hf_models.load_all_tensors(model_dir), device)
        return vlm, "qwen3_vl"
    kwargs = dict(dtype=torch.bfloat16, attn_implementation="sdpa")
    if model_type == "qwen3_vl":
        cls = transformers.Qwen3VLForConditionalGeneration
    elif model_type in ("qwen3", "llama"):
        cls = transformers.AutoModelForCausalLM
    else:
        sys.exit(f"compare_transformers: model_type {model_type!r} is not Qwen3, Qwen3-VL or "
                 "Alpamayo-R1")
    try:
        model = cls.from_pretrained(model_dir, **kwargs)
    except TypeError:  # transformers 4.x spells it torch_dtype
        kwargs["torch_dtype"] = kwargs.pop("dtype")
        model = cls.from_pretrained(model_dir, **kwargs)
    return model.to(device).eval(), model_type


def reference_logits(model, model_type, inputs, rows, device):
    """Teacher-forced forward over prompt + generated[:rows-1]; the last `rows` positions."""
    import torch

    prompt = inputs["input_ids"].astype(np.int64)
    fed = inputs["generated_ids"].astype(np.int64)[: rows - 1]
    ids = np.concatenate([prompt, fed[None, :]], axis=1)
    input_ids = torch.from_numpy(ids).to(device)
    attention_mask = torch.ones_like(input_ids)
    kwargs = dict(input_ids=input_ids, attention_mask=attention_mask, use_cache=False,
                  logits_to_keep=rows)
    positions = None
    if model_type == "qwen3_vl" and "pixel_values" in inputs:
        kwargs["pixel_values"] = torch.from_numpy(inputs["pixel_values"]).to(device)
        kwargs["image_grid_thw"] = torch.from_numpy(inputs["image_grid_thw"].astype(np.int64)).to(device)
        # transformers >= 5 wants the token types with images (1 = image token) for M-RoPE.
        image_token = getattr(model.config, "image_token_id", 151655)
        kwargs["mm_token_type_ids"] = (input_ids == image_token).to(torch.int32)
        try:
            try:  # transformers 5: (input_ids, mm_token_type_ids, image_grid_thw, ...)
                pos, _ = model.model.get_rope_index(input_ids, kwargs["mm_token_type_ids"],
                                                    kwargs["image_grid_thw"],
                                                    attention_mask=attention_mask)
            except TypeError:  # transformers 4.x: (input_ids, image_grid_thw, video_grid_thw)
                pos, _ = model.model.get_rope_index(input_ids, kwargs["image_grid_thw"], None,
                                                    attention_mask=attention_mask)
            positions = pos.cpu().numpy()
        except Exception as e:  # API drift between versions: report, compare logits anyway
            print(f"note: get_rope_index unavailable ({e}); positions not compared")
    with torch.no_grad():
        try:
            out = model(**kwargs)
        except TypeError:  # transformers 4.x has no mm_token_type_ids
            kwargs.pop("mm_token_type_ids", None)
            out = model(**kwargs)
    return out.logits[0].float().cpu().numpy(), positions


def compare(ferry_logits, ref_logits, generated, tie_tol):
    ok = True
    print(f"{'row':>4} {'max_rel':>10} {'mean_rel':>10} {'ferry':>8} {'ref':>8} {'top2 gap':>9}")
    diverged = False
    for i in range(ferry_logits.shape[0]):
        a, b = ferry_logits[i], ref_logits[i]
        scale = np.max(np.abs(b))
        max_rel = float(np.max(np.abs(a - b)) / scale)
        mean_rel = float(np.mean(np.abs(a - b)) / np.mean(np.abs(b)))
        top2 = np.sort(b)[-2:]
        gap = float(top2[1] - top2[0])
        ft, rt = int(np.argmax(a)), int(np.argmax(b))
        if i < len(generated) and ft != int(generated[i]):
            print(f"note: ferry's logits argmax {ft} != its generated token {generated[i]} (masked?)")
        flag = ""
        if ft != rt and not diverged:
            near_tie = gap <= tie_tol * scale
            flag = "  near-tie: tokens may diverge from here" if near_tie else "  MISMATCH"
            ok = ok and near_tie
            diverged = True  # later rows condition on ferry's token: still comparable
        print(f"{i:>4} {max_rel:10.3e} {mean_rel:10.3e} {ft:>8} {rt:>8} {gap:9.4f}{flag}")
    return ok


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="checkpoint folder (config.json + safetensors)")
    p.add_argument("--ferry", default="build/ferry", help="the ferry binary")
    p.add_argument("--backend", default=None, help="ferry backend (cpu|cuda); default: auto")
    p.add_argument("--device", default=None, help="torch device (default: cuda if available)")
    p.add_argument("--prompt-tokens", type=int, default=None)
    p.add_argument("--tokens", type=int, default=8)
    p.add_argument("--images", type=int, default=None)
    p.add_argument("--image-size", default=None)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--max-rel", type=float, default=0.05,
                   help="fail when a row's max |ferry - ref| / max |ref| exceeds this")
    p.add_argument("--tie-tol", type=float, default=0.02,
                   help="a top-two gap below this fraction of max |logit| is a near-tie")
    p.add_argument("--keep", default=None, help="keep ferry's dumps in this folder")
    args = p.parse_args()

    import torch
    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    out_dir = args.keep or tempfile.mkdtemp(prefix="ferry_compare_")
    os.makedirs(out_dir, exist_ok=True)
    summary, ferry_logits, inputs = run_ferry(args, out_dir)
    print(f"ferry: {summary['model']} on {summary['backend']}, prompt {summary['prompt_tokens']} "
          f"tokens, generated {summary['tokens']}, logits hash {summary['logits_hash']}")
    model, model_type = load_model(args.model, device)
    rows = ferry_logits.shape[0]
    ref, positions = reference_logits(model, model_type, inputs, rows, device)
    if ref.shape != ferry_logits.shape:
        sys.exit(f"shape mismatch: ferry {ferry_logits.shape}, transformers {ref.shape}")
    ok = True
    if positions is not None:
        s = inputs["position_ids"].shape[-1]
        same = np.array_equal(positions[:, :, :s], inputs["position_ids"])
        print(f"position ids (get_rope_index): {'identical' if same else 'DIFFER'}")
        ok = ok and same
    ok = compare(ferry_logits, ref, inputs["generated_ids"], args.tie_tol) and ok
    worst = float(np.max(np.abs(ferry_logits - ref)) / np.max(np.abs(ref)))
    print(f"overall max relative error {worst:.3e} (limit {args.max_rel})")
    ok = ok and worst <= args.max_rel
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
