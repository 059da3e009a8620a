"""The compressed checkpoint (`ferry pack --compress`, docs/compression.md) is a safetensors file
that the `safetensors` package reads: its metadata names the container and codec, every tensor
is a U8 group (`ferry.z.<group>`, starting with the group format's magic) as the table lists, and
`--decompress` gives back a checkpoint with the source's tensor names and metadata.

The ferry binary is $FERRY_BINARY, else ferry in $FERRY_BUILD_DIR (default build/), as the other
Python tests find their tools.
"""
import json
import os
import subprocess
from pathlib import Path

import numpy as np
from safetensors import safe_open

ROOT = Path(__file__).resolve().parents[2]
FERRY = os.environ.get(
    "FERRY_BINARY", str(ROOT / os.environ.get("FERRY_BUILD_DIR", "build") / "ferry"))


def ferry(*args):
    return subprocess.run([FERRY, *map(str, args)], check=True, capture_output=True, text=True)


def test_the_container_reads_as_safetensors(tmp_path):
    src = tmp_path / "src"
    ferry("synth", "--preset", "qwen3-tiny", "--out", src, "--seed", "2", "--init", "normal")
    z = tmp_path / "z"
    report = json.loads(ferry("pack", src, z, "--compress", "--json").stdout)
    with safe_open(str(z / "model.safetensors"), framework="numpy") as f:
        meta = f.metadata()
        assert meta["ferry.container"] == "ferry-compressed-checkpoint"
        assert meta["ferry.codec"] == "ferry-bf16-exponent-rans"
        assert meta["ferry.codec_version"] == "1"
        table = json.loads(meta["ferry.table"])
        keys = {k for k in f.keys() if not k.startswith("ferry.zpad.")}  # alignment zeros
        assert keys == {"ferry.z." + g["name"] for g in table["groups"]}
        total = 0
        for g in table["groups"]:
            t = f.get_tensor("ferry.z." + g["name"])
            assert t.dtype == np.uint8 and t.ndim == 1
            assert bytes(t[:4]) == b"FRYZ"
            assert int.from_bytes(bytes(t[8:16]), "little") == g["decoded_bytes"]
            total += t.size
    assert total == report["compressed_bytes"]
    with safe_open(str(src / "model.safetensors"), framework="numpy") as f:
        assert sorted(t["name"] for t in table["tensors"]) == sorted(f.keys())
        source_meta = f.metadata()
    back = tmp_path / "back"
    ferry("pack", z, back, "--decompress")
    with safe_open(str(back / "model.safetensors"), framework="numpy") as f:
        assert sorted(f.keys()) == sorted(t["name"] for t in table["tensors"])
        assert f.metadata() == source_meta
