"""ferry's written configs and synthesized checkpoints load in Hugging Face transformers, and
scripts/hf_models.py's fast Alpamayo-R1 build (no random init) gives the normal build's model.

Needs transformers + torch (the GPU machine has them); skipped elsewhere. The ferry binary is
$FERRY_BINARY or build/ferry.
"""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

transformers = pytest.importorskip("transformers")
torch = pytest.importorskip("torch")
from safetensors.torch import load_file  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FERRY = os.environ.get("FERRY_BINARY", str(ROOT / "build" / "ferry"))


def synth(preset, out, *extra):
    subprocess.run([FERRY, "synth", "--preset", preset, "--out", str(out), "--seed", "1", *extra],
                   check=True, capture_output=True)
    return out


@pytest.mark.parametrize("preset", ["qwen3-8b", "qwen3-tiny"])
def test_qwen3_config_loads(tmp_path, preset):
    d = synth(preset, tmp_path / preset, "--config-only")
    cfg = transformers.AutoConfig.from_pretrained(d)
    written = json.loads((d / "config.json").read_text())
    assert type(cfg).__name__ == "Qwen3Config"
    assert cfg.hidden_size == written["hidden_size"]
    assert cfg.num_key_value_heads == written["num_key_value_heads"]
    assert cfg.head_dim == written["head_dim"]
    assert cfg.tie_word_embeddings is False
    theta = getattr(cfg, "rope_theta", None) or cfg.rope_parameters["rope_theta"]
    assert float(theta) == 1e6


@pytest.mark.parametrize("preset", ["qwen3-vl-8b", "qwen3-vl-tiny"])
def test_qwen3_vl_config_loads(tmp_path, preset):
    d = synth(preset, tmp_path / preset, "--config-only")
    cfg = transformers.AutoConfig.from_pretrained(d)
    written = json.loads((d / "config.json").read_text())
    assert type(cfg).__name__ == "Qwen3VLConfig"
    t = cfg.text_config
    assert t.hidden_size == written["text_config"]["hidden_size"]
    rope = getattr(t, "rope_parameters", None) or t.rope_scaling
    assert list(rope["mrope_section"]) == written["text_config"]["rope_scaling"]["mrope_section"]
    assert cfg.vision_config.deepstack_visual_indexes == written["vision_config"]["deepstack_visual_indexes"]
    assert cfg.vision_config.out_hidden_size == t.hidden_size


def load_and_check(cls, d):
    model, info = cls.from_pretrained(d, dtype=torch.bfloat16, output_loading_info=True)
    assert not info["missing_keys"], info["missing_keys"]
    assert not info["unexpected_keys"], info["unexpected_keys"]
    assert not info.get("mismatched_keys"), info["mismatched_keys"]
    # Every tensor of the file arrives unchanged.
    sd = model.state_dict()
    for name, t in load_file(str(d / "model.safetensors")).items():
        assert torch.equal(sd[name].cpu(), t), name
    return model


def test_qwen3_tiny_checkpoint_loads_and_runs(tmp_path):
    d = synth("qwen3-tiny", tmp_path / "q")
    model = load_and_check(transformers.AutoModelForCausalLM, d)
    ids = torch.tensor([[151644, 872, 198, 9707, 11, 1879, 0]])
    with torch.no_grad():
        logits = model(input_ids=ids).logits.float()
    assert torch.isfinite(logits).all()
    assert 0.01 < logits.std().item() < 100


def test_qwen3_vl_tiny_checkpoint_loads_and_runs(tmp_path):
    d = synth("qwen3-vl-tiny", tmp_path / "vl")
    model = load_and_check(transformers.Qwen3VLForConditionalGeneration, d)
    # One 64x64 image: a 4x4 patch grid, 4 merged tokens.
    grid = torch.tensor([[1, 4, 4]])
    pixels = torch.randn(16, 3 * 2 * 16 * 16)
    ids = torch.tensor([[151644, 151652] + [151655] * 4 + [151653, 9707, 0]])
    args = dict(input_ids=ids, pixel_values=pixels.to(torch.bfloat16), image_grid_thw=grid)
    with torch.no_grad():
        try:  # transformers 5.17 wants the token types (1 = image) for M-RoPE; 4.x does not
            out = model(**args, mm_token_type_ids=(ids == 151655).to(torch.int32))
        except TypeError:
            out = model(**args)
    assert torch.isfinite(out.logits.float()).all()


