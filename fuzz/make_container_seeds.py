#!/usr/bin/env python3
"""Writes the seeds of fuzz/container_fuzz.cpp: small compressed-checkpoint containers (safetensors
files whose U8 tensors are compressed groups, fuzz/compress_seeds/*.fryz, and whose metadata
holds the container's table, docs/compression.md "Compressed checkpoint")."""
import json
import pathlib
import struct

FUZZ = pathlib.Path(__file__).resolve().parent
HERE = FUZZ / "container_seeds"
GROUPS = FUZZ / "compress_seeds"


def safetensors(tensors, metadata):
    """tensors: [(name, dtype, shape, bytes)] in file order."""
    header = {"__metadata__": metadata}
    at = 0
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [at, at + len(data)]}
        at += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(t[3] for t in tensors)


def container(names, stored=False):
    groups, tensors, table = [], [], []
    for i, n in enumerate(names):
        data = (GROUPS / n).read_bytes()
        decoded = struct.unpack_from("<Q", data, 8)[0]
        groups.append({"name": f"g{i}", "module": "text", "decoded_bytes": decoded})
        if i > 0:  # zeros that align the next group, as the writer puts them
            tensors.append((f"ferry.zpad.{i}", "U8", [16], bytes(16)))
        tensors.append((f"ferry.z.g{i}", "U8", [len(data)], data))
        if decoded >= 4:
            half = decoded // 4 * 2
            table.append({"name": f"t{i}.a", "dtype": "BF16", "shape": [half // 2],
                          "pieces": [[i, 0, 0, half]]})
            if decoded - half >= 2:
                rest = (decoded - half) // 2 * 2
                table.append({"name": f"t{i}.b", "dtype": "U8", "shape": [rest],
                              "pieces": [[i, half, 0, rest]]})
    if stored:
        tensors.append(("buffer", "F32", [2], struct.pack("<2f", 1.0, 2.0)))
        table.append({"name": "buffer", "dtype": "F32", "shape": [2], "stored": True})
    metadata = {
        "ferry.container": "ferry-compressed-checkpoint",
        "ferry.container_version": "1",
        "ferry.codec": "ferry-bf16-exponent-rans",
        "ferry.codec_version": "1",
        "ferry.table": json.dumps({"groups": groups, "tensors": table}, separators=(",", ":")),
        "ferry.source_metadata": json.dumps({"format": "pt"}),
    }
    return safetensors(tensors, metadata)


def main():
    seeds = {
        "one_coded.safetensors": container(["coded_rans.fryz"]),
        "mixed_stored.safetensors": container(["coded_mixed.fryz", "stored.fryz"], stored=True),
        "empty_group.safetensors": container(["empty.fryz"]),
    }
    for name, data in seeds.items():
        (HERE / name).write_bytes(data)


if __name__ == "__main__":
    main()
