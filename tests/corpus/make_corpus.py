#!/usr/bin/env python3
"""Writes the safetensors validation corpus: one small hand-made file (or folder) per rule.

Pure Python, bytes written by hand, deterministic. Run from anywhere:
    python3 tests/corpus/make_corpus.py
It rewrites every corpus entry, expected.json (path -> substring the error must contain) and
README.md. The gtest tests/unit/safetensors_corpus_test.cpp checks every entry against the table.
"""
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))

REJECTED = {}  # path -> (expected substring, rule)
ACCEPTED = {}  # path -> rule


def st_bytes(header, data=b"", length=None, pad=True):
    """A safetensors image: 8-byte little-endian header length, header, data."""
    if isinstance(header, str):
        header = header.encode("utf-8")
    if pad:
        header += b" " * ((8 - len(header) % 8) % 8)
    n = len(header) if length is None else length
    return struct.pack("<Q", n) + header + data


def write(rel, content):
    path = os.path.join(HERE, rel)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(content)


def reject(rel, expect, rule, content):
    write(rel, content)
    REJECTED[rel] = (expect, rule)


def reject_dir(rel, expect, rule, files):
    for name, content in files.items():
        write(os.path.join(rel, name), content)
    REJECTED[rel + "/"] = (expect, rule)


def accept(rel, rule, content):
    write(rel, content)
    ACCEPTED[rel] = rule


def accept_dir(rel, rule, files):
    for name, content in files.items():
        write(os.path.join(rel, name), content)
    ACCEPTED[rel + "/"] = rule


def t(dtype, shape, begin, end):
    return '{"dtype":"%s","shape":%s,"data_offsets":[%d,%d]}' % (
        dtype, json.dumps(shape).replace(" ", ""), begin, end)


def hdr(**tensors):
    return "{" + ",".join('"%s":%s' % (k, v) for k, v in tensors.items()) + "}"


A8 = t("F32", [2], 0, 8)  # tensor 'a': two floats
DATA8 = bytes(range(8))
S1 = "model-00001-of-00002.safetensors"
S2 = "model-00002-of-00002.safetensors"


def index(weight_map, extra=""):
    wm = ",".join('"%s":"%s"' % (k, v) for k, v in weight_map.items())
    return ('{"metadata":{"total_size":16}%s,"weight_map":{%s}}' % (extra, wm)).encode()


def single(name):
    return st_bytes(hdr(**{name: t("F32", [2], 0, 8)}), DATA8)


