#!/usr/bin/env python3
"""A synthetic input set for `ferry run` on Alpamayo-R1: 16 camera frames and an ego history.

Writes OUT/frames/cam{c}_t{t}.jpg (4 cameras x 4 times, camera-major by name: cross_left,
front_wide, cross_right, front_tele at t0-0.3 s ... t0) showing a simple road scene that moves
with the ego vehicle, and OUT/history.json: 16 past positions at 10 Hz (the last at the
origin) and their yaws, a vehicle at about 8 m/s in a gentle left curve. Needs numpy and Pillow.

  python3 scripts/make_test_inputs.py OUT [--size 1080x1920]
  ferry run --model DIR --frames OUT/frames --ego-history OUT/history.json --picture p.png
"""
import argparse
import json
import math
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw


def history(speed=8.0, yaw_rate=0.08, dt=0.1):
    """Positions and yaws on a circular arc ending at the origin with heading 0."""
    xyz, yaw = [], []
    for k in range(16):
        t = (k - 15) * dt
        a = yaw_rate * t
        xyz.append([speed / yaw_rate * math.sin(a), speed / yaw_rate * (1 - math.cos(a)), 0.0])
        yaw.append(a)
    return xyz, yaw


def frame(cam, t, h, w):
    """Sky, ground, a road whose lane marks shift with time; the side cameras look across it."""
    img = Image.new("RGB", (w, h))
    d = ImageDraw.Draw(img)
    horizon = int(h * (0.45 if cam != 3 else 0.5))
    for y in range(horizon):  # sky gradient
        c = int(150 + 80 * y / max(horizon, 1))
        d.line([(0, y), (w, y)], fill=(c - 60, c - 20, c))
    d.rectangle([0, horizon, w, h], fill=(70, 95, 60))
    centre = {0: 0.85, 1: 0.5, 2: 0.15, 3: 0.5}[cam] * w
    spread = {0: 1.6, 1: 1.0, 2: 1.6, 3: 0.35}[cam]
    road = [(centre - 0.02 * w, horizon), (centre + 0.02 * w, horizon),
            (centre + spread * 0.6 * w, h), (centre - spread * 0.6 * w, h)]
    d.polygon(road, fill=(90, 90, 95))
    rows = np.linspace(0, 1, 12)
    for i in range(len(rows) - 1):
        if (i + t) % 2:  # dashes that move towards the camera over time
            continue
        for side in (-1, 1):
            y0 = horizon + (h - horizon) * rows[i] ** 2
            y1 = horizon + (h - horizon) * rows[i + 1] ** 2
            x0 = centre + side * spread * 0.2 * w * rows[i] ** 2
            x1 = centre + side * spread * 0.2 * w * rows[i + 1] ** 2
            d.line([(x0, y0), (x1, y1)], fill=(235, 235, 220), width=max(2, w // 300))
    rng = np.random.default_rng(cam * 4 + t)
    noise = rng.integers(-6, 7, (h, w, 3))
    px = np.clip(np.asarray(img, dtype=np.int16) + noise, 0, 255).astype(np.uint8)
    return Image.fromarray(px)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out")
    ap.add_argument("--size", default="1080x1920", help="HxW of each frame")
    args = ap.parse_args()
    h, w = (int(v) for v in args.size.lower().split("x"))
    out = Path(args.out)
    (out / "frames").mkdir(parents=True, exist_ok=True)
    for cam in range(4):
        for t in range(4):
            frame(cam, t, h, w).save(out / "frames" / f"cam{cam}_t{t}.jpg", quality=90)
    xyz, yaw = history()
    (out / "history.json").write_text(json.dumps({"xyz": xyz, "yaw": yaw}, indent=1))
    print(f"wrote 16 frames of {h}x{w} and history.json to {out}")


if __name__ == "__main__":
    main()
