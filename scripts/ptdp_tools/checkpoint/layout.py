"""The parameter layout of a whole-model shard (t=1, one stage): the names, shapes and offsets of
ptdp's flat parameter buffer, in the order of core/model/params.cpp (ParamLayout). Standard library
only."""

from __future__ import annotations

from dataclasses import dataclass


def padded_vocab(vocab_size: int, tp: int = 1, divisible_by: int = 128) -> int:
    multiple = divisible_by * tp
    return (vocab_size + multiple - 1) // multiple * multiple


@dataclass
class ParamEntry:
    name: str
    shape: tuple
    offset: int
    decay: bool  # AdamW weight decay applies (matrices)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


def llama_ffn_hidden(hidden: int) -> int:
    """ModelConfig::ffn_hidden for llama: 2/3 of 4h, rounded up to a multiple of 256."""
    return (8 * hidden // 3 + 255) // 256 * 256


def param_layout(layers: int, hidden: int, seq_length: int, vocab_size: int, divisible_by: int = 128,
                 arch: str = "gpt", ffn_hidden: int = 0, heads: int = 0, query_groups: int = 0) -> list:
    """ParamLayout of a whole model (t=1, one stage): names, shapes ([out, in] for matrices),
    offsets in the flat buffer and the weight-decay flag, in ptdp's order. arch "gpt" or "llama";
    ffn_hidden 0: the architecture's default (4h, or llama_ffn_hidden). With grouped-query attention
    (heads and query_groups given, query_groups < heads) qkv has (heads + 2 query_groups) head_dim
    rows: per group its heads/query_groups query heads, then its key, then its value."""
    if arch not in ("gpt", "llama"):
        raise ValueError(f"arch {arch!r} is not gpt or llama")
    h, vp = hidden, padded_vocab(vocab_size, 1, divisible_by)
    ffn = ffn_hidden or (llama_ffn_hidden(hidden) if arch == "llama" else 4 * hidden)
    qkv = 3 * h
    if heads and query_groups and query_groups != heads:
        if hidden % heads or heads % query_groups:
            raise ValueError(f"{query_groups} query groups, {heads} heads and hidden {hidden} do not divide")
        qkv = (heads + 2 * query_groups) * (hidden // heads)
    entries, offset = [], 0

    def add(name, shape, decay):
        nonlocal offset
        e = ParamEntry(name, tuple(shape), offset, decay)
        entries.append(e)
        offset += e.numel

    if arch == "llama":
        # No biases, no position table, RMSNorm weights only; gate and up adjacent (one [2f, h]
        # GEMM in ptdp: gate rows, then up rows); an untied output layer after lnf.
        add("wte", (vp, h), True)
        for i in range(layers):
            p = f"layers.{i}."
            add(p + "ln1.weight", (h,), False)
            add(p + "qkv.weight", (qkv, h), True)  # rows: per head q | k | v (GQA: per group), head_dim each
            add(p + "proj.weight", (h, h), True)
            add(p + "ln2.weight", (h,), False)
            add(p + "gate.weight", (ffn, h), True)
            add(p + "up.weight", (ffn, h), True)
            add(p + "down.weight", (h, ffn), True)
        add("lnf.weight", (h,), False)
        add("output", (vp, h), True)
        return entries
    add("wte", (vp, h), True)
    add("wpe", (seq_length, h), True)
    for i in range(layers):
        p = f"layers.{i}."
        add(p + "ln1.weight", (h,), False)
        add(p + "ln1.bias", (h,), False)
        add(p + "qkv.weight", (qkv, h), True)  # rows: per head q | k | v (GQA: per group), head_dim each
        add(p + "qkv.bias", (qkv,), False)
        add(p + "proj.weight", (h, h), True)
        add(p + "proj.bias", (h,), False)
        add(p + "ln2.weight", (h,), False)
        add(p + "ln2.bias", (h,), False)
        add(p + "fc.weight", (ffn, h), True)
        add(p + "fc.bias", (ffn,), False)
        add(p + "fc2.weight", (h, ffn), True)
        add(p + "fc2.bias", (h,), False)
    add("lnf.weight", (h,), False)
    add("lnf.bias", (h,), False)
    return entries


def layout_numel(entries: list) -> int:
    return entries[-1].offset + entries[-1].numel if entries else 0
