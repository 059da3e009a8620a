"""ferry's written configs and synthesized checkpoints load in Hugging Face transformers.

Needs transformers + torch (the GPU machine has them); skipped elsewhere. The ferry binary is
$FERRY_BINARY or build/ferry.
"""
import json
import os
import subprocess
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
