#!/usr/bin/env python3
"""Times transformers (PyTorch eager, every weight on the GPU) on a ferry-synthesized checkpoint
and workload, so that ferry's numbers are always a ratio measured side by side on one GPU.

  python3 bench/peer_transformers.py --model DIR [--runs 3] [--json] [--max-memory 15GiB]

--max-memory SIZE caps the GPU the way Accelerate users do: the whole model is built on the CPU,
`infer_auto_device_map(max_memory={0: SIZE, "cpu": ...})` places what fits (decoder layers and
vision blocks never split), `dispatch_model` offloads the rest, and Accelerate's hooks move each
offloaded module's weights to the GPU for every call. The peak device memory torch allocated is
reported next to the cap.

Workloads (the ones ferry bench uses):
  qwen3 / llama : --prompt-tokens (1500) random ids, --tokens (21) greedy tokens.
  qwen3_vl      : --images (16) of --image-size (320x576), prompt of about --prompt-tokens (3007)
                  tokens incl. 180 image tokens per image, --tokens greedy tokens.
  alpamayo_r1   : the qwen3_vl workload, then --steps (10) flow-matching steps of the action
                  expert over the prompt cache (the expert is a Qwen3-VL text model without an
                  embedding; it attends the VLM's layer-i cache plus its own 64 tokens).

Reports the median of --runs timed runs after one warm-up, per stage where it can be split.
Progress goes to stderr as it happens, each line with the seconds since the script started
(tensors read, modules built, device map chosen, dispatched, each warm-up and timed run), so a
step cut by a timeout still shows where its time went. Alpamayo-R1's modules are built without
their random init (scripts/hf_models.py; --random-init builds them the old, slow way, the
same model). --save-outputs FILE writes the last run's outputs (torch.save) for comparisons.
Runs on the GPU machine only (torch, transformers); never in CI (--device cpu to test it).
"""
import argparse
import json
import os
import statistics
import sys
import time

START = time.perf_counter()


def progress(message):
    """One line to stderr: seconds since the script started, then what just finished."""
    print(f"peer [{time.perf_counter() - START:8.1f} s] {message}", file=sys.stderr, flush=True)


import torch  # noqa: E402

progress(f"torch {torch.__version__} imported")

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


WARMUP = 1
OUTPUTS = None  # the last run's outputs, kept only under --save-outputs


def describe(stages):
    return " ".join(f"{k}={v:.2f}s" for k, v in (stages or {}).items())


def time_runs(fn, runs):
    for i in range(WARMUP):
        t0 = sync_time()
        stages = fn()
        progress(f"warm-up {i + 1}/{WARMUP} done in {sync_time() - t0:.2f} s {describe(stages)}")
    times = []
    for i in range(runs):
        t0 = sync_time()
        stages = fn()
        t1 = sync_time()
        times.append((t1 - t0, stages))
        progress(f"run {i + 1}/{runs} done in {t1 - t0:.2f} s {describe(stages)}")
    total = statistics.median(t for t, _ in times)
    keys = times[0][1].keys() if times[0][1] else []
    per_stage = {k: statistics.median(s[k] for _, s in times) for k in keys}
    return total, per_stage, [t for t, _ in times]


def parse_size(text):
    """'15GiB' -> bytes (binary units with i, decimal without, as ferry's --vram)."""
    units = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12,
             "KIB": 2**10, "MIB": 2**20, "GIB": 2**30, "TIB": 2**40}
    t = text.strip().upper()
    num = t.rstrip("KMGTIB")
    return int(float(num) * units[t[len(num):]])


def offload(module, args, no_split):
    """Accelerate's device_map="auto" under --max-memory: place what fits on GPU 0, the rest on
    the CPU with hooks that copy it in for every forward."""
    from accelerate import dispatch_model, infer_auto_device_map

    cap = parse_size(args.max_memory)
    device_map = infer_auto_device_map(module, max_memory={0: cap, "cpu": 2**40},
                                       no_split_module_classes=no_split, dtype=torch.bfloat16)
    placed = {}
    for where in device_map.values():
        placed[str(where)] = placed.get(str(where), 0) + 1
    progress(f"device map chosen: accelerate places {placed} (modules per device) under "
             f"{args.max_memory}")
    module = dispatch_model(module, device_map=device_map, main_device=0)
    progress("dispatched")
    return module


