"""Texts the tokenizer is checked on: every kind of text the Qwen pre-tokenizer pattern treats
differently, the added tokens of Qwen3 and Alpamayo-R1 inside and around text, and seeded random
mixes of all of them."""
import random

ENGLISH = [
    "Hello world",
    "The quick brown fox jumps over the lazy dog.",
    "I'm sure they'll say it's fine; we've seen what you'd do. DON'T, WON'T, I'LL, THEY'RE.",
    "Mr. O'Neil's dog isn't here — he's at the vet's.",
    "A car, a bicycle and three pedestrians wait at the crosswalk; the light turns green.",
    "output the chain-of-thought reasoning of the driving process, then output the future "
    "trajectory.",
    "You are a driving assistant that generates safe and accurate actions.",
    "e.g. i.e. etc... ?!?! --- *** ### @@@ $$$ %%% ^^^ &&& ((( ))) [[[ ]]] {{{ }}}",
    "naïve café résumé coöperate Ångström Zürich façade",
    "'s 't 're 've 'm 'll 'd 'S 'T 'RE 'VE 'M 'LL 'D 'x ''s '",
]
CHINESE = [
    "你好，世界！",
    "自动驾驶汽车需要理解周围环境，并预测其他交通参与者的行为。",
    "前方路口有行人正在过马路，车辆应减速慢行。",
    "中文和English混合的句子，包括数字123和符号！",
    "「引号」『书名』（括号）【方括号】《书名号》——破折号……省略号",
    "日本語のテキストも少し：東京は晴れです。",
    "한국어 문장도 있습니다. 안녕하세요!",
]
CODE = [
    "def f(x):\n    return x**2  # square\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
    "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 42); return 0; }\n",
    "const x = {a: 1, 'b': [2, 3], \"c\": null};\nconsole.log(x?.a ?? 0);",
    "SELECT id, name FROM users WHERE age >= 18 ORDER BY name DESC;",
    "    if (ptr != nullptr && ptr->next) { ptr = ptr->next; }\r\n",
    "<html><body><div class=\"x\">&amp; &lt;tag&gt;</div></body></html>",
    "lambda: [i for i in range(10) if i % 2 == 0]",
    "$ ls -la /usr/bin | grep -E '^-rwx' > out.txt 2>&1",
]
EMOJI = [
    "🚗🚕🚙 traffic 🚦🛑",
    "😀😃😄😁😆😅😂🤣",
    "👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 thumbs",
    "Emoji at the end 🎉",
    "🇺🇸🇯🇵🇨🇳",
    "a🚗b🚗c",
]
DIGITS = [
    "0123456789",
    "3.14159265358979 2.71828 1e-10 -42 +7",
    "12,345,678.90 and 1 000 000",
    "Speed: 35 mph, distance: 120m, time: 00:03:45.123",
    "٠١٢٣٤٥٦٧٨٩ ० १ २ ३ ½ ¾ ² ³ Ⅻ",
    "x1y2z3 a10b20 v2.0.1-rc3",
]
WHITESPACE = [
    " ",
    "  ",
    "   leading spaces",
    "trailing spaces   ",
    "a  b   c    d     e",
    "\n",
    "\n\n\n",
    "line1\nline2\n\nline4\n\n\n\nline8",
    "\r\n\r\n",
    "tab\tseparated\t\tvalues\t",
    " \t \n \t\n",
    "word \n next",
    "end with newline\n",
    "   \n   \n   ",
    "a\u00a0b\u2003c\u3000d\u2028e\u0085f",  # no-break, em, ideographic spaces; separators
    "mongolian\u180evowel\u180e separator \u180e",
    "zero\u200bwidth\u200cjoiners\u200d",
    "\x1c\x1d\x1e\x1f info separators",
    "\x00 nul \x07 bel \x7f del",
]
UNICODE = [
    "cafe\u0301 (decomposed) and caf\u00e9 (composed)",
    "\u1100\u1161\u11a8 Hangul jamo become a syllable under NFC",
    "Ω Å K (ohm, angstrom, kelvin signs)",
    "ſ 'ſ long s, ﬁ ligature, ① circled",
    "مرحبا بالعالم",
    "नमस्ते दुनिया",
    "Привет, мир! Ёлка.",
    "Γειά σου Κόσμε",
    "שלום עולם",
    "ไทย ภาษา",
    "𝔘𝔫𝔦𝔠𝔬𝔡𝔢 𝕞𝕒𝕥𝕙 𝟙𝟚𝟛",
    "a\u0300\u0301\u0302 stacked marks",
    "\ufeffBOM at start",
    "private use \ue000\uf8ff and noncharacter \ufdd0",
]
SPECIAL = [
    "<|endoftext|>",
    "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
    "<|im_start|>assistant\n",
    "<|vision_start|><|image_pad|><|image_pad|><|vision_end|>",
    "<think>\nreasoning\n</think>\n\nanswer",
    "<tool_call>{\"name\": \"f\"}</tool_call>",
    "<|im_start|><|im_end|><|im_start|>",
    "<|im_start|x <|im_end| |im_start|> <|im_startt|>",
    "text<|endoftext|>text",
    " <|im_end|> ",
    "<|fim_prefix|>def<|fim_suffix|>pass<|fim_middle|>",
    "<|traj_history_start|><|traj_history|><|traj_history|><|traj_history_end|>",
    "<|cot_start|>The light is red, so stop.<|cot_end|><|traj_future_start|>",
    "<i0><i1><i3999> <i42>x<i4000><i-1><i12",
    "<|prompt_start|><|answer_start|>ok<|answer_end|><|route_pad|><|vectorized_wm_pre_tkn|>",
]


def alpamayo_prompt():
    """The Alpamayo-R1 prompt of spec §4.3, with 16 images of 3 pad tokens."""
    images = "<|vision_start|>" + "<|image_pad|>" * 3 + "<|vision_end|>"
    return ("<|im_start|>system\nYou are a driving assistant that generates safe and accurate "
            "actions.<|im_end|>\n<|im_start|>user\n" + images * 16 + "<|traj_history_start|>" +
            "<|traj_history|>" * 48 + "<|traj_history_end|>output the chain-of-thought reasoning "
            "of the driving process, then output the future trajectory.<|im_end|>\n"
            "<|im_start|>assistant\n<|cot_start|>")


def random_mixes(count, seed=20261201):
    """Seeded random strings drawn from the pieces above and from single characters."""
    rng = random.Random(seed)
    pool = ENGLISH + CHINESE + CODE + EMOJI + DIGITS + WHITESPACE + UNICODE + SPECIAL
    chars = (" \n\t\r'\"0123456789aZé你🚗\u0301\u00a0<|>_-.,!?" + "".join(chr(c) for c in range(0x21, 0x7f)))
    out = []
    for _ in range(count):
        parts = []
        for _ in range(rng.randint(1, 6)):
            if rng.random() < 0.5:
                s = rng.choice(pool)
                a = rng.randint(0, len(s))
                parts.append(s[a:a + rng.randint(1, 40)])
            else:
                parts.append("".join(rng.choice(chars) for _ in range(rng.randint(1, 12))))
        out.append("".join(parts))
    return out


def corpus():
    long_text = " ".join(ENGLISH + CHINESE + CODE) * 4
    return (ENGLISH + CHINESE + CODE + EMOJI + DIGITS + WHITESPACE + UNICODE + SPECIAL +
            [alpamayo_prompt(), long_text, " " * 300, "\n" * 50, "a" * 1000, "🚗" * 100, ""] +
            random_mixes(300))
