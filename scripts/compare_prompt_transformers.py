#!/usr/bin/env python3
"""ferry's real-input prompt against transformers' Qwen3-VL processor, live.

Makes (or takes) 16 camera frames and an ego history, runs
`ferry run --frames F --ego-history H --max-tokens 1 --dump-inputs D` on an Alpamayo-R1
checkpoint, and builds the same inputs the way the official pipeline does (AR1/helper.py and
test_inference.py): the messages of create_message, Qwen3VLProcessor with the Qwen3-VL image
processor at Alpamayo's pixel bounds (min 163840, max 196608) and the checkpoint's own tokenizer,
apply_chat_template(tokenize=True, add_generation_prompt=False, continue_final_message=True),
then the 48 <|traj_history|> placeholders overwritten by the history tokens (fuse_traj_tokens,
spec §4.5, computed here in torch) and the position ids from transformers' get_rope_index.
Prints, and requires equal: input_ids, image_grid_thw, position ids and rope delta; pixel_values
must be bit-identical (the image processor's own comparison is compare_image_processor.py).

The chat template is Qwen3-VL-Instruct's: pass its chat_template.json / .jinja with --template,
or let the script find one in the Hugging Face cache (models--Qwen--Qwen3-VL-*-Instruct). Without
either it uses a transcription of the template's rules for system, user (images, text) and
assistant turns, and says so: then only ferry's ids against that transcription are checked.

Needs torch, transformers (>= 4.57), Pillow and numpy (the GPU machine has them):
  python3 scripts/compare_prompt_transformers.py --model /path/alpamayo-r1-10b --ferry build-gpu/ferry
  [--frames DIR --ego-history FILE] [--template FILE] [--tokenizer tokenizer.json]
--tokenizer swaps in another tokenizer.json (e.g. the real Qwen vocabulary that
tests/python/qwen_vocab.py builds) for both sides, through a folder of links to the checkpoint.
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

# The rules of Qwen3-VL's template that Alpamayo's messages reach, in Jinja: a system turn, user
# turns with image and text parts, assistant turns with text parts; used only when the real
# template is not at hand.
TRANSCRIBED_TEMPLATE = (
    "{%- for m in messages -%}"
    "{{- '<|im_start|>' + m.role + '\\n' -}}"
    "{%- if m.content is string -%}{{- m.content -}}{%- else -%}"
    "{%- for c in m.content -%}"
    "{%- if c.type == 'image' or 'image' in c -%}{{- '<|vision_start|><|image_pad|><|vision_end|>' -}}"
    "{%- elif 'text' in c -%}{{- c.text -}}{%- endif -%}"
    "{%- endfor -%}{%- endif -%}"
    "{{- '<|im_end|>\\n' -}}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{- '<|im_start|>assistant\\n' -}}{%- endif -%}"
)


def find_template(given):
    paths = [given] if given else sorted(glob.glob(os.path.expanduser(
        "~/.cache/huggingface/hub/models--Qwen--Qwen3-VL-*-Instruct/snapshots/*/chat_template.json")))
    for p in paths:
        if not p or not os.path.exists(p):
            continue
        text = Path(p).read_text()
        if p.endswith(".json"):
            text = json.loads(text)["chat_template"]
        return text, p
    if given:
        sys.exit(f"--template {given}: not found")
    return TRANSCRIBED_TEMPLATE, None


def make_inputs(folder):
    """16 noisy 1080x1920 frames (camera-major names) and a curving ego history."""
    from PIL import Image

    frames = folder / "frames"
    frames.mkdir()
    rng = np.random.default_rng(1)
    for cam in range(4):
        for t in range(4):
            base = rng.integers(0, 256, (270, 480, 3), dtype=np.uint8)
            img = Image.fromarray(base).resize((1920, 1080), Image.BILINEAR)
            img.save(frames / f"cam{cam}_t{t}.jpg", quality=92)
    xyz = [[-1.2 * (15 - k) + 0.003 * k * k, 0.015 * (15 - k) ** 1.6, 0.0] for k in range(16)]
    xyz[15] = [0.0, 0.0, 0.0]
    history = folder / "history.json"
    history.write_text(json.dumps({"xyz": xyz}))
    return frames, history


def frame_paths(frames):
    manifest = Path(frames) / "frames.json"
    if manifest.exists():
        names = json.loads(manifest.read_text())["frames"]
        return [str(Path(frames) / n) for n in names]
    return sorted(str(p) for p in Path(frames).iterdir()
                  if p.suffix.lower() in (".jpg", ".jpeg", ".png") and not p.name.startswith("."))


def history_tokens(xyz):
    """Spec §4.5 with torch: deltas from a padded origin, 1000 bins, torch.round, + 154669."""
    import torch

    p = torch.tensor(xyz, dtype=torch.float32)
    d = p - torch.cat([torch.zeros(1, 3), p[:-1]])
    lo = torch.tensor([-4.0, -4.0, -10.0])
    hi = torch.tensor([4.0, 4.0, 10.0])
    q = torch.clamp(torch.round((d - lo) / (hi - lo) * 999), 0, 999).long()
    return (q.reshape(-1) + 154669).tolist()


def rope_positions(input_ids, grid, mm_token_type_ids, image_token):
    """transformers' get_rope_index on a small Qwen3-VL (only its config is read)."""
    import torch
    from transformers import Qwen3VLConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLModel

    rope = {"rope_type": "default", "rope_theta": 5e6, "mrope_section": [4, 2, 2],
            "mrope_interleaved": True}
    text = dict(hidden_size=64, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4,
                num_key_value_heads=2, head_dim=16, vocab_size=int(input_ids.max()) + 1)
    vision = dict(depth=1, hidden_size=32, intermediate_size=32, num_heads=2, out_hidden_size=64,
                  deepstack_visual_indexes=[])
    try:  # transformers 5 names the rotary settings rope_parameters, 4.x rope_scaling
        cfg = Qwen3VLConfig(text_config=dict(text, rope_parameters=rope), vision_config=vision,
                            image_token_id=image_token)
        model = Qwen3VLModel(cfg).eval()
    except (TypeError, ValueError, KeyError):
        cfg = Qwen3VLConfig(text_config=dict(text, rope_scaling=rope), vision_config=vision,
                            image_token_id=image_token)
        model = Qwen3VLModel(cfg).eval()
    mask = torch.ones_like(input_ids)
    try:  # transformers 5: (input_ids, mm_token_type_ids, image_grid_thw, ...)
        pos, delta = model.get_rope_index(input_ids, mm_token_type_ids, grid, attention_mask=mask)
    except TypeError:  # transformers 4.x: (input_ids, image_grid_thw, video_grid_thw, mask)
        pos, delta = model.get_rope_index(input_ids, grid, None, attention_mask=mask)
    return pos.numpy(), int(delta.reshape(-1)[0])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="an Alpamayo-R1 checkpoint folder")
    ap.add_argument("--ferry", default=os.environ.get("FERRY_BINARY", "build/ferry"))
    ap.add_argument("--frames")
    ap.add_argument("--ego-history")
    ap.add_argument("--template", help="Qwen3-VL-Instruct chat_template.json or .jinja")
    ap.add_argument("--tokenizer", help="another tokenizer.json for both sides")
    ap.add_argument("--backend", default="", help="ferry's --backend (default: its own choice)")
    args = ap.parse_args()

    import torch
    import transformers
    from PIL import Image
    from transformers import PreTrainedTokenizerFast, Qwen2VLImageProcessorFast, Qwen3VLProcessor

    template, template_path = find_template(args.template)
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = Path(args.model).resolve()
        if args.tokenizer:
            linked = tmp / "model"
            linked.mkdir()
            for f in model.iterdir():
                if f.name != "tokenizer.json":
                    (linked / f.name).symlink_to(f)
            (linked / "tokenizer.json").symlink_to(Path(args.tokenizer).resolve())
            model = linked
        if args.frames:
            frames, history = Path(args.frames), Path(args.ego_history)
        else:
            frames, history = make_inputs(tmp)
        dump = tmp / "dump"
        cmd = [args.ferry, "run", "--model", str(model), "--frames", str(frames), "--ego-history",
               str(history), "--max-tokens", "1", "--greedy", "--quiet", "--json",
               "--dump-inputs", str(dump)]
        if args.backend:
            cmd += ["--backend", args.backend]
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode != 0:
            sys.exit(f"ferry run failed: {r.stderr.strip()}")
        f_ids = np.load(dump / "input_ids.npy")
        f_pos = np.load(dump / "position_ids.npy")
        f_grid = np.load(dump / "image_grid_thw.npy")
        f_pv = np.load(dump / "pixel_values.npy")

        # The official pipeline's side.
        tokenizer = PreTrainedTokenizerFast(tokenizer_file=str(model / "tokenizer.json"))
        image_processor = Qwen2VLImageProcessorFast(
            patch_size=16, temporal_patch_size=2, merge_size=2, image_mean=[0.5] * 3,
            image_std=[0.5] * 3, min_pixels=163840, max_pixels=196608)
        try:
            from transformers import Qwen3VLVideoProcessor
            video = Qwen3VLVideoProcessor()
        except ImportError:
            video = None
        try:
            processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=tokenizer,
                                         video_processor=video, chat_template=template)
        except (TypeError, ValueError):
            # A processor that insists on a Qwen2 tokenizer class: made with one, then given the
            # checkpoint's tokenizer, as AR1/helper.py:get_processor does.
            from transformers import Qwen2TokenizerFast
            qwen2 = Qwen2TokenizerFast(tokenizer_file=str(model / "tokenizer.json"))
            processor = Qwen3VLProcessor(image_processor=image_processor, tokenizer=qwen2,
                                         video_processor=video, chat_template=template)
            processor.tokenizer = tokenizer
        images = [Image.open(p).convert("RGB") for p in frame_paths(frames)]
        hist_text = "<|traj_history_start|>" + "<|traj_history|>" * 48 + "<|traj_history_end|>"
        messages = [
            {"role": "system", "content": [{"type": "text", "text":
                "You are a driving assistant that generates safe and accurate actions."}]},
            {"role": "user", "content": [{"type": "image", "image": im} for im in images] + [
                {"type": "text", "text": hist_text + "output the chain-of-thought reasoning of "
                 "the driving process, then output the future trajectory."}]},
            {"role": "assistant", "content": [{"type": "text", "text": "<|cot_start|>"}]},
        ]
        inputs = processor.apply_chat_template(messages, tokenize=True,
                                               add_generation_prompt=False,
                                               continue_final_message=True, return_dict=True,
                                               return_tensors="pt")
        ids = inputs["input_ids"].clone()
        placeholder = tokenizer.convert_tokens_to_ids("<|traj_history|>")
        slots = (ids[0] == placeholder).nonzero().reshape(-1)
        xyz = json.loads(Path(history).read_text())
        xyz = xyz["xyz"] if isinstance(xyz, dict) else xyz
        hist = history_tokens(xyz)
        assert len(slots) == len(hist), f"{len(slots)} history placeholders"
        ids[0, slots] = torch.tensor(hist)
        grid = inputs["image_grid_thw"]
        image_token = tokenizer.convert_tokens_to_ids("<|image_pad|>")
        mm = inputs.get("mm_token_type_ids", (ids == image_token).to(torch.int32))
        pos, delta = rope_positions(ids, grid, mm, image_token)

    print(f"transformers {transformers.__version__}, torch {torch.__version__}; template: "
          f"{template_path or 'TRANSCRIBED (the real Qwen3-VL template was not found)'}")
    ok = True

    def check(name, same, detail=""):
        nonlocal ok
        ok = ok and same
        print(f"{name:16} {'identical' if same else 'DIFFER'} {detail}")

    r_ids = ids.numpy()
    check("input_ids", f_ids.shape == r_ids.shape and (f_ids == r_ids).all(),
          f"({r_ids.shape[1]} tokens, {int((r_ids == image_token).sum())} image tokens)")
    if f_ids.shape == r_ids.shape and not (f_ids == r_ids).all():
        at = int(np.argmax(f_ids[0] != r_ids[0]))
        print(f"  first difference at {at}: ferry {f_ids[0, at:at + 8].tolist()} "
              f"transformers {r_ids[0, at:at + 8].tolist()}")
    check("image_grid_thw", f_grid.tolist() == grid.tolist(), f"{grid[0].tolist()} x {len(grid)}")
    check("position_ids", f_pos.shape == pos.shape and (f_pos == pos).all(),
          f"(rope delta {delta}; ferry {int(f_pos.max()) + 1 - f_pos.shape[-1]})")
    r_pv = inputs["pixel_values"].float().numpy()
    same_pv = f_pv.shape == r_pv.shape and (f_pv == r_pv).all()
    worst = float(np.abs(f_pv - r_pv).max()) if f_pv.shape == r_pv.shape else float("nan")
    check("pixel_values", same_pv, f"{list(r_pv.shape)}, max |diff| {worst:.3g}")
    if template_path is None:
        print("note: against the transcribed template only; pass --template for the real one")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