def bench_text(model_dir, args):
    from transformers import AutoModelForCausalLM

    if args.max_memory:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).eval()
        progress("model loaded on the CPU")
        model = offload(model, args, ["Qwen3DecoderLayer", "LlamaDecoderLayer"])
    else:
        model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.bfloat16).to(DEVICE).eval()
        progress(f"model loaded on {DEVICE}")
    vocab = model.config.vocab_size
    ids = random_ids(args.prompt_tokens, vocab, args.seed).unsqueeze(0).to(DEVICE)

    @torch.no_grad()
    def run():
        t0 = sync_time()
        out = model(input_ids=ids, use_cache=True)
        t1 = sync_time()
        cache = out.past_key_values
        tok = out.logits[:, -1].argmax(-1, keepdim=True)
        tokens = [tok]
        for _ in range(args.tokens - 1):
            out = model(input_ids=tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1].argmax(-1, keepdim=True)
            tokens.append(tok)
        t2 = sync_time()
        if OUTPUTS is not None:
            OUTPUTS.update(tokens=torch.cat(tokens, -1).cpu(), last_logits=out.logits.float().cpu())
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
        return_dict_in_generate=True, output_logits=bool(args.save_outputs))
    return ids, out


def keep_outputs(out, **more):
    """Under --save-outputs, the run's generated ids, every step's logits and `more`."""
    if OUTPUTS is None:
        return
    OUTPUTS.update(sequences=out.sequences.cpu(), **{k: v.cpu() for k, v in more.items()})
    if out.logits is not None:
        OUTPUTS["logits"] = torch.stack([l.float().cpu() for l in out.logits])


def bench_vl(model_dir, args, cfg):
    from transformers import Qwen3VLForConditionalGeneration

    model = Qwen3VLForConditionalGeneration.from_pretrained(model_dir, dtype=torch.bfloat16)
    model = model.to(DEVICE).eval()
    progress(f"model loaded on {DEVICE}")

    @torch.no_grad()
    def run():
        t0 = sync_time()
        _, out = generate_vl(model, args)
        t1 = sync_time()
        keep_outputs(out)
        return {"vlm_s": t1 - t0}

    return time_runs(run, args.runs)


def bench_alpamayo(model_dir, args, cfg):
    import transformers.models.qwen3_vl.modeling_qwen3_vl  # noqa: F401  (seconds on its own)

    progress(f"transformers {transformers.__version__} imported")
    tensors = hf_models.load_all_tensors(model_dir)
    gb = sum(t.nbytes for t in tensors.values()) / 1e9
    progress(f"tensors read: {len(tensors)}, {gb:.2f} GB")
    build = "cpu" if args.max_memory else DEVICE
    how = "with their random init (--random-init)" if args.random_init else "without random init"
    vlm = hf_models.alpamayo_vlm(cfg, tensors, build, random_init=args.random_init)
    progress(f"VLM built on {build} {how}")
    expert = hf_models.alpamayo_expert(cfg, tensors, build, random_init=args.random_init)
    progress(f"expert built on {build} {how}")
    action_in, action_out = hf_models.alpamayo_action_modules(cfg, tensors)
    action_in = action_in.to(torch.bfloat16).eval()
    action_out = action_out.to(torch.bfloat16).eval()
    progress("action modules built")
    del tensors
    if args.max_memory:
        # One module over the whole model, so that the cap is shared by the VLM and the expert.
        whole = torch.nn.ModuleDict({"vlm": vlm, "expert": expert, "action_in": action_in,
                                     "action_out": action_out})
        whole = offload(whole, args, ["Qwen3VLTextDecoderLayer", "Qwen3VLVisionBlock"])
        vlm, expert = whole["vlm"], whole["expert"]
        action_in, action_out = whole["action_in"], whole["action_out"]
    else:
        action_in, action_out = action_in.to(DEVICE), action_out.to(DEVICE)
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
        keep_outputs(out, trajectory=x)
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
    p.add_argument("--max-memory", default=None,
                   help="GPU cap for Accelerate offloading (15GiB, 8GiB); default: all on the GPU")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs first")
    p.add_argument("--random-init", action="store_true",
                   help="alpamayo_r1: build the modules with their random init first (the old, "
                        "slow build; same model), to compare with the default")
    p.add_argument("--save-outputs", default=None,
                   help="torch.save the last run's outputs (generated ids, logits, trajectory) "
                        "to this file")
    args = p.parse_args()
    global DEVICE, WARMUP, OUTPUTS
    DEVICE = args.device
    WARMUP = args.warmup
    OUTPUTS = {} if args.save_outputs else None
    if DEVICE == "cuda":
        torch.cuda.reset_peak_memory_stats()
    cfg = load_config(args.model)
    kind = cfg.get("model_type", "")
    progress(f"{kind} from {args.model} on {DEVICE}"
             + (f" under --max-memory {args.max_memory}" if args.max_memory else ""))
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
    progress("done")
    if args.save_outputs:
        torch.save(OUTPUTS, args.save_outputs)
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
        "max_memory": args.max_memory,
        "peak_allocated_bytes": torch.cuda.max_memory_allocated() if DEVICE == "cuda" else None,
        "peak_reserved_bytes": torch.cuda.max_memory_reserved() if DEVICE == "cuda" else None,
    }
    if args.json:
        print(json.dumps(result))
    else:
        print(f"transformers {kind}: median {total*1e3:.1f} ms over {args.runs} runs " +
              " ".join(f"{k}={v*1e3:.1f}ms" for k, v in stages.items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
