"""Building transformers models from ferry-synthesized checkpoints, shared by the comparison
scripts and the transformers peer benchmark (GPU machine only: needs torch and transformers).

Alpamayo-R1 is not a transformers architecture: its VLM is a Qwen3-VL whose config ferry writes
under `vlm_config` and whose weights carry the `vlm.` prefix; the expert is a Qwen3-VL text model
without an embedding (`expert.` prefix)."""
import json
import os


def load_all_tensors(model_dir):
    """Every tensor of a single-file or sharded checkpoint, as torch tensors on the CPU."""
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


def build_on_device(cls, config, device):
    """The module made directly on the device in bf16; its random init is overwritten by the
    checkpoint right after. (A meta-device build would leave the rotary buffers behind.)"""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            return cls(config)
    finally:
        torch.set_default_dtype(previous)


def alpamayo_vlm(cfg, tensors, device):
    """Alpamayo-R1's Qwen3-VL, from the checkpoint's `vlm_config` and `vlm.` weights."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    model = build_on_device(Qwen3VLForConditionalGeneration, Qwen3VLConfig(**cfg["vlm_config"]),
                            device)
    state = {k[len("vlm."):]: v for k, v in tensors.items() if k.startswith("vlm.")}
    model.load_state_dict(state, strict=True)
    return model.eval()


def alpamayo_expert(cfg, tensors, device):
    """Alpamayo-R1's action expert: a Qwen3-VL text model with expert_cfg applied, no embedding."""
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    text_cfg = dict(cfg["vlm_config"]["text_config"])
    text_cfg.update({k: v for k, v in cfg["expert_cfg"].items() if k != "dtype"})
    expert = build_on_device(Qwen3VLTextModel, Qwen3VLTextConfig(**text_cfg), device)
    del expert.embed_tokens
    expert.load_state_dict({k[len("expert."):]: v for k, v in tensors.items()
                            if k.startswith("expert.")}, strict=True)
    return expert.eval()


def alpamayo_action_modules(cfg, tensors):
    """action_in_proj and action_out_proj as torch modules (fp32, on the CPU; the caller casts and
    moves them), written from spec §6.2: Fourier features of (accel, curvature, t) with
    bf16-rounded frequencies (spec §8.1, ferry's default), Linear-SiLU-RMSNorm-Linear-SiLU-RMSNorm-
    Linear, then LayerNorm. Parameter names follow the checkpoint."""
    import math

    import torch

    aip = cfg["action_in_proj_cfg"]
    hidden = cfg["expert_cfg"]["hidden_size"]

    class RMSNorm(torch.nn.Module):  # spec §1: normalize in fp32, cast back, then × weight
        def __init__(self, n):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(n))

        def forward(self, x):
            u = x.float()
            n = u * torch.rsqrt(u.pow(2).mean(-1, keepdim=True) + 1e-5)
            return self.weight * n.to(x.dtype)

    class ActionInProj(torch.nn.Module):
        def __init__(self):
            super().__init__()
            n, mid = aip["num_fourier_feats"], aip["hidden_size"]
            f = torch.logspace(0, math.log10(aip["max_freq"]), n // 2, dtype=torch.float64)
            self.register_buffer("freqs", f.float().to(torch.bfloat16).float())
            self.encoder = torch.nn.Module()
            self.encoder.trunk = torch.nn.Sequential(
                torch.nn.Linear(3 * n, mid), torch.nn.SiLU(), RMSNorm(mid),
                torch.nn.Linear(mid, mid), torch.nn.SiLU(), RMSNorm(mid),
                torch.nn.Linear(mid, hidden))
            self.norm = torch.nn.LayerNorm(hidden, eps=1e-5)

        def fourier(self, u):
            a = u.unsqueeze(-1) * self.freqs * 2 * math.pi
            return torch.cat([a.sin(), a.cos()], dim=-1) * math.sqrt(2)

        def forward(self, x, t):  # x [B, waypoints, 2], t [B, 1, 1]
            f = torch.cat([self.fourier(x[..., 0]), self.fourier(x[..., 1]),
                           self.fourier(t.reshape(-1, 1).expand(x.shape[:-1]))], dim=-1)
            return self.norm(self.encoder.trunk(f))

    action_in = ActionInProj()
    res = action_in.load_state_dict({k[len("action_in_proj."):]: v for k, v in tensors.items()
                                     if k.startswith("action_in_proj.")}, strict=False)
    if res.unexpected_keys or set(res.missing_keys) - {"freqs"}:
        raise SystemExit(f"action_in_proj weights do not match: {res}")
    action_out = torch.nn.Linear(hidden, 2)
    action_out.load_state_dict({"weight": tensors["action_out_proj.weight"],
                                "bias": tensors["action_out_proj.bias"]})
    return action_in, action_out
