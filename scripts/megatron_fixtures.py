#!/usr/bin/env python3
"""Fixtures for ptdp's reproduction of Megatron-core's sample order (core/data/).

  megatron_fixtures.py numpy    OUT_DIR   needs numpy: numpy_random.txt, the values of the
                                          legacy numpy.random.RandomState that
                                          core/data/numpy_random_test.cpp compares against.
  megatron_fixtures.py megatron OUT_DIR   needs megatron-core (and torch, numpy): small
                                          .bin/.idx datasets, then GPTDataset and
                                          BlendedDataset indices built by Megatron-core's own
                                          code (BlendedMegatronDatasetBuilder), dumped as text
                                          for core/data/megatron_order_test.cpp, with the MD5
                                          of each dataset's description (its cache file names)
                                          and one case's cache folder as Megatron wrote it.

Setup used for the committed fixtures (PyPI only; torch is imported by megatron-core, CPU
use suffices):
  python3.11 -m venv /tmp/mcore-venv
  /tmp/mcore-venv/bin/pip install numpy megatron-core==0.16.1 torch
  /tmp/mcore-venv/bin/python scripts/megatron_fixtures.py numpy core/data/testdata/megatron
  /tmp/mcore-venv/bin/python scripts/megatron_fixtures.py megatron core/data/testdata/megatron

Where the installed torch is too old for megatron/core/__init__.py (its model code), only
megatron.core.datasets is imported (import_megatron_datasets): the index code needs none of it.

Fixture text format: one record a line, "NAME v0 v1 ...", integers or floats (repr) in
decimal; lines starting with '#' are comments (provenance). The committed outputs live in
core/data/testdata/megatron/.
"""
import os
import signal
import sys


def write_records(path, header, records):
    with open(path, "w") as f:
        for line in header:
            f.write("# " + line + "\n")
        for name, values in records:
            f.write(name + " " + " ".join(str(v) for v in values) + "\n")


def numpy_fixtures(out):
    import numpy as np

    recs = []
    for seed in (0, 1, 1234, 2**32 - 1):
        rs = np.random.RandomState(seed)
        # randint(0, 2^32, uint32) over the full range is the raw 32-bit output.
        recs.append((f"uint32.seed{seed}", rs.randint(0, 2**32, size=1300, dtype=np.uint64).tolist()))
    for seed in (0, 1234, 7):
        for n in (0, 1, 2, 3, 10, 17, 1000, 65537):
            p = np.random.RandomState(seed).permutation(n).tolist()
            if n > 2000:
                p = p[:500] + p[-500:]
            recs.append((f"permutation.seed{seed}.n{n}", p))
    # Two shuffles from one state (the state carries over), on int32 and uint32 arrays, as
    # Megatron's document and shuffle indices are built.
    rs = np.random.RandomState(1234)
    a = np.arange(100, dtype=np.int32)
    rs.shuffle(a)
    b = np.arange(37, 137, dtype=np.uint32)
    rs.shuffle(b)
    recs.append(("shuffle_twice.seed1234.first", a.tolist()))
    recs.append(("shuffle_twice.seed1234.second", b.tolist()))
    # The 64-bit path of the masked bounded draw (a range above 2^32): legacy randint uses the
    # same masked rejection on next_uint64 as random_interval.
    for hi in (2**32 + 1, 2**40, 3 * 2**33 + 5):
        rs = np.random.RandomState(42)
        recs.append((f"randint64.seed42.max{hi - 1}", rs.randint(0, hi, size=200, dtype=np.uint64).tolist()))
    # numpy.sum of a float64 vector (pairwise summation) and Megatron's normalize (w / sum(w)),
    # used for the split and blend weights.
    gen = np.random.RandomState(99)
    for n in list(range(1, 20)) + [31, 64, 127, 128, 129, 200, 300]:
        w = (gen.random_sample(n) * 10.0 ** gen.randint(-3, 4, size=n)).tolist()
        recs.append((f"sum.n{n}.in", [repr(v) for v in w]))
        recs.append((f"sum.n{n}.out", [repr(float(np.sum(np.array(w, dtype=np.float64))))]))
        recs.append((f"normalize.n{n}.out", [repr(v) for v in (np.array(w) / np.sum(np.array(w))).tolist()]))
    write_records(os.path.join(out, "numpy_random.txt"),
                  [f"made by scripts/megatron_fixtures.py numpy with numpy {np.__version__}"], recs)


# The datasets: (name, numpy token dtype, number of sequences, min length, max length, rng seed).
DATASETS = [
    ("mega_a", "uint16", 600, 1, 60, 11),
    ("mega_b", "int32", 80, 5, 200, 12),
    ("mega_c", "uint16", 50, 20, 40, 13),
]

