#!/usr/bin/env python3
"""Times transformers (PyTorch eager, every weight on the GPU) on a ferry-synthesized checkpoint
and workload, so that ferry's numbers are always a ratio measured side by side on one GPU.

  python3 bench/peer_transformers.py --model DIR [--runs 3] [--json]

Workloads (the ones ferry bench uses):
  qwen3 / llama : --prompt-tokens (1500) random ids, --tokens (21) greedy tokens.
  qwen3_vl      : --images (16) of --image-size (320x576), prompt of about --prompt-tokens (3007)
                  tokens incl. 180 image tokens per image, --tokens greedy tokens.
  alpamayo_r1   : the qwen3_vl workload, then --steps (10) flow-matching steps of the action
                  expert over the prompt cache (the expert is a Qwen3-VL text model without an
                  embedding; it attends the VLM's layer-i cache plus its own 64 tokens).

Reports the median of --runs timed runs after one warm-up, per stage where it can be split.
Runs on the GPU machine only (torch, transformers); never in CI.
"""
import argparse
import json
import os
import statistics
import sys
import time

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
import hf_models  # noqa: E402  (scripts/hf_models.py: shared with the comparison scripts)


DEVICE = "cuda"


def sync_time():
    if DEVICE == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter()


def load_config(model_dir):
    with open(os.path.join(model_dir, "config.json")) as f:
        return json.load(f)


def random_ids(n, vocab, seed, avoid=()):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, min(vocab, 151643), (n,), generator=g)
    return ids


def time_runs(fn, runs):
    fn()  # warm-up
    times = []
    for _ in range(runs):
        t0 = sync_time()
        stages = fn()
        t1 = sync_time()
        times.append((t1 - t0, stages))
    total = statistics.median(t for t, _ in times)
    keys = times[0][1].keys() if times[0][1] else []
    per_stage = {k: statistics.median(s[k] for _, s in times) for k in keys}
    return total, per_stage, [t for t, _ in times]


def bench_text(model_dir, args):
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(DEVICE).eval()
    vocab = model.config.vocab_size
    ids = random_ids(args.prompt_tokens, vocab, args.seed).unsqueeze(0).to(DEVICE)

    @torch.no_grad()
    def run():
        t0 = sync_time()
        out = model(input_ids=ids, use_cache=True)
        t1 = sync_time()
        cache = out.past_key_values
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(args.tokens - 1):
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
        t2 = sync_time()
        return {"prefill_s": t1 - t0, "decode_s": t2 - t1}

    return time_runs(run, args.runs)


def vl_inputs(cfg_vl, args, device):
    """Token ids (with vision_start, image pads, vision_end per image) and patchified pixels."""
    vis = cfg_vl.vision_config
    h, w = (int(v) for v in args.image_size.split("x"))
    patch, merge = vis.patch_size, vis.spatial_merge_size
    gh, gw = h // patch, w // patch
    tokens_per_image = gh * gw // (merge * merge)
    image_pad = cfg_vl.image_token_id
    vstart, vend = cfg_vl.vision_start_token_id, cfg_vl.vision_end_token_id
    per_image = tokens_per_image + 2
    filler = max(1, args.prompt_tokens - args.images * per_image)
    text = random_ids(filler, 151643, args.seed).tolist()
    head, tail = text[: filler // 2], text[filler // 2 :]
    ids = list(head)
    for _ in range(args.images):
        ids += [vstart] + [image_pad] * tokens_per_image + [vend]
    ids += tail
    g = torch.Generator().manual_seed(args.seed + 1)
    n_patches = args.images * gh * gw
    patch_values = vis.in_channels * vis.temporal_patch_size * patch * patch
    pixels = (torch.randint(0, 256, (n_patches, patch_values), generator=g).float() - 127.5) / 127.5
    grid = torch.tensor([[1, gh, gw]] * args.images)
    return (torch.tensor([ids], device=device), pixels.to(device), grid.to(device))


def generate_vl(model, args):
    ids, pixels, grid = vl_inputs(model.config, args, DEVICE)
    mm_types = (ids == model.config.image_token_id).to(torch.int32)
    out = model.generate(
        input_ids=ids, attention_mask=torch.ones_like(ids), pixel_values=pixels,
        image_grid_thw=grid, mm_token_type_ids=mm_types, max_new_tokens=args.tokens,
        min_new_tokens=args.tokens, do_sample=False, use_cache=True,
        return_dict_in_generate=True)
    return ids, out


def bench_vl(model_dir, args, cfg):
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.bfloat16)
    model = model.to(DEVICE).eval()

    @torch.no_grad()
    def run():
        t0 = sync_time()
        generate_vl(model, args)
        t1 = sync_time()
        return {"vlm_s": t1 - t0}

    return time_runs(run, args.runs)


