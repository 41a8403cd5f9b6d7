"""The whole model's weights from every shard of a save (reader.read_all_shards): tensor-parallel
slices joined, pipeline stages and interleaved chunks placed by name, and with --zero each
data-parallel rank's pieces of the master weights put back where the run took them from
(core/parallel/grad_sync.cpp for --zero 1, sharded_params.cpp for --zero 3). Needs numpy."""

from __future__ import annotations

from ptdp_tools.checkpoint import layout
from ptdp_tools.checkpoint.reader import CheckpointError, Shard, describe_sharding


def chunk_range(n: int, size: int, rank: int) -> tuple:
    """core/comm/communicator.cpp chunk_range: rank's [begin, end) of n split over size ranks."""
    base, extra = divmod(n, size)
    begin = rank * base + min(rank, extra)
    return begin, begin + base + (1 if rank < extra else 0)


def bucket_pieces(total: int, bucket: int, dp: int, rank: int) -> list:
    """--zero 1: the [begin, end) pieces of a chunk's buffer that data-parallel rank `rank` owns, in
    ascending order: its chunk_range of every gradient bucket, the buckets cut from the end."""
    buckets, end = [], total
    while end > 0:
        buckets.append((max(0, end - bucket), end))
        end -= bucket
    pieces = []
    for b, e in reversed(buckets):
        lo, hi = chunk_range(e - b, dp, rank)
        if hi > lo:
            pieces.append((b + lo, b + hi))
    return pieces


def unit_pieces(entries: list, layers: int, dp: int, rank: int) -> list:
    """--zero 3 (whole model): rank's chunk_range of every unit (the embeddings, each layer, the
    final norm), as core/model/params.cpp param_units cuts them."""
    starts = {e.name: e.offset for e in entries}
    bounds = [0] + [starts[f"layers.{i}.ln1.weight"] for i in range(layers)] + [starts["lnf.weight"]]
    bounds.append(layout.layout_numel(entries))
    pieces = []
    for b, e in zip(bounds, bounds[1:]):
        lo, hi = chunk_range(e - b, dp, rank)
        if hi > lo:
            pieces.append((b + lo, b + hi))
    return pieces


