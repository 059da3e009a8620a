#!/usr/bin/env python3
"""Compare ferry's Alpamayo action expert with transformers' Qwen3VLTextModel.

Writes a synthetic Alpamayo checkpoint (`ferry synth --preset alpamayo-tiny`), runs
`ferry_expert_dump` on it (ferry's expert on the CPU backend over a seeded stand-in for the text
KV cache, from a seeded x0), then runs the same flow in PyTorch: transformers' Qwen3VLTextModel
for the expert layers (DynamicCache holding the same cache rows, the additive mask of spec §6.3,
positions rope_pos0 + j), with action_in_proj and action_out_proj written here from spec §6.2
(Fourier frequencies fp32-computed and rounded to bf16, ferry's default), all under bf16 autocast
as the reference runs. Compares every step's velocity and the final actions.

With --floor it also runs the PyTorch side in fp32 and reports how far ferry and the bf16
PyTorch run each are from it. Exit status 1 when the final actions differ by more than --tol
(error RMS / actions RMS). Needs torch, transformers, safetensors and numpy; GPU machine.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np


def rms_ratio(got, ref):
    return float(np.sqrt(np.mean((got - ref) ** 2) / np.mean(ref ** 2)))


def build_torch_side(ckpt, device):
    import torch

    import hf_models

    cfg = json.load(open(os.path.join(ckpt, "config.json")))
    tensors = hf_models.load_all_tensors(ckpt)
    expert = hf_models.alpamayo_expert(cfg, tensors, device)
    action_in, action_out = hf_models.alpamayo_action_modules(cfg, tensors)
    mods = [m.to(torch.bfloat16).to(device).eval() for m in (expert, action_in, action_out)]
    return mods, cfg


def run_flow(mods, dump, device, steps, fp32, forced=None):
    """Euler steps of the torch expert. With `forced` ([steps, waypoints*2] velocities), x is
    advanced with those instead of torch's own, so each step sees exactly ferry's x_i
    (teacher forcing): the flow amplifies any difference through the Fourier features of x (up
    to 100 cycles per unit), so only a forced run compares the model and not the chaos."""
    import torch
    from transformers import DynamicCache

    expert, action_in, action_out = mods
    if fp32:
        expert, action_in, action_out = (m.float() for m in mods)
    cache_len, offset, pos0 = (int(v) for v in dump["meta"][0])
    layers = expert.config.num_hidden_layers
    kv_heads, hd = expert.config.num_key_value_heads, expert.config.head_dim
    dtype = torch.float32 if fp32 else torch.bfloat16

    def cache_of(name):
        c = torch.from_numpy(dump[name]).to(device).view(layers, cache_len, kv_heads, hd)
        return c.permute(0, 2, 1, 3).unsqueeze(1).to(dtype)  # [L, 1, kv_heads, len, hd]

    k, v = cache_of("k_cache"), cache_of("v_cache")
    cache = DynamicCache()
    for layer in range(layers):
        cache.update(k[layer], v[layer], layer)
    x = torch.from_numpy(dump["x0"]).to(device).unsqueeze(0)
    n_way = x.shape[1]
    grid = torch.linspace(0, 1, steps + 1, device=device)
    pos = (pos0 + torch.arange(n_way, device=device)).view(1, 1, -1).expand(3, 1, -1)
    mask = torch.zeros(1, 1, n_way, cache_len + n_way, device=device)
    mask[..., offset:cache_len] = torch.finfo(torch.float32).min
    velocities = []
    with torch.no_grad(), torch.autocast(device, dtype=torch.bfloat16, enabled=not fp32):
        for i in range(steps):
            e = action_in(x, grid[i].view(1, 1, 1))
            h = expert(inputs_embeds=e, position_ids=pos, past_key_values=cache,
                       attention_mask=mask.to(e.dtype), use_cache=True).last_hidden_state
            cache.crop(cache_len)
            vel = action_out(h)
            velocities.append(vel.float().reshape(-1).cpu().numpy())
            step_v = vel.float()
            if forced is not None:
                step_v = torch.from_numpy(forced[i]).to(device).float().view_as(step_v)
            x = x + (grid[i + 1] - grid[i]) * step_v
    return np.stack(velocities).astype(np.float64), x[0].float().cpu().numpy().astype(np.float64)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="ferry build folder")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tol", type=float, default=0.05,
                    help="teacher-forced velocity error RMS / velocity RMS, worst step")
    ap.add_argument("--floor", action="store_true", help="also compare against an fp32 run")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="ferry_expert_")
    ckpt, out = os.path.join(work, "ckpt"), os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    subprocess.run([os.path.join(args.build, "ferry"), "synth", "--preset", "alpamayo-tiny",
                    "--out", ckpt, "--seed", str(args.seed), "--force"], check=True)
    subprocess.run([os.path.join(args.build, "tests", "ferry_expert_dump"), ckpt, out,
                    str(args.seed)], check=True)
    dump = {n: np.load(os.path.join(out, n + ".npy"))
            for n in ("x0", "velocities", "actions", "k_cache", "v_cache", "meta")}
    mods, cfg = build_torch_side(ckpt, args.device)
    steps = dump["velocities"].shape[0]
    ferry_vel = dump["velocities"].astype(np.float64)
    ferry_act = dump["actions"].astype(np.float64)
    forced = dump["velocities"].astype(np.float32)
    vel_tf, _ = run_flow(mods, dump, args.device, steps, fp32=False, forced=forced)
    worst = 0.0
    for i in range(steps):
        r = rms_ratio(ferry_vel[i], vel_tf[i])
        worst = max(worst, r)
        print(f"step {i} (teacher-forced: both see ferry's x_i): velocity error rms / rms = {r:.2e}")
    ok = worst <= args.tol
    print(f"teacher-forced velocity: worst {worst:.2e} (limit {args.tol}) {'ok' if ok else 'FAIL'}")
    vel, actions = run_flow(mods, dump, args.device, steps, fp32=False)
    ratio = rms_ratio(ferry_act, actions)
    print(f"free-running actions after {steps} steps: error rms / rms = {ratio:.2e} "
          "(informational: random weights make the flow chaotic)")
    if args.floor:
        vel32, act32 = run_flow(mods, dump, args.device, steps, fp32=True, forced=forced)
        print(f"vs fp32, teacher-forced velocities: ferry "
              f"{max(rms_ratio(ferry_vel[i], vel32[i]) for i in range(steps)):.2e}, torch bf16 "
              f"{max(rms_ratio(vel_tf[i], vel32[i]) for i in range(steps)):.2e} (worst step)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
