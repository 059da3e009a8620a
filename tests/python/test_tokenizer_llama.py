"""ferry's tokenizer on the Llama-layout tokenizers of tests/data/llama against Hugging Face
`tokenizers` (the oracle) and, for the Llama-2 layout, `sentencepiece` on the model the file was
made from.

The real Llama vocabularies are not reachable here: these are small vocabularies trained for the
test (make_tokenizers.py) in the real files' layouts: SentencePiece BPE with byte fallback (the
Prepend + Replace normalizer form and the Metaspace form) and Llama-3's byte-level BPE with its
split pattern, ignore_merges and a BOS template. Every id list, with and without the BOS, and
every decoded text (with and without special tokens) must be identical.
"""
import json
from pathlib import Path

import pytest
import sentencepiece
import tokenizers

import llama_tokenizer_corpus as corpus
from test_tokenizer import ferry_batch

DATA = Path(__file__).resolve().parents[1] / "data" / "llama"
NAMES = ["llama2", "llama2-metaspace", "llama3"]


@pytest.mark.parametrize("name", NAMES)
def test_encode_matches_tokenizers(name, tmp_path):
    path = DATA / name / "tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(path))
    texts = corpus.test_texts(name)
    for add_special, flags in ((False, []), (True, ["--add-special"])):
        want = [hf.encode(t, add_special_tokens=add_special).ids for t in texts]
        got = ferry_batch(path, texts, tmp_path, *flags)
        bad = [(t, w, g) for t, w, g in zip(texts, want, got) if w != g]
        assert not bad, f"{len(bad)} of {len(texts)} differ (add_special={add_special}): {bad[0]!r}"


@pytest.mark.parametrize("name", NAMES)
def test_decode_matches_tokenizers(name, tmp_path):
    path = DATA / name / "tokenizer.json"
    hf = tokenizers.Tokenizer.from_file(str(path))
    ids = [hf.encode(t, add_special_tokens=True).ids for t in corpus.test_texts(name)]
    # Also every id alone (byte tokens that are no character by themselves) and runs of them.
    ids += [[i] for i in range(hf.get_vocab_size())]
    ids += [list(range(i, min(i + 7, hf.get_vocab_size()))) for i in range(0, hf.get_vocab_size(), 5)]
    for skip, flags in ((False, []), (True, ["--skip-special"])):
        got = ferry_batch(path, ids, tmp_path, "--decode", *flags)
        for seq, g in zip(ids, got):
            want = hf.decode(seq, skip_special_tokens=skip)
            assert g["text"] == want, (seq, g["text"], want)
            assert "".join(g["pieces"]) == want


def test_sentencepiece_agrees_on_the_llama2_file(tmp_path):
    """The tokenizer.json's merges reproduce the SentencePiece model's own BPE: the file is a
    faithful Llama-2-layout conversion, so agreeing with tokenizers is agreeing with SentencePiece
    (texts without the special tokens, which SentencePiece does not match in text)."""
    sp = sentencepiece.SentencePieceProcessor(model_file=str(DATA / "llama2" / "tokenizer.model"))
    texts = [t for t in corpus.test_texts("llama2") if "<" not in t]
    got = ferry_batch(DATA / "llama2" / "tokenizer.json", texts, tmp_path)
    bad = [(t, sp.encode(t), g) for t, g in zip(texts, got) if sp.encode(t) != g]
    assert not bad, f"{len(bad)} of {len(texts)} differ: {bad[0]!r}"


def test_expected_file_is_current():
    """expected_tokens.json (what the C++ test reads) is what the installed tokenizers gives."""
    doc = json.loads((DATA / "expected_tokens.json").read_text(encoding="utf-8"))
    for name in NAMES:
        hf = tokenizers.Tokenizer.from_file(str(DATA / name / "tokenizer.json"))
        for case in doc["tokenizers"][name]:
            assert hf.encode(case["text"], add_special_tokens=False).ids == case["ids"]


def test_metaspace_decoder_variant(tmp_path):
    """The Metaspace decoder (the other decoder a SentencePiece file may name) on the Metaspace
    file: replacement characters become spaces except in the first token, where they go."""
    doc = json.loads((DATA / "llama2-metaspace" / "tokenizer.json").read_text(encoding="utf-8"))
    doc["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first",
                      "split": False}
    path = tmp_path / "tokenizer.json"
    path.write_text(json.dumps(doc, ensure_ascii=False), encoding="utf-8")
    hf = tokenizers.Tokenizer.from_file(str(path))
    ids = [hf.encode(t, add_special_tokens=True).ids for t in corpus.test_texts("llama2")]
    ids += [[i] for i in range(hf.get_vocab_size())]
    for skip, flags in ((False, []), (True, ["--skip-special"])):
        got = ferry_batch(path, ids, tmp_path, "--decode", *flags)
        for seq, g in zip(ids, got):
            assert g["text"] == hf.decode(seq, skip_special_tokens=skip), seq
