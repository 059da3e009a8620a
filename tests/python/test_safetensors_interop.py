"""Interop with the official `safetensors` package: files ferry writes read back there with the
same bytes, and files that package writes (single and sharded) read back in ferry.

Drives tests/tools/st_tool.cpp (target ferry_st_tool) found at $FERRY_BUILD_DIR/tests/.
"""
import json
import os
import shutil
import subprocess

import ml_dtypes
import numpy as np
import pytest
import safetensors
from safetensors import safe_open
from safetensors.numpy import load_file, save_file

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("FERRY_BUILD_DIR", "build")
TOOL = os.path.join(BUILD if os.path.isabs(BUILD) else os.path.join(ROOT, BUILD), "tests",
                    "ferry_st_tool")

# (name, safetensors dtype, shape) exactly as st_tool.cpp `write` makes them, in order.
FERRY_TENSORS = [
    ("model.embed_tokens.weight", "BF16", [16, 8]),
    ("model.norm.weight", "F32", [8]),
    ("ids", "I64", [5]),
    ("mask", "BOOL", [2, 3]),
    ("half", "F16", [3, 3]),
    ("fp8.e4m3", "F8_E4M3", [4]),
    ("fp8.e5m2", "F8_E5M2", [4]),
    ("u16", "U16", [3]),
    ("i8", "I8", [7]),
    ("u32", "U32", [2]),
    ("i32", "I32", [2]),
    ("u64", "U64", [2]),
    ("i16", "I16", [2]),
    ("f64", "F64", [2, 2]),
    ("scalar", "F32", []),
    ("empty", "F32", [0, 3]),
    ("u8", "U8", [9]),
]
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "F8_E4M3": 1, "F8_E5M2": 1, "U16": 2, "I16": 2, "F16": 2,
         "BF16": 2, "U32": 4, "I32": 4, "F32": 4, "U64": 8, "I64": 8, "F64": 8}
NUMPY = {"BOOL": np.bool_, "U8": np.uint8, "I8": np.int8, "U16": np.uint16, "I16": np.int16,
         "F16": np.float16, "BF16": ml_dtypes.bfloat16, "U32": np.uint32, "I32": np.int32,
         "F32": np.float32, "U64": np.uint64, "I64": np.int64, "F64": np.float64,
         "F8_E4M3": ml_dtypes.float8_e4m3fn, "F8_E5M2": ml_dtypes.float8_e5m2}


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return "%016x" % h


def expected_bytes(k, dtype, shape):
    n = SIZES[dtype] * int(np.prod(shape, dtype=np.int64))
    if dtype == "BOOL":
        return bytes(i & 1 for i in range(n))
    return bytes((k * 29 + i * 13 + 7) & 0xFF for i in range(n))


def tool(*args):
    assert os.path.exists(TOOL), "build the ferry_st_tool target first: %s" % TOOL
    return subprocess.run([TOOL, *map(str, args)], capture_output=True, text=True)


def ferry_dump(path):
    r = tool("dump", path)
    assert r.returncode == 0, r.stderr
    return {t["name"]: t for t in json.loads(r.stdout)["tensors"]}, json.loads(r.stdout)["files"]


def read_with_safetensors(folder, numpy_reads):
    """Every tensor of a checkpoint folder through the official package: name -> (dtype, shape,
    bytes), reading the index when there is one, plus each file's metadata."""
    index_path = os.path.join(folder, "model.safetensors.index.json")
    if os.path.exists(index_path):
        with open(index_path) as f:
            index = json.load(f)
        files = sorted(set(index["weight_map"].values()))
    else:
        index, files = None, ["model.safetensors"]
    out, metas = {}, []
    for name in files:
        path = os.path.join(folder, name)
        with open(path, "rb") as f:
            raw = f.read()
        # deserialize gives raw bytes for every dtype (numpy has no BF16 or FP8 of its own).
        for tname, view in safetensors.deserialize(raw):
            assert tname not in out
            out[tname] = (view["dtype"], list(view["shape"]), bytes(view["data"]))
            if index is not None:
                assert index["weight_map"][tname] == name
        # The package's numpy backend has no FP8 (it asks numpy for float8_e4m3fn): those
        # tensors are checked through deserialize only.
        has_fp8 = False
        with safe_open(path, framework="np") as f:
            metas.append(f.metadata())
            for tname in f.keys():
                if out[tname][0].startswith("F8"):
                    has_fp8 = True
                    continue
                arr = f.get_tensor(tname)
                assert arr.tobytes() == out[tname][2], tname
                assert list(arr.shape) == out[tname][1], tname
                numpy_reads.append(tname)
        if not has_fp8:  # load_file is the package's plain numpy entry point
            for tname, arr in load_file(path).items():
                assert arr.tobytes() == out[tname][2], tname
                numpy_reads.append(tname)
    return out, metas, index


