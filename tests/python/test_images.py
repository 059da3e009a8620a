"""Image decoding and Qwen3-VL preprocessing, against Pillow (live) and against transformers /
torchvision references made once by tests/fixtures/images/make_reference.py (CI has no torch).

Drives tests/tools/image_dump.cpp (target ferry_image_dump) found at $FERRY_BUILD_DIR/tests/.
"""
import hashlib
import json
import os
import struct
import subprocess
import zlib

import numpy as np
import pytest
from PIL import Image

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FERRY_BUILD_DIR", "build")
TOOL = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "tests",
                    "ferry_image_dump")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "images")
INPUTS = os.path.join(FIXTURES, "inputs")
FILES = sorted(os.listdir(INPUTS))
with open(os.path.join(FIXTURES, "reference.json")) as f:
    REFERENCE = json.load(f)


def dump(*args):
    if not os.path.exists(TOOL):
        pytest.fail(f"{TOOL} is missing: build the ferry_image_dump target", pytrace=False)
    return subprocess.run([TOOL, *args], capture_output=True, text=True, timeout=120)


def decode_lines(tmp_path, paths):
    r = dump("decode", str(tmp_path), *paths)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert len(lines) == len(paths), r.stdout
    return lines


def pil_rgb(path):
    """What transformers 5 turns a PIL image into (image_transforms.convert_to_rgb: an image with
    an alpha band or a transparency key goes through RGBA composited over white), CHW uint8."""
    im = Image.open(path)
    if "A" in im.getbands() or im.info.get("transparency") is not None:
        rgba = im.convert("RGBA")
        im = Image.alpha_composite(Image.new("RGBA", rgba.size, (255, 255, 255)), rgba)
    return np.asarray(im.convert("RGB")).transpose(2, 0, 1)


def test_fixtures_cover_the_brief():
    sizes = {REFERENCE["cases"][f"alpamayo/{n}"]["pixel_values_shape"][0] for n in FILES}
    assert len(FILES) >= 20 and len(sizes) >= 3
    assert {n.rsplit(".", 1)[1] for n in FILES} == {"png", "jpg"}
    assert set(REFERENCE["cases"]) == {f"{s}/{n}" for s in ("qwen3_vl", "alpamayo") for n in FILES}


def test_decode_matches_pillow(tmp_path):
    paths = [os.path.join(INPUTS, n) for n in FILES]
    lines = decode_lines(tmp_path, paths)
    for i, (name, path) in enumerate(zip(FILES, paths)):
        assert lines[i].startswith("ok "), f"{name}: {lines[i]}"
        ours = np.load(tmp_path / f"decoded_{i}.npy")
        theirs = pil_rgb(path)
        assert ours.shape == theirs.shape, name
        diff = np.abs(ours.astype(int) - theirs.astype(int))
        assert diff.max() == 0, f"{name}: {np.count_nonzero(diff)} values differ, max {diff.max()}"


