#!/usr/bin/env python3
"""ferry's image preprocessing against transformers' Qwen3-VL image processor, live.

Runs tests/tools/image_dump.cpp (target ferry_image_dump) and transformers'
Qwen2VLImageProcessorFast (the processor Qwen3-VL and Alpamayo-R1 use) on the same files, under
the published Qwen3-VL pixel bounds and under Alpamayo-R1's, one image at a time and all of them
as one batch, and prints per file: image_grid_thw equal or not, the largest difference of the
uint8 image before normalization, and the largest difference of pixel_values. Exit status 0 when
every grid is equal and pixel_values are bit-identical (1 otherwise).

Needs torch, torchvision, transformers and Pillow (the GPU machine has them):
  cmake --build build-gpu --target ferry_image_dump
  python3 scripts/compare_image_processor.py --build build-gpu [--images DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "fixtures" / "images"))
from make_reference import SETTINGS, unpatchify  # noqa: E402


def ferry_preprocess(tool, setting, files, out):
    px = SETTINGS[setting]
    r = subprocess.run([str(tool), "preprocess", "--min-pixels", str(px["min_pixels"]),
                        "--max-pixels", str(px["max_pixels"]), str(out), *map(str, files)],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return np.load(out / "pixel_values.npy"), np.load(out / "image_grid_thw.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("FERRY_BUILD_DIR", "build"))
    ap.add_argument("--images", default=str(ROOT / "tests" / "fixtures" / "images" / "inputs"))
    args = ap.parse_args()

    import PIL
    import torch
    import torchvision
    import transformers
    from PIL import Image
    from transformers import Qwen2VLImageProcessorFast

    tool = Path(args.build) / "tests" / "ferry_image_dump"
    if not tool.is_absolute():
        tool = ROOT / tool
    files = sorted(p for p in Path(args.images).iterdir() if p.suffix.lower() in
                   (".png", ".jpg", ".jpeg"))
    print(f"torch {torch.__version__} ({torch.backends.cpu.get_cpu_capability()}), torchvision "
          f"{torchvision.__version__}, transformers {transformers.__version__}, Pillow "
          f"{PIL.__version__}; {len(files)} files from {args.images}")
    worst_u8, worst_pv, bad_grids, cases = 0, 0.0, 0, 0
    with tempfile.TemporaryDirectory() as tmp:
        for setting, px in SETTINGS.items():
            proc = Qwen2VLImageProcessorFast(patch_size=16, temporal_patch_size=2, merge_size=2,
                                             image_mean=[0.5] * 3, image_std=[0.5] * 3, **px)
            print(f"\n== {setting} (min_pixels {px['min_pixels']}, max_pixels {px['max_pixels']})")
            print(f"{'file':34} {'grid_thw':>14} {'grid':>5} {'u8 max':>6} {'u8 diff':>8} "
                  f"{'pv max |d|':>10}")
            batch = [(f,) for f in files] + [tuple(files)]
            for group in batch:
                out = Path(tmp) / f"{setting}_{cases}"
                out.mkdir()
                cases += 1
                pv, grid = ferry_preprocess(tool, setting, group, out)
                ref = proc(images=[Image.open(f) for f in group], return_tensors="pt")
                rpv = ref["pixel_values"].numpy()
                rgrid = ref["image_grid_thw"].numpy()
                name = group[0].name if len(group) == 1 else f"all {len(group)} as one batch"
                if grid.tolist() != rgrid.tolist() or pv.shape != rpv.shape:
                    bad_grids += 1
                    print(f"{name:34} grid {grid.tolist()} vs {rgrid.tolist()}: DIFFERENT")
                    continue
                d_pv = float(np.max(np.abs(pv - rpv))) if pv.size else 0.0
                start, d_u8, n_u8 = 0, 0, 0
                for g in grid:
                    n = int(np.prod(g))
                    a = unpatchify(pv[start:start + n], g).astype(int)
                    b = unpatchify(rpv[start:start + n], g).astype(int)
                    d_u8, n_u8 = max(d_u8, int(np.abs(a - b).max())), n_u8 + int(np.sum(a != b))
                    start += n
                worst_u8, worst_pv = max(worst_u8, d_u8), max(worst_pv, d_pv)
                print(f"{name:34} {str(grid[0].tolist()):>14} {'ok':>5} {d_u8:6d} {n_u8:8d} "
                      f"{d_pv:10.3g}")
    exact = bad_grids == 0 and worst_pv == 0.0
    print(f"\n{cases} cases: {bad_grids} grid mismatches; largest uint8 difference {worst_u8}, "
          f"largest pixel_values difference {worst_pv:.3g}: "
          f"{'bit-identical' if exact else 'NOT bit-identical'}")
    return 0 if exact else 1


if __name__ == "__main__":
    sys.exit(main())
