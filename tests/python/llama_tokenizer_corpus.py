"""Texts for the Llama-layout tokenizers of tests/data/llama: what they are trained on (so the
vocabularies hold ordinary words) and what they are checked on (tokenizer_corpus's texts: unicode,
runs of spaces, digits, code, emoji and scripts the small vocabularies lack, so byte fallback and
byte-level pieces are exercised; and each model's special tokens inside and around text)."""
import random

import tokenizer_corpus as base

LLAMA2_SPECIAL = [
    "<s>[INST] Hello there [/INST] Hi!</s>",
    "<s>x</s><s>y",
    " <s> spaced </s> ",
    "<unk> stays whole",
    "text</s>text",
    "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nWhat is a car? [/INST]",
]
LLAMA3_SPECIAL = [
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHello<|eot_id|>"
    "<|start_header_id|>assistant<|end_header_id|>\n\n",
    "<|eot_id|>x<|end_of_text|>",
    " <|eot_id|> ",
    "<|reserved_special_token_0|><|python_tag|>print(1)<|eom_id|>",
    "<|begin_of_text|",
]


def training_lines():
    """The lines the test vocabularies are trained on (English, code, digits, some Chinese)."""
    lines = base.ENGLISH + base.CODE + base.DIGITS + base.CHINESE[:2]
    rng = random.Random(7)
    words = " ".join(base.ENGLISH).split()
    for _ in range(300):
        lines.append(" ".join(rng.choice(words) for _ in range(rng.randint(3, 12))))
    return lines


def test_texts(name):
    """The texts tokenizer `name` is checked on."""
    texts = (base.ENGLISH + base.CHINESE + base.CODE + base.EMOJI + base.DIGITS +
             base.WHITESPACE + base.UNICODE)
    texts += LLAMA3_SPECIAL if name == "llama3" else LLAMA2_SPECIAL
    texts += ["", "a", " a", "  a", "\ta", "\u2581already metaspace\u2581 \u2581", "<0x41> <0xZZ>"]
    rng = random.Random(11 + len(name))
    pool = "".join(texts)
    for _ in range(40):
        start = rng.randrange(len(pool))
        texts.append(pool[start:start + rng.randint(1, 40)])
    return texts