def test_alpha_composite_matches_pillow(tmp_path):
    # Every (value, alpha) pair through an RGBA PNG, against PIL's alpha_composite over white.
    v, a = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))
    rgba = np.dstack([v, 255 - v, v // 2 + 7, a])
    path = tmp_path / "all_alphas.png"
    Image.fromarray(rgba, "RGBA").save(path)
    decode_lines(tmp_path, [str(path)])
    assert np.array_equal(np.load(tmp_path / "decoded_0.npy"), pil_rgb(path))


@pytest.mark.parametrize("setting", ["qwen3_vl", "alpamayo"])
def test_preprocess_matches_transformers_reference(tmp_path, setting):
    px = REFERENCE["meta"]["settings"][setting]
    arrays = np.load(os.path.join(FIXTURES, "reference_arrays.npz"))
    for name in FILES:
        case = REFERENCE["cases"][f"{setting}/{name}"]
        out = tmp_path / name
        out.mkdir()
        r = dump("preprocess", "--min-pixels", str(px["min_pixels"]), "--max-pixels",
                 str(px["max_pixels"]), str(out), os.path.join(INPUTS, name))
        assert r.returncode == 0, f"{name}: {r.stderr}"
        grid = np.load(out / "image_grid_thw.npy")
        assert grid.tolist() == [case["grid_thw"]], name
        resized = np.load(out / "resized_0.npy")
        key = f"{setting}__{name}"
        if key in arrays:  # a full reference: say how far off, not only that it is
            diff = np.abs(resized.astype(int) - arrays[key].astype(int))
            assert diff.max() == 0, f"{name}: {np.count_nonzero(diff)} differ, max {diff.max()}"
        assert hashlib.sha256(resized.tobytes()).hexdigest() == case["resized_sha256"], name
        pv = np.load(out / "pixel_values.npy")
        assert list(pv.shape) == case["pixel_values_shape"], name
        assert hashlib.sha256(pv.astype("<f4").tobytes()).hexdigest() == \
            case["pixel_values_sha256"], name


def test_several_images_concatenate_in_order(tmp_path):
    names = ["rgb_q90_99x101.jpg", "gray8_15x17.png", "rgb_q85_333x517.jpg"]
    r = dump("preprocess", "--min-pixels", "163840", "--max-pixels", "196608", str(tmp_path),
             *[os.path.join(INPUTS, n) for n in names])
    assert r.returncode == 0, r.stderr
    grids = np.load(tmp_path / "image_grid_thw.npy").tolist()
    assert grids == [REFERENCE["cases"][f"alpamayo/{n}"]["grid_thw"] for n in names]
    pv = np.load(tmp_path / "pixel_values.npy")
    start = 0
    for n, (t, h, w) in zip(names, grids):
        part = pv[start:start + t * h * w]
        assert hashlib.sha256(part.astype("<f4").tobytes()).hexdigest() == \
            REFERENCE["cases"][f"alpamayo/{n}"]["pixel_values_sha256"], n
        start += t * h * w
    assert start == pv.shape[0]


def png_with_ihdr(width, height, depth=8, color_type=2, body=b""):
    ihdr = struct.pack(">IIBBBBB", width, height, depth, color_type, 0, 0, 0)
    crc = struct.pack(">I", zlib.crc32(b"IHDR" + ihdr))
    return b"\x89PNG\r\n\x1a\n" + struct.pack(">I", 13) + b"IHDR" + ihdr + crc + body


def hostile_files(tmp_path):
    jpg = open(os.path.join(INPUTS, "rgb_q90_99x101.jpg"), "rb").read()
    png = open(os.path.join(INPUTS, "rgb8_37x53.png"), "rb").read()
    prog = open(os.path.join(INPUTS, "progressive_q85_200x150.jpg"), "rb").read()
    bad_crc = bytearray(png)
    bad_crc[40] ^= 0xFF  # inside IDAT's data: zlib or CRC trouble
    sof = jpg.index(b"\xff\xc0")
    huge_jpg = bytearray(jpg)
    huge_jpg[sof + 5:sof + 9] = struct.pack(">HH", 65000, 65000)
    cases = {
        "empty.png": b"",
        "text.jpg": b"hello, not an image\n",
        "jpeg_magic_only.jpg": b"\xff\xd8\xff",
        "jpeg_truncated_half.jpg": jpg[: len(jpg) // 2],
        "jpeg_truncated_header.jpg": jpg[:200],
        "jpeg_progressive_truncated.jpg": prog[: len(prog) * 2 // 3],
        "jpeg_huge_dims.jpg": bytes(huge_jpg),
        "png_signature_only.png": png[:8],
        "png_truncated_half.png": png[: len(png) // 2],
        "png_bad_idat.png": bytes(bad_crc),
        "png_huge_dims.png": png_with_ihdr(100000, 100000),
        "png_zero_width.png": png_with_ihdr(0, 10),
        "png_bad_depth.png": png_with_ihdr(10, 10, depth=7),
        "png_bad_color_type.png": png_with_ihdr(10, 10, color_type=5),
        "png_no_idat.png": png_with_ihdr(4, 4) + struct.pack(">I", 0) + b"IEND" +
        struct.pack(">I", zlib.crc32(b"IEND")),
    }
    paths = []
    for name, data in cases.items():
        p = tmp_path / name
        p.write_bytes(data)
        paths.append(str(p))
    return paths


def test_hostile_files_give_one_line_errors(tmp_path):
    paths = hostile_files(tmp_path)
    (tmp_path / "out").mkdir()
    lines = decode_lines(tmp_path / "out", paths)
    for path, line in zip(paths, lines):
        name = os.path.basename(path)
        assert line.startswith("error: "), f"{name} decoded: {line}"
        assert path in line, line  # names the file
    by_name = dict(zip((os.path.basename(p) for p in paths), lines))
    assert "over the limit" in by_name["png_huge_dims.png"]
    assert "over the limit" in by_name["jpeg_huge_dims.jpg"]
    assert "not a JPEG or PNG" in by_name["text.jpg"]


def test_missing_file_and_bad_image_in_a_batch_fail_cleanly(tmp_path):
    good = os.path.join(INPUTS, "rgb8_37x53.png")
    r = dump("preprocess", str(tmp_path), good, str(tmp_path / "nope.jpg"))
    assert r.returncode == 2 and r.stderr.count("\n") == 1 and "nope.jpg: cannot open" in r.stderr
    bad = tmp_path / "bad.png"
    bad.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\0" * 30)
    r = dump("preprocess", str(tmp_path), good, str(bad))
    assert r.returncode == 2 and "bad.png: PNG:" in r.stderr, r.stderr
