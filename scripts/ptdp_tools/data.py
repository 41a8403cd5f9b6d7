"""ptdp's training data in Python: Megatron MMIDIDX datasets (.bin/.idx) and the sample order.

Standard library only. Mirrors core/data/indexed_dataset.h (the .idx layout),
core/data/indexed_dataset_writer.cpp and core/data/samples.{h,cpp}: sample i of the training
order reads window perm_e[i mod n] of epoch e = i // n, window j being tokens
[j*s, j*s + s + 1) of all sequences concatenated; perm_e is a Fisher-Yates permutation driven
by splitmix64 seeded with (seed, e). Iteration k (1-based) trains on samples
[(k-1)*B, k*B) (core/train/trainer.cpp), micro-batch by micro-batch in order.
"""

from __future__ import annotations

import array
import struct
import sys

from ptdp_tools import atomic

MASK64 = 0xFFFFFFFFFFFFFFFF
MAGIC = b"MMIDIDX\x00\x00"
# Megatron's DType codes and the array typecodes of the integer ones.
DTYPE_CODES = {1: "B", 2: "b", 3: "h", 4: "i", 5: "q", 8: "H"}


def mix64(z: int) -> int:
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return z ^ (z >> 31)


class SplitMix64:
    """core/data/samples.cpp's SplitMix64(a, b): next() and below(n) without modulo bias."""

    def __init__(self, a: int, b: int):
        self.state = mix64((a ^ mix64((b ^ 0xD1B54A32D192ED03) & MASK64)) & MASK64)

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        return mix64(self.state)

    def below(self, n: int) -> int:
        threshold = ((1 << 64) - n) % n
        while True:
            r = self.next()
            if r >= threshold:
                return r % n


def permutation(num_samples: int, seed: int, epoch: int) -> list:
    perm = list(range(num_samples))
    rng = SplitMix64(seed & MASK64, epoch & MASK64)
    for i in range(num_samples - 1, 0, -1):
        j = rng.below(i + 1)
        perm[i], perm[j] = perm[j], perm[i]
    return perm


class DatasetSamples:
    """Samples of a token stream in ptdp's order (DatasetSamples of samples.h)."""

    def __init__(self, tokens, seq_len: int, seed: int):
        if len(tokens) < seq_len + 1:
            raise ValueError(f"the dataset has {len(tokens)} tokens, needs at least s+1 = {seq_len + 1}")
        self.tokens, self.seq_len, self.seed = tokens, seq_len, seed
        self.num_samples = (len(tokens) - 1) // seq_len
        self._epoch, self._perm = -1, None

    def window_of(self, index: int) -> int:
        epoch = index // self.num_samples
        if epoch != self._epoch:
            self._perm, self._epoch = permutation(self.num_samples, self.seed, epoch), epoch
        return self._perm[index % self.num_samples]

    def get(self, index: int) -> list:
        """The seq_len + 1 tokens of sample `index` (inputs: the first s; targets: the last s)."""
        j = self.window_of(index) * self.seq_len
        return list(self.tokens[j:j + self.seq_len + 1])


class SyntheticSamples:
    """Uniform tokens in [0, vocab_size), a function of (seed, index) (SyntheticSamples of samples.h)."""

    def __init__(self, vocab_size: int, seq_len: int, seed: int):
        self.vocab_size, self.seq_len, self.seed = vocab_size, seq_len, seed

    def get(self, index: int) -> list:
        rng = SplitMix64((self.seed ^ 0x5EED5EED5EED5EED) & MASK64, index)
        return [rng.below(self.vocab_size) for _ in range(self.seq_len + 1)]


def dtype_code_for_vocab(vocab_size: int) -> int:
    """Megatron's DType.optimal_dtype: uint16 under 65500 tokens, else int32."""
    return 8 if vocab_size < 65500 else 4


def write_dataset(prefix: str, documents, vocab_size: int) -> None:
    """Writes PREFIX.bin and PREFIX.idx (one sequence per document), each atomically."""
    code = dtype_code_for_vocab(vocab_size)
    itemsize = array.array(DTYPE_CODES[code]).itemsize
    bin_data = array.array(DTYPE_CODES[code])
    lengths, pointers = array.array("i"), array.array("q")
    for doc in documents:
        pointers.append(len(bin_data) * itemsize)
        lengths.append(len(doc))
        bin_data.extend(doc)
    docs = array.array("q", range(len(lengths) + 1))
    if sys.byteorder != "little":
        for a in (bin_data, lengths, pointers, docs):
            a.byteswap()
    idx = MAGIC + struct.pack("<QBQQ", 1, code, len(lengths), len(docs))
    idx += lengths.tobytes() + pointers.tobytes() + docs.tobytes()
    atomic.write(prefix + ".bin", bin_data.tobytes())
    atomic.write(prefix + ".idx", idx)


def read_dataset_tokens(prefix: str) -> array.array:
    """All tokens of PREFIX.bin, sequences concatenated in order (checks the index lightly)."""
    with open(prefix + ".idx", "rb") as f:
        idx = f.read()
    if idx[:9] != MAGIC:
        raise ValueError(f"{prefix}.idx: bad magic (not a Megatron MMIDIDX index)")
    version, code, seqs, _docs = struct.unpack_from("<QBQQ", idx, 9)
    if version != 1 or code not in DTYPE_CODES:
        raise ValueError(f"{prefix}.idx: version {version} / dtype code {code} not supported")
    lengths = array.array("i")
    lengths.frombytes(idx[34:34 + 4 * seqs])
    if sys.byteorder != "little":
        lengths.byteswap()
    tokens = array.array(DTYPE_CODES[code])
    with open(prefix + ".bin", "rb") as f:
        tokens.frombytes(f.read())
    if sys.byteorder != "little":
        tokens.byteswap()
    if sum(lengths) != len(tokens):
        raise ValueError(f"{prefix}: the index describes {sum(lengths)} tokens, the .bin holds {len(tokens)}")
    return tokens


def phrase_documents(vocab_size: int, num_tokens: int, seed: int) -> list:
    """Documents made of a few dozen random 'phrases' repeated in random order: a learnable
    stream, so that the loss falls over a few steps. Deterministic in (vocab_size, num_tokens, seed)."""
    import random

    rng = random.Random(seed)
    phrases = [[rng.randrange(vocab_size) for _ in range(rng.randint(3, 12))] for _ in range(48)]
    docs, total = [], 0
    while total < num_tokens:
        doc = []
        for _ in range(rng.randint(4, 40)):
            doc.extend(rng.choice(phrases))
        doc = doc[:num_tokens - total]
        docs.append(doc)
        total += len(doc)
    return docs
