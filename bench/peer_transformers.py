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
import math
import os
import statistics
import sys
import time

import torch


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


def vl_model_from_config(vl_cfg_dict, state_dict_source, prefix):
    """A Qwen3VLForConditionalGeneration built from a config dict, weights from safetensors
    shards under `prefix` (stripped)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    config = Qwen3VLConfig(**vl_cfg_dict)
    model = build_on_device(Qwen3VLForConditionalGeneration, config)
    state = {k[len(prefix):]: v for k, v in state_dict_source.items() if k.startswith(prefix)}
    model.load_state_dict(state, strict=True)
    return model.eval()


def build_on_device(cls, config):
    """The module made directly on the device in bf16 (its random init is overwritten by the
    checkpoint right after)."""
    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(DEVICE):
            return cls(config)
    finally:
        torch.set_default_dtype(previous)


def load_all_tensors(model_dir):
    from safetensors.torch import load_file

    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    tensors = {}
    for shard in shards:
        tensors.update(load_file(os.path.join(model_dir, shard)))
    return tensors


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


class ActionInProj(torch.nn.Module):
    """Alpamayo-R1's action_in_proj (spec §6.2): Fourier features of (accel, curvature, t) →
    Linear-SiLU-RMSNorm-Linear-SiLU-RMSNorm-Linear → LayerNorm. Our own module for timing; the
    parameter names follow the checkpoint."""

    def __init__(self, hidden, out, max_freq, n_feats):
        super().__init__()
        self.register_buffer("freqs", torch.logspace(0, math.log10(max_freq), n_feats // 2))
        inp = 3 * n_feats
        self.encoder = torch.nn.Module()
        self.encoder.trunk = torch.nn.Sequential(
            torch.nn.Linear(inp, hidden), torch.nn.SiLU(), torch.nn.RMSNorm(hidden, eps=1e-5),
            torch.nn.Linear(hidden, hidden), torch.nn.SiLU(), torch.nn.RMSNorm(hidden, eps=1e-5),
            torch.nn.Linear(hidden, out))
        self.norm = torch.nn.LayerNorm(out, eps=1e-5)

    def fourier(self, u):
        a = (u.unsqueeze(-1) * self.freqs.float()) * 2 * math.pi
        return math.sqrt(2) * torch.cat([a.sin(), a.cos()], dim=-1)

    def forward(self, x, t):
        f = torch.cat([self.fourier(x[..., 0]), self.fourier(x[..., 1]),
                       self.fourier(t.reshape(-1, 1).expand(x.shape[:-1]))], dim=-1)
        return self.norm(self.encoder.trunk(f))


def bench_alpamayo(model_dir, args, cfg):
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    tensors = load_all_tensors(model_dir)
    vlm = vl_model_from_config(cfg["vlm_config"], tensors, "vlm.")
    text_cfg = dict(cfg["vlm_config"]["text_config"])
    text_cfg.update({k: v for k, v in cfg["expert_cfg"].items() if k != "dtype"})
    expert_config = Qwen3VLTextConfig(**text_cfg)
    expert = build_on_device(Qwen3VLTextModel, expert_config)
    del expert.embed_tokens
    expert.load_state_dict({k[len("expert."):]: v for k, v in tensors.items()
                            if k.startswith("expert.")}, strict=True)
    expert = expert.eval()
    aip = cfg["action_in_proj_cfg"]
    action_in = ActionInProj(aip["hidden_size"], expert_config.hidden_size, aip["max_freq"],
                             aip["num_fourier_feats"])
    result = action_in.load_state_dict({k[len("action_in_proj."):]: v for k, v in tensors.items()
                                        if k.startswith("action_in_proj.")}, strict=False)
    if result.unexpected_keys or set(result.missing_keys) - {"freqs"}:
        raise SystemExit(f"action_in_proj weights do not match: {result}")
    action_in = action_in.to(torch.bfloat16).to(DEVICE).eval()
    action_out = torch.nn.Linear(expert_config.hidden_size, 2)
    action_out.load_state_dict({"weight": tensors["action_out_proj.weight"],
                                "bias": tensors["action_out_proj.bias"]})
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
