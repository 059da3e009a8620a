#!/usr/bin/env python3
"""Writes the small Llama-layout tokenizers the tokenizer tests read, and what Hugging Face
`tokenizers` (the oracle) makes of a corpus with them.

The real Llama vocabularies are not reachable here, so the files are made for the test, in the
layouts the real ones have:

- llama2/: a SentencePiece BPE model (`sentencepiece`, trained on the corpus below with Llama-2's
  trainer options: byte fallback, split digits, whitespace-only pieces, identity normalization;
  <unk>, <s>, </s> at 0, 1, 2), written as tokenizer.json with `tokenizers` in the layout
  transformers 4.x's LlamaConverter gives it (transformers 5 no longer converts a .model this
  way): the Prepend + Replace normalizer of the released Llama-2 files (legacy=True), merges
  ranked by piece score, byte fallback, the Replace/ByteFallback/Fuse/Strip decoder, BOS by
  TemplateProcessing. tokenizer.model is kept for the sentencepiece cross-check.
- llama2-metaspace/: the same model converted with legacy=False (a Metaspace pre-tokenizer with
  prepend_scheme "first" instead of the normalizer).
- llama3/: a byte-level BPE trained with `tokenizers` on the corpus, with Llama-3's split pattern
  (a Split pre-tokenizer, then ByteLevel without its regex), ignore_merges, its special tokens
  after the vocabulary and the Sequence[ByteLevel, TemplateProcessing] post-processor that adds
  <|begin_of_text|>.

expected.json beside them holds, per tokenizer, the ids `tokenizers` gives each text of the
corpus with and without add_special_tokens, and the text it decodes the ids to (with and without
skip_special_tokens): tests/unit/tokenizer_llama_test.cpp checks ferry against it without Python;
tests/python/test_tokenizer_llama.py checks against the installed `tokenizers` itself.

Needs: tokenizers, sentencepiece (with its protobuf module). Run from anywhere:
    python3 tests/data/llama/make_tokenizers.py
"""
import io
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parents[1] / "python"))

import llama_tokenizer_corpus as corpus  # noqa: E402

LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|"
                  r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
LLAMA3_SPECIALS = ["<|begin_of_text|>", "<|end_of_text|>", "<|reserved_special_token_0|>",
                   "<|reserved_special_token_1|>", "<|finetune_right_pad_id|>",
                   "<|start_header_id|>", "<|end_header_id|>", "<|eom_id|>", "<|eot_id|>",
                   "<|python_tag|>"]


def write_json(path, doc):
    path.write_text(json.dumps(doc, ensure_ascii=False, separators=(",", ":")) + "\n",
                    encoding="utf-8")


def train_sentencepiece(vocab_size):
    import sentencepiece as spm
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(corpus.training_lines()), model_writer=model,
        vocab_size=vocab_size, model_type="bpe", byte_fallback=True, split_digits=True,
        allow_whitespace_only_pieces=True, remove_extra_whitespaces=False,
        normalization_rule_name="identity", character_coverage=1.0, unk_id=0, bos_id=1,
        eos_id=2, pad_id=-1, add_dummy_prefix=True, num_threads=1, minloglevel=2)
    return model.getvalue()


def spm_merges(proto):
    """BPE merges of a SentencePiece model, as transformers' SentencePieceExtractor derives them:
    every split of a normal piece into two pieces of the vocabulary, ranked by the merged piece's
    score (highest first), ties by the two halves' ids."""
    ids = {p.piece: i for i, p in enumerate(proto.pieces)}
    merges = []
    for i, p in enumerate(proto.pieces):
        if p.type != 1:
            continue
        local = [(p.piece[:k], p.piece[k:]) for k in range(1, len(p.piece))
                 if p.piece[:k] in ids and p.piece[k:] in ids]
        local.sort(key=lambda lr: (ids[lr[0]], ids[lr[1]]))
        merges += [(l, r, p.score) for l, r in local]
    merges.sort(key=lambda m: -m[2])  # stable: ties keep the order above
    return [(l, r) for l, r, _ in merges]


def llama2(folder, model_bytes, legacy):
    """The tokenizer.json transformers' LlamaConverter (4.x) writes for a Llama SentencePiece
    model, with the TemplateProcessing LlamaTokenizerFast sets for add_bos_token."""
    from sentencepiece import sentencepiece_model_pb2 as pb
    from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers
    from tokenizers import processors
    folder.mkdir(parents=True, exist_ok=True)
    model_path = folder / "tokenizer.model"
    model_path.write_bytes(model_bytes)
    proto = pb.ModelProto()
    proto.ParseFromString(model_bytes)
    vocab = {p.piece: i for i, p in enumerate(proto.pieces)}
    tok = Tokenizer(models.BPE(vocab, spm_merges(proto), unk_token="<unk>", fuse_unk=True,
                               byte_fallback=True, dropout=None))
    tok.add_tokens([AddedToken(p.piece, normalized=False, special=True)
                    for p in proto.pieces if p.type == 3 or p.piece == "<unk>"])
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("\u2581"),
                                               normalizers.Replace(" ", "\u2581")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581",
                                                     prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence([decoders.Replace("\u2581", " "), decoders.ByteFallback(),
                                     decoders.Fuse(), decoders.Strip(content=" ", left=1)])
    tok.post_processor = processors.TemplateProcessing(
        single="<s>:0 $A:0", pair="<s>:0 $A:0 <s>:1 $B:1", special_tokens=[("<s>", 1)])
    tok.save(str(folder / "tokenizer.json"))
    if not legacy:
        model_path.unlink()


def llama3(folder):
    from tokenizers import Regex, Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    folder.mkdir(parents=True, exist_ok=True)
    tok = Tokenizer(models.BPE(ignore_merges=True))
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    tok.decoder = decoders.ByteLevel(add_prefix_space=True, trim_offsets=True, use_regex=True)
    trainer = trainers.BpeTrainer(vocab_size=700, show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(corpus.training_lines(), trainer=trainer)
    tok.add_special_tokens(LLAMA3_SPECIALS)
    bos = tok.token_to_id("<|begin_of_text|>")
    tok.post_processor = processors.Sequence([
        processors.ByteLevel(add_prefix_space=True, trim_offsets=False, use_regex=True),
        processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                      pair="<|begin_of_text|> $A <|begin_of_text|> $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    tok.save(str(folder / "tokenizer.json"))


def expected(folder, texts):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
    out = []
    for t in texts:
        plain = tok.encode(t, add_special_tokens=False).ids
        special = tok.encode(t, add_special_tokens=True).ids
        out.append({"text": t, "ids": plain, "ids_special": special,
                    "decoded": tok.decode(special, skip_special_tokens=False),
                    "decoded_skip": tok.decode(special, skip_special_tokens=True)})
    return out


def main():
    sp = train_sentencepiece(600)
    llama2(HERE / "llama2", sp, legacy=True)
    llama2(HERE / "llama2-metaspace", sp, legacy=False)
    llama3(HERE / "llama3")
    import tokenizers
    doc = {"tokenizers_version": tokenizers.__version__, "tokenizers": {}}
    for name in ["llama2", "llama2-metaspace", "llama3"]:
        doc["tokenizers"][name] = expected(HERE / name, corpus.test_texts(name))
    write_json(HERE / "expected_tokens.json", doc)


if __name__ == "__main__":
    main()