def bench_alpamayo(model_dir, args, cfg):
    tensors = hf_models.load_all_tensors(model_dir)
    vlm = hf_models.alpamayo_vlm(cfg, tensors, DEVICE)
    expert = hf_models.alpamayo_expert(cfg, tensors, DEVICE)
    action_in, action_out = hf_models.alpamayo_action_modules(cfg, tensors)
    action_in = action_in.to(torch.bfloat16).to(DEVICE).eval()
    action_out = action_out.to(torch.bfloat16).to(DEVICE).eval()
    del tensors
    n_way = cfg.get("action_space_cfg", {}).get("n_waypoints", 64)

    @torch.no_grad()
    def run():
        t0 = sync_time()
        ids, out = generate_vl(vlm, args)
        t1 = sync_time()
        cache = out.past_key_values
        seq = out.sequences[0]
        cache_len = seq.numel() - 1
        offset = seq.numel()  # no <|traj_future_start|> from random weights: last index + 1
        rope_delta = int(vlm.model.rope_deltas[0].item()) if vlm.model.rope_deltas is not None else 0
        g = torch.Generator(device=DEVICE).manual_seed(args.seed)
        x = torch.randn(1, n_way, 2, device=DEVICE, generator=g)
        grid = torch.linspace(0, 1, args.steps + 1, device=DEVICE)
        pos = (offset + rope_delta + torch.arange(n_way, device=DEVICE)).view(1, 1, -1).expand(3, 1, -1)
        mask = torch.zeros(1, 1, n_way, cache_len + n_way, device=DEVICE)
        mask[..., offset:cache_len] = torch.finfo(torch.float32).min
        with torch.autocast(DEVICE, dtype=torch.bfloat16):
            for i in range(args.steps):
                e = action_in(x, grid[i].view(1, 1, 1))
                h = expert(inputs_embeds=e, position_ids=pos, past_key_values=cache,
                           attention_mask=mask, use_cache=True).last_hidden_state
                cache.crop(cache_len)
                v = action_out(h)
                x = x + (grid[i + 1] - grid[i]) * v.float()
        t2 = sync_time()
        return {"vlm_s": t1 - t0, "expert_s": t2 - t1}

    return time_runs(run, args.runs)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--prompt-tokens", type=int, default=None)
    p.add_argument("--tokens", type=int, default=21)
    p.add_argument("--images", type=int, default=16)
    p.add_argument("--image-size", default="320x576")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true")
    p.add_argument("--device", default="cuda", help="torch device (cpu only to test this script)")
    args = p.parse_args()
    global DEVICE
    DEVICE = args.device
    cfg = load_config(args.model)
    kind = cfg.get("model_type", "")
    if kind in ("qwen3", "llama"):
        args.prompt_tokens = args.prompt_tokens or 1500
        total, stages, runs = bench_text(args.model, args)
    elif kind == "qwen3_vl":
        args.prompt_tokens = args.prompt_tokens or 3007
        total, stages, runs = bench_vl(args.model, args, cfg)
    elif kind == "alpamayo_r1":
        args.prompt_tokens = args.prompt_tokens or 3007
        total, stages, runs = bench_alpamayo(args.model, args, cfg)
    else:
        print(f"peer_transformers: model_type {kind!r} not supported by this script", file=sys.stderr)
        return 2
    result = {
        "peer": "transformers",
        "model": args.model,
        "model_type": kind,
        "workload": {k: getattr(args, k) for k in ("prompt_tokens", "tokens", "images", "image_size", "steps")},
        "median_s": total,
        "stages_median_s": stages,
        "runs_s": runs,
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if DEVICE == "cuda" else DEVICE,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"transformers {kind}: median {total*1e3:.1f} ms over {args.runs} runs " +
              " ".join(f"{k}={v*1e3:.1f}ms" for k, v in stages.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
