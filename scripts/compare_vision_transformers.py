#!/usr/bin/env python3
"""Compare ferry's Qwen3-VL vision encoder with transformers' on the same weights and pixels.

Writes a synthetic checkpoint (`ferry synth --preset ...`), runs `ferry_vision_dump` on it (ferry's
vision encoder on the CPU backend, dumping pixel values, the patch grids, the merger output and
every deepstack feature), then runs transformers' `model.model.visual` on the same pixel values
(cast to bf16 first, as get_image_features does) under bf16 autocast, and compares each output.

Different kernels round differently, so exact equality is not expected; a wrong patch order,
rotary layout, position-embedding interpolation or merger shows up as errors of order one.
Exit status 1 when an output's error RMS exceeds --tol of the reference RMS.

Needs torch, transformers and numpy; runs on the GPU machine (or CPU with --device cpu).
"""
import argparse
import os
import subprocess
import sys
import tempfile

import numpy as np


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--build", default="build", help="ferry build folder")
    ap.add_argument("--preset", default="qwen3-vl-tiny")
    ap.add_argument("--images", type=int, default=2)
    ap.add_argument("--height", type=int, default=64)
    ap.add_argument("--width", type=int, default=96)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tol", type=float, default=0.03, help="error RMS / reference RMS limit")
    ap.add_argument("--workdir", default=None)
    args = ap.parse_args()

    work = args.workdir or tempfile.mkdtemp(prefix="ferry_vision_")
    ckpt, out = os.path.join(work, "ckpt"), os.path.join(work, "out")
    os.makedirs(out, exist_ok=True)
    subprocess.run([os.path.join(args.build, "ferry"), "synth", "--preset", args.preset,
                    "--out", ckpt, "--seed", str(args.seed), "--force"], check=True)
    subprocess.run([os.path.join(args.build, "tests", "ferry_vision_dump"), ckpt, out,
                    str(args.images), str(args.height), str(args.width), str(args.seed)],
                   check=True)

    import torch
    import transformers

    model = transformers.Qwen3VLForConditionalGeneration.from_pretrained(
        ckpt, dtype=torch.bfloat16, attn_implementation="sdpa").to(args.device).eval()
    visual = model.model.visual
    pixels = torch.from_numpy(np.load(os.path.join(out, "pixel_values.npy"))).to(args.device)
    grid = torch.from_numpy(np.load(os.path.join(out, "image_grid_thw.npy"))).to(args.device)
    with torch.no_grad(), torch.autocast(args.device, dtype=torch.bfloat16):
        res = visual(pixels.to(visual.dtype), grid_thw=grid)
    if isinstance(res, tuple):
        embeds, deepstack = res[0], res[1]
    else:  # newer transformers return a model output
        embeds = getattr(res, "pooler_output", None)
        deepstack = getattr(res, "deepstack_features", None)
        if embeds is None or deepstack is None:
            print("unknown output of the vision model:", type(res), list(vars(res)))
            return 1

    failed = False
    pairs = [("image_embeds", embeds)] + [(f"deepstack_{k}", d) for k, d in enumerate(deepstack)]
    for name, ref in pairs:
        ref = ref.float().cpu().numpy().astype(np.float64)
        got = np.load(os.path.join(out, name + ".npy")).astype(np.float64)
        if got.shape != ref.shape:
            print(f"{name}: shape {got.shape} vs transformers {ref.shape}")
            failed = True
            continue
        err = got - ref
        ratio = np.sqrt(np.mean(err ** 2)) / np.sqrt(np.mean(ref ** 2))
        worst = np.max(np.abs(err)) / np.max(np.abs(ref))
        ok = ratio <= args.tol
        failed |= not ok
        print(f"{name}: shape {got.shape}, error rms / ref rms = {ratio:.2e}, "
              f"max |err| / max |ref| = {worst:.2e} {'ok' if ok else 'FAIL'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