# The builds: (case name, blend as Megatron's --data-path list, split, seq_len, seed,
# [train, valid, test] samples, samples whose tokens are dumped).
CASES = [
    # 1116 samples an epoch: 2007 leaves the final epoch 891 < int(0.8 * 1116) = 892 samples
    # (shuffled apart), 2008 leaves it 892 (shuffled with the others).
    ("single_separate", ["mega_a"], "949,50,1", 16, 1234, [2007, 40, 3], 40),
    ("single_joined", ["mega_a"], "949,50,1", 16, 7, [2008, 200, 5], 40),
    ("single_long", ["mega_b"], "100,0,0", 64, 0, [300, 0, 0], 20),
    ("blend3", ["0.3", "mega_a", "0.5", "mega_b", "0.2", "mega_c"], "98,2,0", 16, 1234, [700, 30, 0], 60),
    ("blend2", ["1", "mega_a", "3", "mega_b", "0.025", "mega_c"], "90,10,0", 8, 99, [400, 50, 0], 40),
    ("blend_by_size", ["mega_a", "mega_c"], "90,10,0", 16, 5, [900, 40, 0], 30),
    # 0.25 * 50 sequences = 12.5: Python's round() goes to the even 12.
    ("split_tie", ["mega_c"], "1,3", 16, 1, [30, 60, 0], 10),
    # The valid split keeping its last partial sequence (padded): helpers.cpp's other branch.
    ("valid_partial", ["mega_c"], "60,40,0", 16, 3, [50, 200, 0], 1000),
]
# Config fields a case sets beyond the defaults.
CASE_CONFIG = {"valid_partial": {"drop_last_partial_validation_sequence": False}}


class FixtureTokenizer:
    """The least GPTDatasetConfig needs of a tokenizer (no token is special here)."""

    def __init__(self):
        from collections import OrderedDict

        self.unique_identifiers = OrderedDict([("class", "FixtureTokenizer")])
        self.vocab_size = 70000
        self.eod = 0

    @property
    def pad(self):
        raise NotImplementedError


def write_datasets(out):
    import numpy as np
    import torch
    from megatron.core.datasets.indexed_dataset import IndexedDatasetBuilder

    for name, dtype, count, lo, hi, seed in DATASETS:
        rs = np.random.RandomState(seed)
        prefix = os.path.join(out, name)
        builder = IndexedDatasetBuilder(prefix + ".bin", dtype=getattr(np, dtype))
        top = 65535 if dtype == "uint16" else 100000
        for _ in range(count):
            length = int(rs.randint(lo, hi + 1))
            builder.add_document(torch.from_numpy(rs.randint(1, top, size=length).astype(np.int64)), [length])
        builder.finalize(prefix + ".idx")


def import_megatron_datasets():
    """megatron.core, or where its __init__ fails on this torch, a stand-in package holding only
    what megatron.core.datasets imports (log_single_rank and the tokenizer base class)."""
    try:
        import megatron.core  # noqa: F401
        return
    except Exception:
        pass
    import importlib.util
    import logging  # noqa: F401
    import types

    import torch

    for name in [m for m in sys.modules if m == "megatron" or m.startswith("megatron.")]:
        del sys.modules[name]
    root = importlib.util.find_spec("megatron").submodule_search_locations[0]
    pkg, core = types.ModuleType("megatron"), types.ModuleType("megatron.core")
    pkg.__path__, core.__path__ = [root], [os.path.join(root, "core")]
    from importlib.metadata import version

    core.__version__ = version("megatron-core")
    pkg.core = core
    utils, tokenizers = types.ModuleType("megatron.core.utils"), types.ModuleType("megatron.core.tokenizers")

    def log_single_rank(logger, *args, rank=0, **kwargs):
        if not torch.distributed.is_initialized() or torch.distributed.get_rank() == rank:
            logger.log(*args, **kwargs)

    utils.log_single_rank = log_single_rank
    tokenizers.MegatronTokenizerBase = type("MegatronTokenizerBase", (), {})
    sys.modules.update({"megatron": pkg, "megatron.core": core, "megatron.core.utils": utils,
                        "megatron.core.tokenizers": tokenizers})


