#!/usr/bin/env python3
"""Fixtures for ptdp's GPT-2 byte-level BPE tokenizer (core/data/gpt2_bpe_tokenizer_test.cpp,
experiments/cli_preprocess_test.cpp): a small vocabulary in GPT-2's file format and the ids that
Hugging Face transformers gives for a set of test texts.

  gpt2_bpe_fixtures.py OUT_DIR

writes into OUT_DIR:
  vocab.json, merges.txt  a byte-level BPE trained with the `tokenizers` library
                          (ByteLevelBPETokenizer) on /usr/share/common-licenses/GPL-3 and a few
                          generated multilingual lines, <|endoftext|> as its special token, in
                          GPT-2's format (vocab.json: token -> id, <|endoftext|> the last id as in
                          GPT-2's 50256; merges.txt: "#version: 0.2" then one merge a line)
  text.txt                a document made of the test texts, for `ptdp preprocess`
  expected.txt            the test texts (hex of their bytes) and their ids

The reference is transformers' GPT2Tokenizer, the slow one: its bpe() is OpenAI's encoder.py
(and Megatron's GPT2BPETokenizer). The fast GPT2TokenizerFast (the Rust `tokenizers`) is checked
to give the same ids for every text; the script stops if it does not. Two cases are not what
GPT2Tokenizer.encode() gives:
  - a text containing "<|endoftext|>": transformers treats it as the special token, Megatron and
    ptdp as plain text; its ids are GPT2Tokenizer._tokenize() (the pre-tokenizer and bpe alone),
    what Megatron's tokenizer gives; the record `NAME.transformers` keeps encode()'s ids.
  - bytes that are not UTF-8: transformers takes a Python str, so the bytes are decoded first
    with errors="replace" (one U+FFFD for each maximal ill-formed subsequence), as ptdp does
    under --allow-invalid-utf8.

Setup used for the committed fixtures (PyPI):
  python3 -m venv /tmp/hfvenv
  /tmp/hfvenv/bin/pip install transformers==4.40.2 tokenizers   # no torch needed
  /tmp/hfvenv/bin/python scripts/gpt2_bpe_fixtures.py core/data/testdata/gpt2_bpe

expected.txt format: one record a line, "NAME.text HEX" (the UTF-8 bytes of the text) and
"NAME.ids ID ID ..."; lines starting with '#' are comments (provenance, each text's repr).
Training is deterministic for a given tokenizers version.
"""
import json
import os
import sys
import tempfile

GPL3 = "/usr/share/common-licenses/GPL-3"
VOCAB_SIZE = 1800  # 256 byte tokens, <|endoftext|> and about 1500 merges
EOD = "<|endoftext|>"

# Extra training text, so that some merges join the bytes of non-ASCII letters.
MULTILINGUAL = [
    "Le café est très bon, déjà vu, à la carte, crème brûlée, être ou ne pas être.",
    "Die Straße ist groß und schön; Grüße aus München, übermäßig süß.",
    "Привет, как дела? Это тест токенизатора, привет мир.",
    "你好，世界。这是一个测试。我们的模型学习中文。",
    "日本語のテキストです。こんにちは世界。",
    "Emoji: 😀 🎉 👍 😀😀 🎉🎉",
]

# The test texts: (name, text); text is str, or bytes for input that is not UTF-8.
CASES = [
    ("contractions", "It's, don't, we're, they've, I'm, you'll, he'd"),
    ("contractions_upper", "IT'S DON'T WE'RE I'M YOU'LL HE'D She'S"),
    ("contraction_alone", "'s 't 're 've 'm 'll 'd ' s"),
    ("apostrophe_runs", "rock'n'roll '''' o'clock ''s"),
    ("letters", "hello world Hello World HELLO"),
    ("leading_space", " leading space"),
    ("digits", "1 12 123 1234 12345 3.14159 2024-01-01 x1y2z3"),
    ("punctuation", "Hello!!! What?! ... --- (a) [b] {c} <d> #$%^&* @user"),
    ("multiple_spaces", "a  b   c    d     e"),
    ("trailing_spaces", "trailing   "),
    ("tabs", "\tindented\t\ttabs\t here \t"),
    ("newline", "line one\nline two"),
    ("double_newline", "para one\n\npara two"),
    ("newline_space_newline", "a\n \nb\n  \n\nc"),
    ("newline_at_start_end", "\nstart and end\n"),
    ("empty_line", "first\n\nthird\n"),
    ("only_newlines", "\n\n\n"),
    ("only_spaces", "     "),
    ("crlf", "windows\r\nline\r\n"),
    ("accents", "café déjà vu crème brûlée naïve"),
    ("german", "Straße groß Grüße"),
    ("cyrillic", "Привет, мир! Это тест."),
    ("cjk", "你好，世界。日本語のテキスト。"),
    ("emoji", "😀 🎉👍 hi😀"),
    ("combining_marks", "cafe\u0301 n\u0303 a\u0308\u0304 \u0301alone"),
    ("unseen_scripts", "Ελληνικά עברית हिन्दी ไทย 🦀 ☃"),
    ("unicode_spaces", "a\u00a0b\u2003c\u3000d\u2028e\u0085f\u180eg"),
    ("control_bytes", "nul\x00bell\x07esc\x1b[0m\x7f\x0b\x0c\x1c"),
    ("long_letter_run", "a" * 300),
    ("long_word", "Supercalifragilisticexpialidocious" * 4),
    ("long_punctuation", "=" * 120 + "\n" + "-*" * 40),
    ("long_spaces", " " * 70 + "x" + " " * 70),
    ("gpl_sentence", "This program is free software: you can redistribute it and/or modify it."),
    ("endoftext_in_text", "end of one document<|endoftext|>start of the next"),
    ("invalid_utf8", b"caf\xe9 na\xefve \xff\xfe \xc3 \xe2\x82 \xed\xa0\x80 \xf0\x9f\x98 \xc0\xaf ok"),
]


