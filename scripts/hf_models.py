"""Building transformers models from ferry-synthesized checkpoints, shared by the comparison
scripts and the transformers peer benchmark (GPU machine only: needs torch and transformers).

Alpamayo-R1 is not a transformers architecture: its VLM is a Qwen3-VL whose config ferry writes
under `vlm_config` and whose weights carry the `vlm.` prefix; the expert is a Qwen3-VL text model
without an embedding (`expert.` prefix)."""
import contextlib
import json
import os


# safetensors dtype names -> torch dtype attribute names
_DTYPES = {"BF16": "bfloat16", "F16": "float16", "F32": "float32", "F64": "float64",
           "I64": "int64", "I32": "int32", "I16": "int16", "I8": "int8", "U8": "uint8",
           "BOOL": "bool", "F8_E4M3": "float8_e4m3fn", "F8_E5M2": "float8_e5m2"}


def read_safetensors(path, threads=None):
    """Every tensor of one safetensors file, each read into its own CPU allocation (by `threads`
    threads at once, default one per core up to 16, in 64 MiB pieces), so the bytes are in memory
    when this returns. (safetensors 0.8's load_file maps the file instead and reads each page on
    its first use: the peer's first timed run would pay for that once the weights are assigned
    rather than copied, and the offloaded weights would stay file pages.)"""
    from concurrent.futures import ThreadPoolExecutor

    import torch

    with open(path, "rb") as f:
        size = int.from_bytes(f.read(8), "little")
        header = json.loads(f.read(size))
    header.pop("__metadata__", None)
    tensors = {}
    for name, info in sorted(header.items(), key=lambda kv: kv[1]["data_offsets"][0]):
        if info["dtype"] not in _DTYPES:
            raise SystemExit(f"{path}: {name}: dtype {info['dtype']} not handled here")
        begin, end = info["data_offsets"]
        tensors[name] = torch.empty(info["shape"], dtype=getattr(torch, _DTYPES[info["dtype"]]))
        if tensors[name].nbytes != end - begin:
            raise SystemExit(f"{path}: {name}: {end - begin} bytes for {info}")

    fd = os.open(path, os.O_RDONLY)
    piece = 64 << 20  # large tensors are read in pieces, so that the threads share them too

    def read(job):
        name, start = job
        t, at = tensors[name], 8 + size + header[name]["data_offsets"][0]
        view = memoryview(t.reshape(-1).view(torch.uint8).numpy())[start:start + piece]
        done = 0
        while done < len(view):
            got = os.preadv(fd, [view[done:]], at + start + done)
            if not got:
                raise SystemExit(f"{path}: ends inside {name}")
            done += got

    jobs = [(n, start) for n, t in tensors.items() for start in range(0, t.nbytes, piece)]
    try:
        with ThreadPoolExecutor(threads or min(16, os.cpu_count() or 1)) as pool:
            list(pool.map(read, jobs))
    finally:
        os.close(fd)
    return tensors


def load_all_tensors(model_dir):
    """Every tensor of a single-file or sharded checkpoint, as torch tensors on the CPU, read into
    memory (each tensor its own allocation)."""
    index = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
    else:
        shards = ["model.safetensors"]
    tensors = {}
    for shard in shards:
        tensors.update(read_safetensors(os.path.join(model_dir, shard)))
    return tensors