def megatron_fixtures(out):
    import shutil
    import tempfile

    import_megatron_datasets()
    import megatron.core
    import numpy as np
    from megatron.core.datasets.blended_megatron_dataset_builder import BlendedMegatronDatasetBuilder
    from megatron.core.datasets.gpt_dataset import GPTDataset, GPTDatasetConfig
    from megatron.core.datasets.utils import get_blend_from_list

    write_datasets(out)
    work = tempfile.mkdtemp(prefix="megatron-fixtures-")
    out = os.path.abspath(out)
    home = os.getcwd()
    # Datasets by relative prefix ("mega_a"), as a user's --data-path may name them: the
    # descriptions (and so the cache names) then hold no temporary path.
    os.chdir(work)
    import torch

    # BlendedDataset asks for the rank when it caches: a one-process group.
    torch.distributed.init_process_group("gloo", init_method="file://" + os.path.join(work, "pg"), rank=0,
                                         world_size=1)
    try:
        for case, blend, split, seq_len, seed, sizes, n_tokens in CASES:
            # Megatron-core loops forever on a split that holds no tokens (_get_num_epochs): a
            # case must give every split it builds some sequences.
            signal.alarm(300)
            blend_list = list(blend)
            for name, *_ in DATASETS:
                for ext in (".bin", ".idx"):
                    if not os.path.exists(os.path.join(work, name + ext)):
                        shutil.copy(os.path.join(out, name + ext), os.path.join(work, name + ext))
            cache = "cache-" + case
            config = GPTDatasetConfig(
                random_seed=seed,
                sequence_length=seq_len,
                blend=get_blend_from_list(blend_list),
                split=split,
                path_to_cache=cache,
                tokenizer=FixtureTokenizer(),
                reset_position_ids=False,
                reset_attention_mask=False,
                eod_mask_loss=False,
                mmap_bin_files=True,
                **CASE_CONFIG.get(case, {}),
            )
            built = BlendedMegatronDatasetBuilder(GPTDataset, sizes, lambda: True, config).build()
            recs = [("blend", blend), ("split", [split]), ("seq_len", [seq_len]), ("seed", [seed]),
                    ("sizes", sizes),
                    ("drop_last_partial_validation_sequence",
                     [int(config.drop_last_partial_validation_sequence)])]
            for split_name, ds in zip(("train", "valid", "test"), built):
                if ds is None:
                    recs.append((f"{split_name}.built", [0]))
                    continue
                recs.append((f"{split_name}.built", [1]))
                if isinstance(ds, GPTDataset):
                    gpts, tag = [ds], f"{split_name}"
                    texts = [ds._query_document_sample_shuffle_indices(i)[0] for i in range(min(n_tokens, len(ds)))]
                else:
                    gpts, tag = ds.datasets, f"{split_name}"
                    recs.append((f"{tag}.blend.weights", [repr(w) for w in ds.weights]))
                    recs.append((f"{tag}.blend.size", [ds.size]))
                    recs.append((f"{tag}.blend.description_md5", [ds.unique_description_hash]))
                    recs.append((f"{tag}.blend.dataset_index", ds.dataset_index.tolist()))
                    recs.append((f"{tag}.blend.dataset_sample_index", ds.dataset_sample_index.tolist()))
                    texts = []
                    for i in range(min(n_tokens, len(ds))):
                        d, j = int(ds.dataset_index[i]), int(ds.dataset_sample_index[i])
                        texts.append(ds.datasets[d]._query_document_sample_shuffle_indices(j)[0])
                for k, g in enumerate(gpts):
                    t = f"{tag}.gpt{k}"
                    recs.append((f"{t}.prefix", [os.path.basename(g.dataset.path_prefix)]))
                    recs.append((f"{t}.indices", [int(g.indices[0]), int(g.indices[-1]) + 1]))
                    recs.append((f"{t}.num_samples", [g.num_samples]))
                    recs.append((f"{t}.description_md5", [g.unique_description_hash]))
                    recs.append((f"{t}.document_index", g.document_index.tolist()))
                    recs.append((f"{t}.sample_index.dtype", [g.sample_index.dtype.name]))
                    recs.append((f"{t}.sample_index", g.sample_index.reshape(-1).tolist()))
                    recs.append((f"{t}.shuffle_index.dtype", [g.shuffle_index.dtype.name]))
                    recs.append((f"{t}.shuffle_index", g.shuffle_index.tolist()))
                for i, text in enumerate(texts):
                    recs.append((f"{tag}.tokens.{i}", np.asarray(text).tolist()))
            write_records(os.path.join(out, f"megatron_{case}.txt"),
                          [f"made by scripts/megatron_fixtures.py megatron with megatron-core "
                           f"{megatron.core.__version__}, numpy {np.__version__}"], recs)
            if case == "single_separate":  # Megatron's own cache folder: its train split's files
                os.makedirs(os.path.join(out, "cache"), exist_ok=True)
                for f in sorted(os.listdir(cache)):
                    if "-GPTDataset-train-" in f:
                        shutil.copy(os.path.join(cache, f), os.path.join(out, "cache", f))
        signal.alarm(0)
    finally:
        os.chdir(home)
        shutil.rmtree(work)


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("numpy", "megatron"):
        sys.exit(__doc__)
    os.makedirs(sys.argv[2], exist_ok=True)
    if sys.argv[1] == "numpy":
        numpy_fixtures(sys.argv[2])
    else:
        megatron_fixtures(sys.argv[2])


if __name__ == "__main__":
    main()