def test_load_all_tensors_reads_what_safetensors_reads(tmp_path):
    """scripts/hf_models.py reads checkpoints itself (into memory, threads over 64 MiB pieces):
    the same names, dtypes, shapes and bytes as safetensors' own loader, sharded or not."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import hf_models

    for name, extra in (("one", []), ("sharded", ["--max-shard", "8MB"])):
        d = synth("alpamayo-tiny", tmp_path / name, *extra)
        files = sorted(d.glob("*.safetensors"))
        assert len(files) > 1 if extra else len(files) == 1
        expected = {}
        for f in files:
            expected.update(load_file(str(f)))
        one_thread = {}
        for f in files:
            one_thread.update(hf_models.read_safetensors(str(f), threads=1))
        for got in (hf_models.load_all_tensors(str(d)), one_thread):
            assert got.keys() == expected.keys()
            for k, t in expected.items():
                assert (got[k].dtype, got[k].shape) == (t.dtype, t.shape), k
                assert torch.equal(got[k].reshape(-1).view(torch.uint8),
                                   t.reshape(-1).view(torch.uint8)), k


def test_alpamayo_fast_build_is_the_normal_build(tmp_path):
    """scripts/hf_models.py builds Alpamayo-R1's modules without their random init (parameters on
    meta, then the checkpoint's tensors assigned); every parameter and buffer, the non-persistent
    rotary inv_freq/original_inv_freq the checkpoint does not hold included, must be bit-identical
    to a normal build's (random init, then load_state_dict), in name, dtype, device, shape and
    strides."""
    sys.path.insert(0, str(ROOT / "scripts"))
    import hf_models

    d = synth("alpamayo-tiny", tmp_path / "ar1")
    cfg = json.loads((d / "config.json").read_text())
    tensors = hf_models.load_all_tensors(str(d))
    built = {}
    for random_init in (True, False):
        built[random_init] = {
            "vlm": hf_models.alpamayo_vlm(cfg, tensors, "cpu", random_init=random_init),
            "expert": hf_models.alpamayo_expert(cfg, tensors, "cpu", random_init=random_init),
        }
    buffers_seen = set()
    for part in ("vlm", "expert"):
        normal, fast = built[True][part], built[False][part]
        assert str(normal) == str(fast)
        a = dict(normal.named_parameters(remove_duplicate=False))
        b = dict(fast.named_parameters(remove_duplicate=False))
        a.update(("buffer " + k, v) for k, v in normal.named_buffers(remove_duplicate=False))
        b.update(("buffer " + k, v) for k, v in fast.named_buffers(remove_duplicate=False))
        assert a.keys() == b.keys(), a.keys() ^ b.keys()
        for name in a:
            x, y = a[name], b[name]
            assert (x.dtype, x.device, x.shape, x.stride()) == \
                (y.dtype, y.device, y.shape, y.stride()), name
            assert x.requires_grad == y.requires_grad, name
            assert torch.equal(x.reshape(-1).view(torch.uint8),
                               y.reshape(-1).view(torch.uint8)), name
            if not name.startswith("buffer "):
                assert x.dtype == torch.bfloat16, name
        buffers_seen |= {k.rsplit(".", 1)[-1] for k in a if k.startswith("buffer ")}
    assert {"inv_freq", "original_inv_freq"} <= buffers_seen
    # The fast build's CPU parameters are the loaded tensors themselves: no second host copy.
    w = "model.language_model.layers.0.mlp.up_proj.weight"
    assert built[False]["vlm"].get_parameter(w).data_ptr() == tensors["vlm." + w].data_ptr()


def test_alpamayo_peer_outputs_fast_vs_normal_build(tmp_path):
    """bench/peer_transformers.py on the CPU, a small workload: the generated ids, every step's
    logits and the expert's trajectory are identical whichever way the modules were built."""
    d = synth("alpamayo-tiny", tmp_path / "ar1")
    outs = {}
    for name, extra in (("normal", ["--random-init"]), ("fast", [])):
        out = tmp_path / f"{name}.pt"
        subprocess.run([sys.executable, str(ROOT / "bench" / "peer_transformers.py"), "--model",
                        str(d), "--device", "cpu", "--runs", "1", "--warmup", "0", "--images", "1",
                        "--prompt-tokens", "200", "--tokens", "3", "--steps", "2",
                        "--save-outputs", str(out), *extra], check=True, capture_output=True)
        outs[name] = torch.load(out)
    assert outs["normal"].keys() == outs["fast"].keys() >= {"sequences", "logits", "trajectory"}
    for k in outs["normal"]:
        assert torch.equal(outs["normal"][k], outs["fast"][k]), k
