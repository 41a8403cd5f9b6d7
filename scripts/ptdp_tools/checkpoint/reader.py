"""Reader of ptdp checkpoint shards: the one place that knows the shard format, documented in
docs/PYTORCH.md ("Checkpoint shard format") and written by core/train/checkpoint.cpp.

Standard library only (no numpy, no torch). What a shard's flat parameters are: layout.py.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass, field

MAGIC = b"PTDPCKPT"
VERSIONS = (1, 2, 3, 4, 5, 6, 7, 8, 9)
ARCHS = {0: "gpt", 1: "llama"}  # the header's arch code (version 4)
SHARD_FILE = "model_optim_rng.bin"
LATEST_FILE = "latest_checkpointed_iteration.txt"

# struct Header of checkpoint.cpp, little-endian with the C++ struct's natural alignment:
# magic[8] u32 version | i32 tp pp vpp tp_rank pp_rank layers hidden heads seq_length |
# i64 vocab_size | u64 seed | i64 global_batch | i64 iteration | f64 loss_scale | i32 chunks |
# version 2 on: i32 scale_growth, scale_hysteresis (the loss scaler's trackers) |
# version 3 on: i32 zero, dp, dp_rank (sharded optimizer state: one file per data-parallel rank,
# zero_dp_rank_DDD.bin, holding that rank's pieces) |
# version 4 on: i32 arch (0 gpt, 1 llama), ffn_hidden (the MLP hidden size; llama: per gate and up) |
# version 5 on: i64 bucket_elems (--grad-bucket-size under --zero 1, else 0), u64 save_id |
# version 6 on: i32 query_groups (key/value heads; = heads without grouped-query attention), i32 0 |
# version 7 on: f64 norm_eps (--norm-epsilon), f64 rope_theta (the rotary base) |
# version 8 on: i32 first_stage_layers, last_stage_layers (layers of pipeline stage 0 and p-1) | padding to 8
_HEADERS = {1: struct.Struct("<8sI9iqQqqdi4x"), 2: struct.Struct("<8sI9iqQqqdiii4x"),
            3: struct.Struct("<8sI9iqQqqdiiiiii"), 4: struct.Struct("<8sI9iqQqqdiiiiiiii"),
            5: struct.Struct("<8sI9iqQqqdiiiiiiiiqQ"), 6: struct.Struct("<8sI9iqQqqdiiiiiiiiqQii"),
            7: struct.Struct("<8sI9iqQqqdiiiiiiiiqQiidd"), 8: struct.Struct("<8sI9iqQqqdiiiiiiiiqQiiddii")}
assert tuple(_HEADERS[v].size for v in VERSIONS[:8]) == (96, 104, 112, 120, 136, 144, 160, 168)
# Version 9 on: magic[8] u32 version | u32 n | n bytes of "name=value" lines: the shard's state
# (iteration, chunks, loss_scale, scale_growth, scale_hysteresis, save_id in hex), then every
# setting the run records (core/config's tables: results/fields.json's fields, by name; and
# stage_layers, tp_rank, pp_rank, dp_rank), so that a newly recorded setting needs no new version.
_NAMED = 9


class CheckpointError(Exception):
    """A shard that is missing, malformed, corrupt or not what the caller expected."""


@dataclass
class Chunk:
    """One model chunk of a shard: its flat parameters and AdamW state, as memoryviews."""

    numel: int
    step: int  # AdamW steps taken
    params: memoryview  # format 'f' (f32) or 'H' (16-bit raw values, bf16/f16 builds)
    exp_avg: memoryview
    exp_avg_sq: memoryview
    param_bytes: int = 4  # bytes per stored parameter


@dataclass
class Shard:
    path: str
    tp: int
    pp: int
    vpp: int
    tp_rank: int
    pp_rank: int
    layers: int
    hidden: int
    heads: int
    seq_length: int
    vocab_size: int
    seed: int
    global_batch: int
    iteration: int
    loss_scale: float
    version: int = 2
    scale_growth: int = 0
    scale_hysteresis: int = 0
    zero: int = 0
    dp: int = 1
    dp_rank: int = 0
    arch: str | None = None  # "gpt" or "llama", recorded from version 4 on; None before (not recorded)
    ffn_hidden: int = 0  # the MLP hidden size, recorded from version 4 on; 0 before
    query_groups: int = 0  # key/value heads, recorded from version 6 on; 0 before (= heads: no GQA then)
    norm_eps: float | None = None  # LayerNorm / RMSNorm epsilon, recorded from version 7 on; None before
    rope_theta: float | None = None  # the rotary base, recorded from version 7 on; None before
    # layers of the first and last pipeline stage, recorded from version 8 on; 0 before (an even split)
    first_stage_layers: int = 0
    last_stage_layers: int = 0
    chunks: list = field(default_factory=list)
    settings: dict = field(default_factory=dict)  # version 9 on: every recorded setting, by name, as text
    save_id: int | None = None  # the save this shard belongs to, recorded from version 5 on; None before


def fnv1a64(data: bytes) -> int:
    h = 0xCBF29CE484222325
    for c in data:
        h = ((h ^ c) * 0x100000001B3) & 0xFFFFFFFFFFFFFFFF
    return h


def shard_dir(directory: str, iteration: int, tp_rank: int = 0, pp_rank: int = 0, pp: int = 1) -> str:
    rank = f"mp_rank_{tp_rank:02d}_{pp_rank:03d}" if pp > 1 else f"mp_rank_{tp_rank:02d}"
    return os.path.join(directory, f"iter_{iteration:07d}", rank)


def read_latest(directory: str) -> int:
    path = os.path.join(directory, LATEST_FILE)
    try:
        with open(path) as f:
            text = f.readline().strip()
    except OSError as e:
        raise CheckpointError(f"{directory}: no checkpoint there ({path}: {e.strerror})") from None
    if not text.isdigit():
        raise CheckpointError(f"{path} does not hold an iteration number ({text!r})")
    return int(text)


def read_shard(path: str, verify: bool = True) -> Shard:
    """Reads one shard file. verify: check the FNV-1a checksum (pure Python: about 1 s per 5 MB)."""
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({e.strerror})") from None
    if len(data) < 12 or bytes(data[:8]) != MAGIC:
        raise CheckpointError(f"{path} is not a ptdp checkpoint (magic {bytes(data[:8])!r})")
    (version,) = struct.unpack_from("<I", data, 8)
    if version not in VERSIONS:
        raise CheckpointError(f"{path} has version {version}, this reader knows {', '.join(map(str, VERSIONS))}")
    if version >= _NAMED:
        return _read_named(path, data, version, verify)
    header = _HEADERS[version]
    if len(data) < header.size + 8:
        raise CheckpointError(f"{path} is truncated ({len(data)} bytes)")
    fields = header.unpack_from(data, 0)
    (_, _, tp, pp, vpp, tp_rank, pp_rank, layers, hidden, heads, seq_length, vocab_size, seed, global_batch,
     iteration, loss_scale, nchunks) = fields[:17]
    body_end = len(data) - 8
    if verify:
        (stored,) = struct.unpack_from("<Q", data, body_end)
        if fnv1a64(bytes(data[:body_end])) != stored:
            raise CheckpointError(f"{path} is corrupt or truncated (checksum mismatch)")
    extra = list(fields[17:22])
    arch, ffn_hidden = None, 0
    if version >= 4:
        code, ffn_hidden = fields[22], fields[23]
        if code not in ARCHS:
            raise CheckpointError(f"{path} has an unknown architecture code {code}")
        arch = ARCHS[code]
    query_groups = fields[26] if version >= 6 else 0
    norm_eps, rope_theta = (fields[28], fields[29]) if version >= 7 else (None, None)
    first_stage_layers, last_stage_layers = (fields[30], fields[31]) if version >= 8 else (0, 0)
    if version >= 6 and (query_groups <= 0 or heads % query_groups):
        raise CheckpointError(f"{path} has {query_groups} query groups for {heads} heads")
    shard = Shard(path, tp, pp, vpp, tp_rank, pp_rank, layers, hidden, heads, seq_length, vocab_size, seed,
                  global_batch, iteration, loss_scale, version, *extra, arch=arch, ffn_hidden=ffn_hidden,
                  query_groups=query_groups, norm_eps=norm_eps, rope_theta=rope_theta,
                  first_stage_layers=first_stage_layers, last_stage_layers=last_stage_layers)
    if version >= 5:
        shard.save_id = fields[25]
    _read_chunks(path, data, header.size, nchunks, version, shard)
    return shard


def _read_chunks(path: str, data: bytearray, pos: int, nchunks: int, version: int, shard: Shard) -> None:
    """The chunks from byte `pos` up to the checksum, into shard.chunks."""
    body_end = len(data) - 8
    view = memoryview(data)
    for j in range(nchunks):
        if pos + 16 > body_end:
            raise CheckpointError(f"{path} is truncated in chunk {j}")
        numel, step = struct.unpack_from("<qq", data, pos)
        pos += 16
        # Version 2 stores the f32 master weights; version 1 the model's own (f32 on the CPU,
        # 2 bytes in bf16/f16 runs; with one chunk the size tells which). Adam moments: f32.
        remaining = body_end - pos
        pbytes = 4 if (version >= 2 or nchunks > 1 or remaining == 12 * numel) else (
            2 if remaining == 10 * numel else 4)
        need = numel * (pbytes + 8)
        if need > remaining:
            raise CheckpointError(f"{path}: chunk {j} needs {need} bytes, {remaining} left (truncated?)")
        p = view[pos:pos + numel * pbytes].cast("f" if pbytes == 4 else "H")
        pos += numel * pbytes
        m = view[pos:pos + 4 * numel].cast("f")
        pos += 4 * numel
        v = view[pos:pos + 4 * numel].cast("f")
        pos += 4 * numel
        shard.chunks.append(Chunk(numel, step, p, m, v, pbytes))
    if pos != body_end:
        raise CheckpointError(f"{path} has {body_end - pos} trailing bytes")


def _end_stage(text: str, first: bool) -> int:
    """The layers of the first (last) stage from stage_layers ("3 | 5", "2 | 3 x 4 | 2"); 0 if it
    does not say."""
    parts = [p.strip() for p in text.split("|")]
    part = parts[0] if first else parts[-1]
    return int(part) if part.isdigit() else 0


def _read_named(path: str, data: bytearray, version: int, verify: bool) -> Shard:
    """A shard of version 9 on: its named header, then the chunks."""
    if len(data) < 16 + 8:
        raise CheckpointError(f"{path} is truncated ({len(data)} bytes)")
    (size,) = struct.unpack_from("<I", data, 12)
    body_end = len(data) - 8
    if 16 + size > body_end:
        raise CheckpointError(f"{path} is truncated ({len(data)} bytes)")
    if verify:
        (stored,) = struct.unpack_from("<Q", data, body_end)
        if fnv1a64(bytes(data[:body_end])) != stored:
            raise CheckpointError(f"{path} is corrupt or truncated (checksum mismatch)")
    settings = {}
    for line in bytes(data[16:16 + size]).decode("utf-8").splitlines():
        name, eq, value = line.partition("=")
        if not eq or not name:
            raise CheckpointError(f"{path} has a malformed header line {line!r}")
        settings[name] = value

    def number(name: str, kind=int, default=None):
        if name not in settings:
            if default is None:
                raise CheckpointError(f"{path}: its header has no {name}")
            return default
        try:
            return kind(settings[name])
        except ValueError:
            raise CheckpointError(f"{path}: its header's {name} is {settings[name]!r}, not a number") from None

    heads, pp, layers = number("heads"), number("pp"), number("layers")
    query_groups = number("query_groups")
    if query_groups <= 0 or heads % query_groups:
        raise CheckpointError(f"{path} has {query_groups} query groups for {heads} heads")
    if settings.get("arch") not in ARCHS.values():
        raise CheckpointError(f"{path} has an unknown architecture {settings.get('arch')!r}")
    stages = settings.get("stage_layers", str(layers))
    shard = Shard(path, number("tp"), pp, number("vpp"), number("tp_rank"), number("pp_rank"), layers,
                  number("hidden"), heads, number("seq_length"), number("vocab_size"), number("seed"),
                  number("global_batch"), number("iteration"), number("loss_scale", float), version,
                  number("scale_growth"), number("scale_hysteresis"), number("zero"), number("dp", int, 1),
                  number("dp_rank", int, 0), arch=settings["arch"], ffn_hidden=number("ffn_hidden_size"),
                  query_groups=query_groups, norm_eps=number("norm_eps", float),
                  rope_theta=number("rope_theta", float), first_stage_layers=_end_stage(stages, True),
                  last_stage_layers=_end_stage(stages, False), settings=settings)
    try:
        shard.save_id = int(settings.get("save_id", ""), 16)
    except ValueError:
        raise CheckpointError(f"{path}: its header's save_id is {settings.get('save_id')!r}, not 16 hex digits") \
            from None
    _read_chunks(path, data, 16 + size, number("chunks"), version, shard)
    return shard


def read_checkpoint(directory: str, iteration: int | None = None, verify: bool = True) -> Shard:
    """The single shard of a t=1, p=1 checkpoint without --zero (the latest iteration unless given),
    checked as read_all_shards checks a save."""
    shards = read_all_shards(directory, iteration, verify)
    shard = shards[0]
    if len(shards) != 1 or shard.zero or len(shard.chunks) != 1:
        raise CheckpointError(f"{shard.path}: saved sharded as {describe_sharding(shard)} with "
                              f"{len(shard.chunks)} chunk(s) per rank; only whole-model shards (t=1, p=1, --zero 0) "
                              "are read here (ptdp export-hf gathers the shards)")
    return shard

MANIFEST_FILE = "save_id.txt"


def _read_manifest(iter_dir: str):
    """The save id in iter_dir/save_id.txt, or None when the file is absent."""
    path = os.path.join(iter_dir, MANIFEST_FILE)
    try:
        with open(path) as f:
            text = f.readline().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise CheckpointError(f"{path}: cannot read ({e.strerror})") from None
    if len(text) != 16 or any(c not in "0123456789abcdefABCDEF" for c in text) or int(text, 16) == 0:
        raise CheckpointError(f"{path} does not hold a save id (16 hex digits): {text!r}")
    return int(text, 16)


def describe_sharding(shard: Shard) -> str:
    """"t=2 p=2 (--zero 1 on d=2)": how a save is sharded."""
    zero = f" (--zero {shard.zero} on d={shard.dp})" if shard.zero else ""
    return f"t={shard.tp} p={shard.pp}{zero}"


def _first_shard_file(iter_dir: str) -> str:
    """The file of tensor rank 0, pipeline rank 0 (and data-parallel rank 0 with --zero)."""
    for rank in ("mp_rank_00", "mp_rank_00_000"):
        for name in (SHARD_FILE, "zero_dp_rank_000.bin"):
            path = os.path.join(iter_dir, rank, name)
            if os.path.exists(path):
                return path
    raise CheckpointError(f"{iter_dir}: no shard of tensor and pipeline rank 0 there (mp_rank_00/ or "
                          f"mp_rank_00_000/ with {SHARD_FILE} or zero_dp_rank_000.bin)")


def read_all_shards(directory: str, iteration: int | None = None, verify: bool = True) -> list:
    """Every shard of one save (the latest iteration unless given): t x p of them, x d with --zero,
    ordered by tensor rank, then pipeline rank, then data-parallel rank. Refused (CheckpointError
    naming the file): a missing shard (naming how the save is sharded), a shard of another rank or
    iteration, and a shard whose save id is not the one in the iteration's save_id.txt (a shard of
    another run, or a stale one left in the directory: `ptdp train --load` refuses it too)."""
    it = read_latest(directory) if iteration is None else iteration
    iter_dir = os.path.join(directory, f"iter_{it:07d}")
    if not os.path.isdir(iter_dir):
        raise CheckpointError(f"{directory}: no iteration {it} there ({iter_dir} is missing)")
    first = read_shard(_first_shard_file(iter_dir), verify)
    manifest = _read_manifest(iter_dir)
    if first.save_id is not None and manifest is None:
        raise CheckpointError(f"{os.path.join(iter_dir, MANIFEST_FILE)} is missing: iteration {it} was not saved "
                              "whole (or by an older ptdp)")
    shards = []
    for tp_rank in range(first.tp):
        for pp_rank in range(first.pp):
            rank_dir = shard_dir(directory, it, tp_rank, pp_rank, first.pp)
            names = [f"zero_dp_rank_{r:03d}.bin" for r in range(first.dp)] if first.zero else [SHARD_FILE]
            for dp_rank, name in enumerate(names):
                path = os.path.join(rank_dir, name)
                if not os.path.exists(path):
                    raise CheckpointError(f"{path} is missing: the save is sharded as {describe_sharding(first)} "
                                          f"and needs every shard")
                shard = first if path == first.path else read_shard(path, verify)
                got = (shard.tp_rank, shard.pp_rank, shard.dp_rank if first.zero else 0, shard.iteration)
                if got != (tp_rank, pp_rank, dp_rank, it) or (shard.tp, shard.pp, shard.zero) != (
                        first.tp, first.pp, first.zero):
                    raise CheckpointError(f"{path} holds tensor rank {got[0]}, pipeline rank {got[1]}, data-parallel "
                                          f"rank {got[2]} of iteration {got[3]} ({describe_sharding(shard)}), not "
                                          f"rank {tp_rank}, {pp_rank}, {dp_rank} of iteration {it}")
                if shard.save_id is not None and shard.save_id != manifest:
                    raise CheckpointError(f"{path} belongs to save {shard.save_id:016x}, not to save "
                                          f"{manifest:016x} that {os.path.join(iter_dir, MANIFEST_FILE)} names: a "
                                          "shard of another run or a stale one left in the directory (a checkpoint "
                                          "is exported whole or not at all)")
                shards.append(shard)
    return shards