@pytest.mark.parametrize("max_shard", [None, 300])
def test_ferry_written_checkpoint_reads_in_safetensors(tmp_path, max_shard):
    folder = tmp_path / "ck"
    r = tool("write", folder, *([max_shard] if max_shard else []))
    assert r.returncode == 0, r.stderr
    numpy_reads = []
    tensors, metas, index = read_with_safetensors(str(folder), numpy_reads)
    assert {n for n, d, _ in FERRY_TENSORS if not d.startswith("F8")} <= set(numpy_reads)
    assert len(tensors) == len(FERRY_TENSORS)
    for k, (name, dtype, shape) in enumerate(FERRY_TENSORS):
        got_dtype, got_shape, data = tensors[name]
        assert (got_dtype, got_shape) == (dtype, shape), name
        assert data == expected_bytes(k, dtype, shape), name
    assert all(m == {"format": "pt", "writer": "ferry"} for m in metas)
    if max_shard is None:
        assert index is None
        assert sorted(os.listdir(folder)) == ["model.safetensors"]
    else:
        assert len(metas) > 1
        total = sum(SIZES[d] * int(np.prod(s, dtype=np.int64)) for _, d, s in FERRY_TENSORS)
        assert index["metadata"] == {"total_size": total}
        assert list(index["weight_map"]) == sorted(index["weight_map"])
        # Greedy shards in order: shard numbers never decrease along the written order.
        order = [index["weight_map"][n] for n, _, _ in FERRY_TENSORS]
        assert order == sorted(order)
    # ferry reads its own output with the same hashes.
    dumped, _ = ferry_dump(folder)
    for name, (dtype, shape, data) in tensors.items():
        assert dumped[name]["fnv1a64"] == fnv1a64(data), name


def python_tensors():
    rng = np.random.default_rng(1234)
    t = {
        "w.bf16": rng.standard_normal((7, 5)).astype(ml_dtypes.bfloat16),
        "w.f32": rng.standard_normal((3, 4, 2)).astype(np.float32),
        "w.f16": rng.standard_normal(11).astype(np.float16),
        "w.f64": rng.standard_normal(3),
        "w.fp8": rng.standard_normal(6).astype(ml_dtypes.float8_e4m3fn),
        "w.fp8b": rng.standard_normal(6).astype(ml_dtypes.float8_e5m2),
        "ids.i64": rng.integers(-1000, 1000, 9, dtype=np.int64),
        "ids.i32": rng.integers(-1000, 1000, 4, dtype=np.int32),
        "ids.u8": rng.integers(0, 256, 13, dtype=np.uint8),
        "ids.i8": rng.integers(-128, 128, 5, dtype=np.int8),
        "ids.u16": rng.integers(0, 65535, 3, dtype=np.uint16),
        "mask": rng.integers(0, 2, (2, 2)).astype(np.bool_),
        "scalar": np.array(3.5, dtype=np.float32),
        "empty": np.zeros((0, 4), dtype=np.float32),
    }
    return t


def check_ferry_reads(dumped, tensors):
    assert set(dumped) == set(tensors)
    inverse = {np.dtype(v): k for k, v in NUMPY.items()}
    for name, arr in tensors.items():
        d = dumped[name]
        assert d["dtype"] == inverse[arr.dtype], name
        assert d["shape"] == list(arr.shape), name
        assert d["bytes"] == arr.nbytes, name
        assert d["fnv1a64"] == fnv1a64(np.ascontiguousarray(arr).tobytes()), name


def test_safetensors_written_file_reads_in_ferry(tmp_path):
    tensors = python_tensors()
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path), metadata={"format": "pt", "origin": "python"})
    dumped, files = ferry_dump(path)
    check_ferry_reads(dumped, tensors)
    assert files[0]["metadata"] == {"format": "pt", "origin": "python"}
    # The folder form finds model.safetensors too.
    assert ferry_dump(tmp_path)[0] == dumped


def test_safetensors_written_shards_with_index_read_in_ferry(tmp_path):
    tensors = python_tensors()
    names = sorted(tensors)
    shards = [names[0::3], names[1::3], names[2::3]]
    weight_map, total = {}, 0
    for i, part in enumerate(shards):
        shard = "model-%05d-of-%05d.safetensors" % (i + 1, len(shards))
        save_file({n: tensors[n] for n in part}, str(tmp_path / shard), metadata={"format": "pt"})
        for n in part:
            weight_map[n] = shard
            total += tensors[n].nbytes
    with open(tmp_path / "model.safetensors.index.json", "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    dumped, files = ferry_dump(tmp_path)
    check_ferry_reads(dumped, tensors)
    assert len(files) == 3
    for name, d in dumped.items():
        assert os.path.basename(d["shard"]) == weight_map[name]


def test_ferry_rejects_what_safetensors_rejects(tmp_path):
    tensors = python_tensors()
    path = tmp_path / "model.safetensors"
    save_file(tensors, str(path))
    raw = path.read_bytes()
    cut = tmp_path / "cut.safetensors"
    cut.write_bytes(raw[:-1])
    with pytest.raises(Exception):
        safetensors.deserialize(cut.read_bytes())
    r = tool("dump", cut)
    assert r.returncode == 1
    assert "cut.safetensors" in r.stderr and "does not match the header" in r.stderr


def test_committed_corpus_matches_its_generator(tmp_path):
    """tests/corpus/ is exactly what make_corpus.py writes (so the table and files cannot drift)."""
    corpus = os.path.join(ROOT, "tests", "corpus")
    work = tmp_path / "corpus"
    work.mkdir()
    shutil.copy(os.path.join(corpus, "make_corpus.py"), work)
    subprocess.run(["python3", str(work / "make_corpus.py")], check=True)

    def tree(root):
        out = {}
        for d, _, files in os.walk(root):
            for f in files:
                p = os.path.join(d, f)
                with open(p, "rb") as fh:
                    out[os.path.relpath(p, root)] = fh.read()
        return out

    committed = {k: v for k, v in tree(corpus).items() if "__pycache__" not in k}
    generated = tree(str(work))
    assert sorted(committed) == sorted(generated)
    for name in generated:
        assert committed[name] == generated[name], name