def build():
    # --- header length ---
    reject("empty_file.safetensors", "too short for the 8-byte header length",
           "a file shorter than 8 bytes has no header length", b"")
    reject("file_too_short.safetensors", "too short for the 8-byte header length",
           "a file shorter than 8 bytes has no header length", b"\x02\x00\x00\x00\x00")
    reject("header_len_zero.safetensors", "header length is 0",
           "header length must be > 0", struct.pack("<Q", 0) + b"{}")
    reject("header_too_long.safetensors", "exceeds the limit of 100000000 bytes",
           "header length must be <= 100,000,000 (the reference's bound)",
           st_bytes("{}", length=100_000_001))
    reject("header_past_eof.safetensors", "does not fit in the file",
           "the header must fit in the file", st_bytes("{}", length=1000))
    reject("header_len_huge.safetensors", "exceeds the limit",
           "a 2^64-1 header length is rejected without overflow", st_bytes("{}", length=2**64 - 1))
    # --- UTF-8 JSON object, padded with spaces only ---
    reject("header_invalid_utf8.safetensors", "not valid UTF-8",
           "header must be UTF-8 (stray 0xFF byte)",
           st_bytes(b'{"a\xff":' + A8.encode() + b"}", DATA8))
    reject("header_overlong_utf8.safetensors", "not valid UTF-8",
           "overlong UTF-8 forms are rejected", st_bytes(b'{"a\xc0\xaf":' + A8.encode() + b"}", DATA8))
    reject("header_surrogate_utf8.safetensors", "not valid UTF-8",
           "UTF-8-encoded surrogates are rejected",
           st_bytes(b'{"a\xed\xa0\x80":' + A8.encode() + b"}", DATA8))
    reject("header_truncated_utf8.safetensors", "not valid UTF-8",
           "a multi-byte sequence cut by the header end is rejected",
           st_bytes(b'{"a":' + A8.encode() + b"}\xe2\x82", DATA8, pad=False))
    reject("header_not_object.safetensors", "does not start with '{'",
           "header must be a JSON object", st_bytes("[]"))
    reject("header_leading_space.safetensors", "does not start with '{'",
           "no padding before the object", st_bytes(" {}"))
    reject("header_trailing_newline.safetensors", "followed only by spaces",
           "only 0x20 may pad the header (newline)", st_bytes("{}\n", pad=False))
    reject("header_trailing_nul.safetensors", "followed only by spaces",
           "only 0x20 may pad the header (NUL)", st_bytes("{}\x00\x00\x00\x00\x00\x00", pad=False))
    reject("header_bad_json.safetensors", "not valid JSON",
           "header must parse as JSON", st_bytes('{"a":}'))
    reject("header_two_objects.safetensors", "not valid JSON",
           "exactly one JSON value", st_bytes("{}{}"))
    reject("header_too_deep.safetensors", "nested deeper than 3 levels",
           "no nesting beyond what a header needs",
           st_bytes('{"a":{"dtype":"F32","shape":[[2]],"data_offsets":[0,8]}}', DATA8))
    # --- names ---
    reject("duplicate_tensor.safetensors", "duplicate key 'a'",
           "duplicate tensor names are rejected (JSON parsers keep the last silently)",
           st_bytes('{"a":%s,"a":%s}' % (A8, t("F32", [2], 8, 16)), DATA8 * 2))
    reject("duplicate_metadata_key.safetensors", "duplicate key 'k' in '__metadata__'",
           "duplicate __metadata__ keys are rejected",
           st_bytes('{"__metadata__":{"k":"1","k":"2"},"a":%s}' % A8, DATA8))
    reject("duplicate_metadata.safetensors", "duplicate key '__metadata__'",
           "__metadata__ appears at most once",
           st_bytes('{"__metadata__":{},"__metadata__":{},"a":%s}' % A8, DATA8))
    reject("duplicate_entry_key.safetensors", "duplicate key 'dtype' in 'a'",
           "duplicate keys inside a tensor entry are rejected",
           st_bytes('{"a":{"dtype":"F32","dtype":"F32","shape":[2],"data_offsets":[0,8]}}', DATA8))
    reject("name_empty.safetensors", "empty tensor name",
           "tensor names are non-empty", st_bytes(hdr(**{"": A8}), DATA8))
    reject("name_nul.safetensors", "name contains a NUL byte",
           "tensor names hold no NUL byte", st_bytes('{"a\\u0000b":%s}' % A8, DATA8))
    # --- __metadata__ ---
    reject("metadata_not_object.safetensors", "__metadata__ is an array",
           "__metadata__ is an object", st_bytes('{"__metadata__":[],"a":%s}' % A8, DATA8))
    reject("metadata_value_not_string.safetensors", "value of 'k' is a number, expected a string",
           "__metadata__ values are strings",
           st_bytes('{"__metadata__":{"k":1},"a":%s}' % A8, DATA8))
    # --- tensor entries ---
    reject("entry_not_object.safetensors", "entry is an array",
           "a tensor entry is an object", st_bytes('{"a":[0,8]}', DATA8))
    reject("entry_unknown_key.safetensors", "unknown key 'extra'",
           "a tensor entry has only dtype, shape, data_offsets",
           st_bytes('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"extra":1}}', DATA8))
    reject("entry_missing_dtype.safetensors", "missing 'dtype'", "dtype is required",
           st_bytes('{"a":{"shape":[2],"data_offsets":[0,8]}}', DATA8))
    reject("entry_missing_shape.safetensors", "missing 'shape'", "shape is required",
           st_bytes('{"a":{"dtype":"F32","data_offsets":[0,8]}}', DATA8))
    reject("entry_missing_offsets.safetensors", "missing 'data_offsets'",
           "data_offsets is required", st_bytes('{"a":{"dtype":"F32","shape":[2]}}', DATA8))
    reject("dtype_unknown.safetensors", "unknown dtype 'F4'", "dtype must be known",
           st_bytes(hdr(a=t("F4", [2], 0, 8)), DATA8))
    reject("dtype_lowercase.safetensors", "unknown dtype 'f32'", "dtype spelling is exact",
           st_bytes(hdr(a=t("f32", [2], 0, 8)), DATA8))
    reject("dtype_not_string.safetensors", "dtype is a number", "dtype is a string",
           st_bytes('{"a":{"dtype":4,"shape":[2],"data_offsets":[0,8]}}', DATA8))
    reject("shape_not_array.safetensors", "shape is a number", "shape is an array",
           st_bytes('{"a":{"dtype":"F32","shape":2,"data_offsets":[0,8]}}', DATA8))
    reject("shape_negative.safetensors", "shape[0] is -2, expected a non-negative integer",
           "shape dims are non-negative", st_bytes(hdr(a=t("F32", [-2], 0, 8)), DATA8))
    reject("shape_float.safetensors", "shape[0] is 2.0, expected a non-negative integer",
           "shape dims are integers",
           st_bytes('{"a":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}}', DATA8))
    reject("shape_dim_too_big.safetensors", "shape[0] is 9223372036854775808",
           "shape dims fit in int64", st_bytes(hdr(a=t("U8", [2**63], 0, 8)), DATA8))
    reject("shape_numel_overflow.safetensors", "overflows 64-bit byte counts",
           "element count product checked for overflow",
           st_bytes(hdr(a=t("U8", [2**32, 2**32], 0, 8)), DATA8))
    reject("shape_bytes_overflow.safetensors", "overflows 64-bit byte counts",
           "element count x dtype size checked for overflow",
           st_bytes(hdr(a=t("F32", [2**62], 0, 8)), DATA8))
    reject("span_mismatch.safetensors",
           "tensor 'x.weight': data_offsets [0, 10] span 10 bytes, expected 12 (BF16 [2, 3])",
           "element count x dtype size == end - begin",
           st_bytes(hdr(**{"x.weight": t("BF16", [2, 3], 0, 10)}), bytes(10)))
    reject("offsets_begin_after_end.safetensors", "begin is after end", "begin <= end",
           st_bytes(hdr(a=t("U8", [0], 8, 0)), DATA8))
    reject("offsets_not_pair.safetensors", "expected [begin, end]", "data_offsets has 2 entries",
           st_bytes('{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}}', DATA8))
    reject("offsets_negative.safetensors", "expected [begin, end] non-negative integers",
           "offsets are non-negative integers",
           st_bytes('{"a":{"dtype":"U8","shape":[8],"data_offsets":[-8,0]}}', DATA8))
    reject("offsets_float.safetensors", "expected [begin, end] non-negative integers",
           "offsets are integers",
           st_bytes('{"a":{"dtype":"U8","shape":[8],"data_offsets":[0,8.0]}}', DATA8))
    reject("offsets_not_from_zero.safetensors", "leave a hole: the data before ends at 0",
           "data starts at offset 0", st_bytes(hdr(a=t("F32", [2], 8, 16)), DATA8 * 2))
    reject("offsets_hole.safetensors", "tensor 'b': data_offsets [12, 20] leave a hole",
           "tensor data is contiguous (no holes)",
           st_bytes(hdr(a=A8, b=t("F32", [2], 12, 20)), bytes(20)))
    reject("offsets_overlap.safetensors", "overlap tensor 'a' [0, 8]",
           "tensor data does not overlap", st_bytes(hdr(a=A8, b=t("F32", [2], 4, 12)), bytes(12)))
    reject("offsets_same_range.safetensors", "overlap tensor 'a' [0, 8]",
           "two tensors cannot share bytes", st_bytes(hdr(a=A8, b=A8), DATA8))
    reject("file_trailing_bytes.safetensors", "does not match the header",
           "file length == data start + last end (no trailing bytes)",
           st_bytes(hdr(a=A8), DATA8 + b"\x00"))
    reject("file_truncated_data.safetensors", "does not match the header",
           "file length == data start + last end (data not cut short)",
           st_bytes(hdr(a=A8), DATA8[:7]))
    # --- checkpoints: folders, indexes, shards ---
    reject_dir("ambiguous_checkpoint", "holds both model.safetensors.index.json and "
               "model.safetensors", "a folder holds an index or model.safetensors, not both",
               {"model.safetensors.index.json": index({"a": S1}), S1: single("a"),
                "model.safetensors": single("a")})
    reject_dir("no_checkpoint", "neither model.safetensors.index.json nor model.safetensors",
               "a folder must hold an index or model.safetensors", {"config.json": b"{}\n"})

    def shard_name_case(rel, shard, expect, rule):
        wm = '{"weight_map":{"a":%s}}' % json.dumps(shard)
        reject_dir(rel, expect, rule, {"model.safetensors.index.json": wm.encode()})

    shard_name_case("shard_escapes_folder", "../x.safetensors", "contains a path separator",
                    "shard names have no '/' (cannot leave the folder)")
    shard_name_case("shard_absolute_path", "/tmp/x.safetensors", "contains a path separator",
                    "shard names are not absolute paths")
    shard_name_case("shard_backslash", "..\\x.safetensors", "contains a path separator",
                    "shard names have no '\\\\'")
    shard_name_case("shard_dotdot", "..", "is not a file name", "shard names are not '.' or '..'")
    shard_name_case("shard_empty_name", "", "shard name '' is empty", "shard names are non-empty")
    shard_name_case("shard_nul_name", "a\u0000.safetensors", "contains a NUL byte",
                    "shard names hold no NUL byte")
    shard_name_case("shard_wrong_suffix", "pytorch_model.bin", "does not end in .safetensors",
                    "shard names end in .safetensors")
    shard_name_case("shard_suffix_only", ".safetensors", "does not end in .safetensors",
                    "a shard name has a stem before .safetensors")
    ok = {S1: single("a")}
    reject_dir("index_bad_json", "not valid JSON", "index must parse as JSON",
               {"model.safetensors.index.json": b'{"weight_map":', S1: single("a")})
    reject_dir("index_invalid_utf8", "not valid UTF-8", "index must be UTF-8",
               {"model.safetensors.index.json": b'{"weight_map":{"a\xff":"%s"}}' % S1.encode(),
                **ok})
    reject_dir("index_not_object", "index is not a JSON object", "index is an object",
               {"model.safetensors.index.json": b"[]", **ok})
    reject_dir("index_duplicate_tensor", "duplicate key 'a' in 'weight_map'",
               "duplicate weight_map names are rejected",
               {"model.safetensors.index.json": index({"a": S1}).replace(
                   b'"weight_map":{', b'"weight_map":{"a":"%s",' % S2.encode()), **ok})
    reject_dir("index_no_weight_map", "missing 'weight_map'", "weight_map is required",
               {"model.safetensors.index.json": b'{"metadata":{}}', **ok})
    reject_dir("index_weight_map_not_object", "weight_map is not an object",
               "weight_map is an object",
               {"model.safetensors.index.json": b'{"weight_map":["a"]}', **ok})
    reject_dir("index_empty_weight_map", "weight_map is empty", "weight_map names a tensor",
               {"model.safetensors.index.json": b'{"weight_map":{}}', **ok})
    reject_dir("index_shard_not_string", "shard is not a string", "weight_map values are strings",
               {"model.safetensors.index.json": b'{"weight_map":{"a":1}}', **ok})
    reject_dir("index_empty_tensor_name", "weight_map: empty tensor name",
               "indexed tensor names are non-empty",
               {"model.safetensors.index.json": index({"": S1}), **ok})
    reject_dir("index_unknown_key", "unknown key 'extra'", "index has only metadata, weight_map",
               {"model.safetensors.index.json": index({"a": S1}, ',"extra":{}').replace(
                   b'"metadata":{"total_size":16},"extra":{}', b'"extra":1,"metadata":{}'),
                **ok})
    reject_dir("index_metadata_nested", "value of 'total_size' is not a scalar",
               "index metadata values are scalars",
               {"model.safetensors.index.json": b'{"metadata":{"total_size":[16]},'
                b'"weight_map":{"a":"%s"}}' % S1.encode(), **ok})
    reject_dir("index_metadata_not_object", "metadata is not an object",
               "index metadata is an object",
               {"model.safetensors.index.json": b'{"metadata":1,"weight_map":{"a":"%s"}}'
                % S1.encode(), **ok})
    reject_dir("index_missing_tensor", "tensor 'b' is listed in %s but that shard does not hold it"
               % S1, "every indexed tensor is in its shard",
               {"model.safetensors.index.json": index({"a": S1, "b": S1}), **ok})
    reject_dir("index_unlisted_tensor", "shard %s holds tensor 'c' that the index does not list"
               % S1, "a shard holds no tensor the index does not list",
               {"model.safetensors.index.json": index({"a": S1}),
                S1: st_bytes(hdr(a=A8, c=t("F32", [2], 8, 16)), DATA8 * 2)})
    reject_dir("index_wrong_shard", "tensor 'b' is in %s but the index names %s" % (S1, S2),
               "each tensor is in the shard the index names",
               {"model.safetensors.index.json": index({"a": S1, "b": S2, "c": S2}),
                S1: st_bytes(hdr(a=A8, b=t("F32", [2], 8, 16)), DATA8 * 2), S2: single("c")})
    reject_dir("tensor_in_two_shards", "tensor 'a' is in two shards, %s and %s" % (S1, S2),
               "no tensor is in two shards, even if the index names one",
               {"model.safetensors.index.json": index({"a": S1, "b": S2}), S1: single("a"),
                S2: st_bytes(hdr(a=A8, b=t("F32", [2], 8, 16)), DATA8 * 2)})
    reject_dir("shard_missing_file", "cannot open", "every indexed shard exists",
               {"model.safetensors.index.json": index({"a": S1, "b": S2}), S1: single("a")})
    reject_dir("shard_invalid", S2 + ": tensor 'b': data_offsets [0, 4] span 4 bytes, expected 8",
               "every shard is validated like a single file",
               {"model.safetensors.index.json": index({"a": S1, "b": S2}), S1: single("a"),
                S2: st_bytes(hdr(b=t("F32", [2], 0, 4)), DATA8[:4])})

    # --- accepted inputs (also fuzz seeds) ---
    accept("valid/empty.safetensors", "a header '{}' with no tensors", st_bytes("{}"))
    accept("valid/unpadded.safetensors", "a header without padding",
           st_bytes(hdr(a=A8), DATA8, pad=False))
    accept("valid/spaces_padding.safetensors", "trailing 0x20 padding",
           st_bytes(hdr(a=A8) + " " * 13, DATA8, pad=False))
    dtypes = [("BOOL", 1), ("U8", 1), ("I8", 1), ("U16", 2), ("I16", 2), ("F16", 2), ("BF16", 2),
              ("U32", 4), ("I32", 4), ("F32", 4), ("U64", 8), ("I64", 8), ("F64", 8),
              ("F8_E4M3", 1), ("F8_E5M2", 1)]
    entries, off = {}, 0
    for name, size in dtypes:
        entries[name.lower()] = t(name, [3], off, off + 3 * size)
        off += 3 * size
    entries["scalar"] = t("F32", [], off, off + 4)
    entries["empty"] = t("F32", [0, 5], off + 4, off + 4)
    off += 4
    accept("valid/all_dtypes.safetensors", "every dtype, a scalar, a zero-size tensor",
           st_bytes('{"__metadata__":{"format":"pt"},' + hdr(**entries)[1:],
                    bytes(i % 251 for i in range(off))))
    accept("valid/reordered.safetensors", "header order differs from data order",
           st_bytes(hdr(b=t("F32", [2], 8, 16), a=A8), DATA8 * 2))
    accept_dir("valid/sharded", "an index (HF total_size number) and two shards",
               {"model.safetensors.index.json": index({"a": S1, "b": S2}), S1: single("a"),
                S2: single("b")})