def train(out_dir, work):
    from tokenizers import ByteLevelBPETokenizer

    extra = os.path.join(work, "multilingual.txt")
    with open(extra, "w", encoding="utf-8") as f:
        for _ in range(30):
            f.write("\n".join(MULTILINGUAL) + "\n")
    bpe = ByteLevelBPETokenizer()
    bpe.train([GPL3, extra], vocab_size=VOCAB_SIZE, min_frequency=2, special_tokens=[EOD], show_progress=False)
    bpe.save_model(work)
    with open(os.path.join(work, "vocab.json"), encoding="utf-8") as f:
        vocab = json.load(f)
    # GPT-2's order: <|endoftext|> last.
    tokens = sorted((t for t in vocab if t != EOD), key=lambda t: vocab[t]) + [EOD]
    vocab = {t: i for i, t in enumerate(tokens)}
    with open(os.path.join(out_dir, "vocab.json"), "w", encoding="ascii") as f:
        json.dump(vocab, f)  # one line, \u escapes, as GPT-2's own file
    with open(os.path.join(work, "merges.txt"), encoding="utf-8") as src, open(
        os.path.join(out_dir, "merges.txt"), "w", encoding="utf-8", newline="\n"
    ) as dst:
        dst.write(src.read())
    return len(vocab)


def reference_ids(slow, fast, text, name):
    """(ids ptdp must give, ids of GPT2Tokenizer.encode when they differ)"""
    encoded = slow.encode(text)
    plain = slow.convert_tokens_to_ids(slow._tokenize(text))
    fast_ids = fast(text)["input_ids"]
    if fast_ids != encoded:
        sys.exit(f"{name}: GPT2TokenizerFast gives {fast_ids}, GPT2Tokenizer {encoded}")
    if EOD in text:
        if plain == encoded:
            sys.exit(f"{name}: expected transformers to treat {EOD} as special")
        return plain, encoded
    if plain != encoded:
        sys.exit(f"{name}: GPT2Tokenizer._tokenize and encode differ")
    if slow.decode(encoded, clean_up_tokenization_spaces=False) != text:
        sys.exit(f"{name}: decode does not give the text back")
    return encoded, None


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    import tokenizers
    import transformers
    from transformers import GPT2Tokenizer, GPT2TokenizerFast

    with tempfile.TemporaryDirectory() as work:
        n = train(out_dir, work)
    vocab_file, merges_file = os.path.join(out_dir, "vocab.json"), os.path.join(out_dir, "merges.txt")
    slow = GPT2Tokenizer(vocab_file, merges_file)
    fast = GPT2TokenizerFast(vocab_file=vocab_file, merges_file=merges_file)
    eod = slow.convert_tokens_to_ids(EOD)
    if eod != n - 1:
        sys.exit(f"{EOD} has id {eod}, expected {n - 1}")

    header = [
        f"made by scripts/gpt2_bpe_fixtures.py {out_dir} with transformers {transformers.__version__}, "
        f"tokenizers {tokenizers.__version__} (GPT2Tokenizer, the slow one; GPT2TokenizerFast agrees)",
        f"vocabulary {n} ids, {EOD} = {eod}; NAME.text is the hex of the text's bytes",
    ]
    records = [("vocab_size", [n]), ("eod", [eod])]
    document = []
    for name, text in CASES:
        raw = text if isinstance(text, bytes) else text.encode("utf-8")
        decoded = raw.decode("utf-8", errors="replace")
        ids, transformers_ids = reference_ids(slow, fast, decoded, name)
        header.append(f"{name}: {ascii(text)}")
        records.append((name + ".text", [raw.hex()]))
        records.append((name + ".ids", ids))
        if transformers_ids is not None:
            records.append((name + ".transformers", transformers_ids))
        if isinstance(text, str) and EOD not in text:
            document.append(text)
    # The document: every UTF-8 test text but the one with <|endoftext|>, one after another
    # (a line break between them), and the start of GPL-3's preamble.
    with open(GPL3, encoding="utf-8") as f:
        gpl = f.read()
    start = gpl.index("                            Preamble")
    document.append(gpl[start : start + 3000])
    text = "\n".join(document)
    with open(os.path.join(out_dir, "text.txt"), "w", encoding="utf-8", newline="") as f:
        f.write(text)
    ids, _ = reference_ids(slow, fast, text, "text.txt")
    records.append(("text.txt.ids", ids))

    with open(os.path.join(out_dir, "expected.txt"), "w", encoding="ascii") as f:
        for line in header:
            f.write("# " + line + "\n")
        for name, values in records:
            f.write(name + " " + " ".join(str(v) for v in values) + "\n")


if __name__ == "__main__":
    main()