def _chunk_layers(shard: Shard, chunks: int) -> list:
    """The [begin, end) layers of each chunk of the shard: recorded (chunk_layers), or for older
    shards the even split (chunk j of stage r: layers j*L/v + r*L/(p*v) ...)."""
    text = shard.settings.get("chunk_layers")
    if text:
        return [tuple(int(x) for x in part.split("-")) for part in text.split(",")]
    L, p, v = shard.layers, shard.pp, chunks
    per_stage = L // p if L % p == 0 else 0
    even = L % (p * v) == 0 and all(n in (0, per_stage) for n in (shard.first_stage_layers, shard.last_stage_layers))
    if p * v > 1 and (not even or shard.settings.get("pipeline_model_parallel_layout", "none") != "none"):
        raise CheckpointError(f"{shard.path} does not record which layers its chunks hold, and its stages are not an "
                              "even split: save it again with this ptdp (train --load, then --save)")
    n = L // (p * v)
    return [(j * (L // v) + shard.pp_rank * n, j * (L // v) + shard.pp_rank * n + n) for j in range(chunks)]


def _divisible_by(shard: Shard, given: int | None) -> int:
    saved = shard.settings.get("make_vocab_size_divisible_by")
    if saved is not None and given is not None and int(saved) != given:
        raise CheckpointError(f"--make-vocab-size-divisible-by {given}: {shard.path} was saved with "
                              f"--make-vocab-size-divisible-by {saved}")
    return int(saved) if saved is not None else (given or 128)


def _chunk_flat(np, ranks: list, j: int, entries: list, shard: Shard):
    """Chunk j's whole flat buffer (f32) from the shards of one (tensor, pipeline) rank: one file,
    or with --zero one per data-parallel rank, each holding its pieces one after the other."""
    total = layout.layout_numel(entries)
    if not shard.zero:
        if ranks[0].chunks[j].numel != total:
            return None
        return np.frombuffer(ranks[0].chunks[j].params, dtype="<f4")
    flat = np.zeros(total, dtype="<f4")
    bucket = int(shard.settings.get("grad_bucket_size", 0) or 0)
    for r, s in enumerate(ranks):
        pieces = (unit_pieces(entries, shard.layers, shard.dp, r) if shard.zero == 3
                  else bucket_pieces(total, bucket, shard.dp, r) if shard.dp > 1 else [(0, total)])
        data = np.frombuffer(s.chunks[j].params, dtype="<f4")
        if sum(e - b for b, e in pieces) != len(data):
            return None
        at = 0
        for b, e in pieces:
            flat[b:e] = data[at:at + e - b]
            at += e - b
    return flat


def gather(np, shards: list, divisible_by: int | None = None) -> dict:
    """name -> f32 array of the whole tensor (the vocabulary padded for the save's t), from every
    shard of a save, ordered as read_all_shards orders them."""
    first = shards[0]
    if first.arch is None:
        raise CheckpointError(f"{first.path} has format version {first.version}, which does not record the "
                              "architecture (version 4 on)")
    if any(c.param_bytes != 4 for s in shards for c in s.chunks):
        raise CheckpointError(f"{first.path}: format version {first.version} holds 16-bit weights only; "
                              "export needs the f32 master weights (version 2 on)")
    if first.zero == 1 and first.dp > 1 and not first.settings.get("grad_bucket_size"):
        raise CheckpointError(f"{first.path}: a --zero 1 shard of format version {first.version} does not record "
                              "--grad-bucket-size (version 9 does)")
    div = _divisible_by(first, divisible_by)
    per_rank = len(shards) // (first.tp * first.pp)
    out = {}
    for i in range(0, len(shards), per_rank):
        ranks = shards[i:i + per_rank]
        s = ranks[0]
        ranges = _chunk_layers(s, len(s.chunks))
        for j, (begin, end) in enumerate(ranges):
            entries = layout.param_layout(
                s.layers, s.hidden, s.seq_length, s.vocab_size, div, s.arch, s.ffn_hidden, s.heads, s.query_groups,
                tp=s.tp, tp_rank=s.tp_rank, layer_range=(begin, end), pre=s.pp_rank == 0 and j == 0,
                post=s.pp_rank == s.pp - 1 and j == len(ranges) - 1)
            flat = _chunk_flat(np, ranks, j, entries, s)
            if flat is None:
                held = sum(r.chunks[j].numel for r in ranks)
                raise CheckpointError(
                    f"{s.path} chunk {j} holds {held} parameters, the {s.arch} layout of layers {begin}-{end - 1} "
                    f"at t={s.tp} {layout.layout_numel(entries)} with --make-vocab-size-divisible-by {div} "
                    f"(vocabulary {s.vocab_size} padded to {layout.padded_vocab(s.vocab_size, s.tp, div)}): give "
                    "the run's --make-vocab-size-divisible-by")
            for e in entries:
                if e.shared_copy:
                    continue
                part = flat[e.offset:e.offset + e.numel].reshape(e.shape)
                whole = out.setdefault(e.name, np.zeros(e.full_shape, dtype="<f4"))
                if e.split_dim == 0:
                    whole[e.split_offset:e.split_offset + e.shape[0]] = part
                elif e.split_dim == 1:
                    whole[:, e.split_offset:e.split_offset + e.shape[1]] = part
                else:
                    whole[...] = part
    want = layout.param_layout(first.layers, first.hidden, first.seq_length, first.vocab_size, div, first.arch,
                               first.ffn_hidden, first.heads, first.query_groups)
    missing = [e.name for e in want if e.name not in out]
    if missing:
        raise CheckpointError(f"{first.path}: the shards of the save ({describe_sharding(first)}) hold no "
                              f"{', '.join(missing[:3])}")
    return out
