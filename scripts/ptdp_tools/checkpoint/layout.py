"""The parameter layout of a shard's model chunk (the whole model by default): the names, shapes
and offsets of ptdp's flat parameter buffer, in the order of core/model/params.cpp (ParamLayout), with
each tensor's tensor-parallel split. Standard library only."""

from __future__ import annotations

from dataclasses import dataclass


def padded_vocab(vocab_size: int, tp: int = 1, divisible_by: int = 128) -> int:
    multiple = divisible_by * tp
    return (vocab_size + multiple - 1) // multiple * multiple


@dataclass
class ParamEntry:
    name: str
    shape: tuple  # this rank's part
    offset: int
    decay: bool  # AdamW weight decay applies (matrices)
    full_shape: tuple = ()  # the whole tensor (= shape when whole)
    split_dim: int = -1  # -1: whole on every tensor-parallel rank; 0: rows; 1: columns
    split_offset: int = 0  # where this rank's part starts along split_dim
    shared_copy: bool = False  # the last stage's copy of the tied word embedding (p > 1)

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
                 arch: str = "gpt", ffn_hidden: int = 0, heads: int = 0, query_groups: int = 0, tp: int = 1,
                 tp_rank: int = 0, layer_range: tuple | None = None, pre: bool = True, post: bool = True) -> list:
    """ParamLayout (core/model/params.cpp) of a model chunk: names, shapes ([out, in] for matrices),
    offsets in the flat buffer and the weight-decay flag, in ptdp's order. arch "gpt" or "llama";
    ffn_hidden 0: the architecture's default (4h, or llama_ffn_hidden). With grouped-query attention
    (heads and query_groups given, query_groups < heads) qkv has (heads + 2 query_groups) head_dim
    rows: per group its heads/query_groups query heads, then its key, then its value. The defaults
    are the whole model (t=1, one stage); else tensor-parallel rank tp_rank of tp holds its slice of
    the split tensors, layer_range (begin, end) the chunk's layers, pre the embeddings (the first
    stage) and post the final norm and output (the last; a GPT's last stage also holds a copy of
    wte, first, when it is not the first)."""
    if arch not in ("gpt", "llama"):
        raise ValueError(f"arch {arch!r} is not gpt or llama")
    h, vp = hidden, padded_vocab(vocab_size, tp, divisible_by)
    begin, end = layer_range if layer_range is not None else (0, layers)
    ffn = ffn_hidden or (llama_ffn_hidden(hidden) if arch == "llama" else 4 * hidden)
    qkv = 3 * h
    if heads and query_groups and query_groups != heads:
        if hidden % heads or heads % query_groups:
            raise ValueError(f"{query_groups} query groups, {heads} heads and hidden {hidden} do not divide")
        qkv = (heads + 2 * query_groups) * (hidden // heads)
    entries, offset = [], 0

    def add(name, shape, decay, split=-1, shared_copy=False):
        nonlocal offset
        full, local, split = tuple(shape), list(shape), split if tp > 1 else -1
        if split >= 0:
            if full[split] % tp:
                raise ValueError(f"{name}: dimension {full[split]} is not divisible by t={tp}")
            local[split] = full[split] // tp
        e = ParamEntry(name, tuple(local), offset, decay, full, split, local[split] * tp_rank if split >= 0 else 0,
                       shared_copy)
        entries.append(e)
        offset += e.numel

    if arch == "llama":
        # No biases, no position table, RMSNorm weights only; gate and up adjacent (one [2f, h]
        # GEMM in ptdp: gate rows, then up rows); an untied output layer after lnf.
        if pre:
            add("wte", (vp, h), True, 0)
        for i in range(begin, end):
            p = f"layers.{i}."
            add(p + "ln1.weight", (h,), False)
            add(p + "qkv.weight", (qkv, h), True, 0)  # rows: per head q | k | v (GQA: per group), head_dim each
            add(p + "proj.weight", (h, h), True, 1)
            add(p + "ln2.weight", (h,), False)
            add(p + "gate.weight", (ffn, h), True, 0)
            add(p + "up.weight", (ffn, h), True, 0)
            add(p + "down.weight", (h, ffn), True, 1)
        if post:
            add("lnf.weight", (h,), False)
            add("output", (vp, h), True, 0)
        return entries
    if pre or post:  # the last stage's copy of the tied embedding
        add("wte", (vp, h), True, 0, shared_copy=not pre)
    if pre:
        add("wpe", (seq_length, h), True)
    for i in range(begin, end):
        p = f"layers.{i}."
        add(p + "ln1.weight", (h,), False)
        add(p + "ln1.bias", (h,), False)
        add(p + "qkv.weight", (qkv, h), True, 0)  # rows: per head q | k | v (GQA: per group), head_dim each
        add(p + "qkv.bias", (qkv,), False, 0)
        add(p + "proj.weight", (h, h), True, 1)
        add(p + "proj.bias", (h,), False)
        add(p + "ln2.weight", (h,), False)
        add(p + "ln2.bias", (h,), False)
        add(p + "fc.weight", (ffn, h), True, 0)
        add(p + "fc.bias", (ffn,), False, 0)
        add(p + "fc2.weight", (h, ffn), True, 1)
        add(p + "fc2.bias", (h,), False)
    if post:
        add("lnf.weight", (h,), False)
        add("lnf.bias", (h,), False)
    return entries


def layout_numel(entries: list) -> int:
    return entries[-1].offset + entries[-1].numel if entries else 0