def main():
    for entry in os.listdir(HERE):
        if entry not in ("make_corpus.py",):
            p = os.path.join(HERE, entry)
            shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
    build()
    table = {"rejected": {k: v[0] for k, v in sorted(REJECTED.items())},
             "accepted": sorted(ACCEPTED)}
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(table, f, indent=2, ensure_ascii=True)
        f.write("\n")
    lines = ["# safetensors validation corpus", "",
             "Generated by `make_corpus.py` (do not edit by hand). Each rejected entry breaks one",
             "rule; the error must contain the expected text (`expected.json`, checked by",
             "`tests/unit/safetensors_corpus_test.cpp`). Entries under `valid/` must be accepted.",
             "Folders are opened as checkpoints, files as single safetensors files.", "",
             "| entry | rule | error contains |", "| --- | --- | --- |"]
    for k, (expect, rule) in sorted(REJECTED.items()):
        lines.append("| `%s` | %s | `%s` |" % (k, rule.replace("|", "\\|"), expect))
    lines += ["", "| accepted entry | what it shows |", "| --- | --- |"]
    for k, rule in sorted(ACCEPTED.items()):
        lines.append("| `%s` | %s |" % (k, rule))
    with open(os.path.join(HERE, "README.md"), "w") as f:
        f.write("\n".join(lines) + "\n")
    # Corpus bytes are exact: never let git convert line endings.
    with open(os.path.join(HERE, ".gitattributes"), "w") as f:
        f.write("* -text\nREADME.md text\nmake_corpus.py text\nexpected.json text\n")


if __name__ == "__main__":
    main()
