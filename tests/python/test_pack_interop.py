"""`ferry pack` keeps a checkpoint readable by the official `safetensors` package: every tensor of
the input with the same dtype, shape and bytes, the gaps filled with zero U8 tensors named
ferry.pad.N, the data starting on a page, and `ferry run` giving the same output on both.

Drives the `ferry` binary found at $FERRY_BUILD_DIR/ferry (default build/).
"""
import json
import os
import struct
import subprocess

import safetensors
from safetensors import safe_open

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FERRY_BUILD_DIR", "build")
FERRY = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "ferry")
PAGE = 4096


def ferry(*args):
    assert os.path.exists(FERRY), "build the ferry target first: %s" % FERRY
    r = subprocess.run([FERRY, *map(str, args)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    return r.stdout


def tensors_of(folder):
    """name -> (dtype, shape, bytes) of every tensor of a checkpoint folder, through the package."""
    index = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index):
        with open(index) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
    else:
        files = ["model.safetensors"]
    out = {}
    for name in files:
        with open(os.path.join(folder, name), "rb") as f:
            raw = f.read()
        for tname, view in safetensors.deserialize(raw):
            out[tname] = (view["dtype"], list(view["shape"]), bytes(view["data"]))
    return out


def test_packed_checkpoint_reads_in_safetensors_and_runs_the_same(tmp_path):
    src, dst = tmp_path / "in", tmp_path / "out"
    ferry("synth", "--preset", "qwen3-tiny", "--out", src, "--seed", "3", "--max-shard", "8MB")
    assert os.path.exists(src / "model.safetensors.index.json")  # several shards in
    report = json.loads(ferry("pack", src, dst, "--json"))
    assert report["groups"] == report["groups_one_copy"]
    others = {n for n in os.listdir(src) if not n.endswith((".safetensors", ".index.json"))}
    assert set(os.listdir(dst)) == others | {"model.safetensors"}  # one file, the rest copied

    packed_path = dst / "model.safetensors"
    with open(packed_path, "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    assert (8 + header_len) % PAGE == 0  # the data starts on a page
    assert header["__metadata__"]["format"] == "pt"

    before, after = tensors_of(str(src)), tensors_of(str(dst))
    pads = {n: t for n, t in after.items() if n.startswith("ferry.pad.")}
    assert pads, "a packed file pads its groups to pages"
    for name, (dtype, shape, data) in pads.items():
        assert dtype == "U8" and len(shape) == 1 and data == bytes(len(data)), name
    assert {n: t for n, t in after.items() if n not in pads} == before

    # safe_open (the lazy reader transformers uses) on the packed file, tensor by tensor.
    with safe_open(str(packed_path), framework="np") as f:
        assert set(f.keys()) == set(after)
        for name in ["model.norm.weight", "lm_head.weight"]:
            assert f.get_slice(name).get_shape() == after[name][1]

    # The text layers begin on pages: their first tensors start at page offsets in the file.
    starts = sorted(
        (8 + header_len + e["data_offsets"][0], n)
        for n, e in header.items()
        if n != "__metadata__" and not n.startswith("ferry.pad.")
    )
    for layer in range(4):
        prefix = "model.layers.%d." % layer
        first = min(off for off, n in starts if n.startswith(prefix))
        assert first % PAGE == 0, prefix

    a = json.loads(ferry("run", "--model", src, "--backend", "cpu", "--json", "--quiet", "--tokens", "3"))
    b = json.loads(ferry("run", "--model", dst, "--backend", "cpu", "--json", "--quiet", "--tokens", "3"))
    for key in ["tokens", "logits_hash", "prefill_logits_hash"]:
        assert a[key] == b[key], key