def build_on_device(cls, config, device):
    """The module made directly on the device in bf16 with its random init, as `cls(config)` does.
    Slow for a large model (every weight is drawn, then overwritten by the checkpoint); kept as
    the reference the fast build is checked against (tests/python/test_hf_compat.py)."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device):
            return cls(config)
    finally:
        torch.set_default_dtype(previous)


@contextlib.contextmanager
def parameters_on_meta():
    """Every parameter registered inside is moved to the meta device as it is registered: no
    memory, and the random init that follows (torch's reset_parameters, transformers' post_init)
    runs on meta tensors, which costs nothing. Buffers are left alone, so the non-persistent ones
    the checkpoint does not hold (the rotary embeddings' inv_freq, original_inv_freq) are computed
    by the module's own code on the device in force, exactly as a normal construction computes
    them. (A plain `torch.device("meta")` build would leave those buffers empty on meta; this is
    Accelerate's `init_empty_weights(include_buffers=False)`, written here so the comparison
    scripts need no Accelerate.)"""
    import torch

    register = torch.nn.Module.register_parameter

    def register_on_meta(module, name, param):
        register(module, name, param)
        if param is not None and param.device.type != "meta":
            meta = type(param)(param.to("meta"), requires_grad=param.requires_grad)
            meta.__dict__.update(param.__dict__)
            module._parameters[name] = meta

    torch.nn.Module.register_parameter = register_on_meta
    try:
        yield
    finally:
        torch.nn.Module.register_parameter = register


def build_without_init(cls, config, device):
    """`cls(config)` in bf16 with its parameters on meta (no memory, no random init) and its buffers
    computed on `device` as a normal construction computes them; `load_weights` then gives every
    parameter its tensor from the checkpoint."""
    import torch

    previous = torch.get_default_dtype()
    torch.set_default_dtype(torch.bfloat16)
    try:
        with torch.device(device), parameters_on_meta():
            return cls(config)
    finally:
        torch.set_default_dtype(previous)


def load_weights(model, state, device, random_init):
    """The checkpoint's tensors into a model from build_on_device (copied over its random init) or
    from build_without_init (assigned: on the CPU the module's parameters become the tensors
    load_all_tensors read, so the host holds one copy of the weights, not two; elsewhere each
    tensor is copied to the device once). Either way every parameter ends up in the dtype the
    module was built in (bf16), and strict=True refuses a missing or unexpected name."""
    if random_init:
        model.load_state_dict(state, strict=True)
        return model
    names = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        names.setdefault(id(p), []).append(name)
    tied = [n for n in names.values() if len(n) > 1]
    if tied:  # assigning would untie them; none in Alpamayo-R1 (tie_word_embeddings false)
        raise SystemExit(f"{type(model).__name__}: tied parameters {tied}: build with random_init")
    want = {name: p.dtype for name, p in model.named_parameters()}
    want.update({name: b.dtype for name, b in model.named_buffers()})
    state = {k: v.to(device=device, dtype=want.get(k, v.dtype)) for k, v in state.items()}
    model.load_state_dict(state, strict=True, assign=True)
    left = [n for n, t in list(model.named_parameters()) + list(model.named_buffers())
            if t.device.type == "meta"]
    if left:
        raise SystemExit(f"{type(model).__name__}: still on meta after loading: {left[:8]}")
    return model


def alpamayo_vlm(cfg, tensors, device, random_init=False):
    """Alpamayo-R1's Qwen3-VL, from the checkpoint's `vlm_config` and `vlm.` weights. Built without
    its random init unless random_init (the old, slow way, kept as the reference)."""
    from transformers import Qwen3VLConfig, Qwen3VLForConditionalGeneration

    build = build_on_device if random_init else build_without_init
    model = build(Qwen3VLForConditionalGeneration, Qwen3VLConfig(**cfg["vlm_config"]), device)
    state = {k[len("vlm."):]: v for k, v in tensors.items() if k.startswith("vlm.")}
    return load_weights(model, state, device, random_init).eval()


def alpamayo_expert(cfg, tensors, device, random_init=False):
    """Alpamayo-R1's action expert: a Qwen3-VL text model with expert_cfg applied, no embedding.
    Built without its random init unless random_init."""
    from transformers import Qwen3VLTextConfig
    from transformers.models.qwen3_vl.modeling_qwen3_vl import Qwen3VLTextModel

    text_cfg = dict(cfg["vlm_config"]["text_config"])
    text_cfg.update({k: v for k, v in cfg["expert_cfg"].items() if k != "dtype"})
    build = build_on_device if random_init else build_without_init
    expert = build(Qwen3VLTextModel, Qwen3VLTextConfig(**text_cfg), device)
    del expert.embed_tokens
    state = {k[len("expert."):]: v for k, v in tensors.items() if k.startswith("expert.")}
    return load_weights(expert, state, device, random_init).eval()


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
