"""ctest Scripts.TheCheckpointReaderReadsWhatPtdpSaves: the reader reads what `ptdp train --save`
writes (the ptdp binary named by $PTDP, else build/ptdp): every header field, one chunk of exactly
the parameter layout's size (GPT, LLaMA, grouped-query attention), and it refuses a damaged shard, a
checkpoint of t = 2 (read_checkpoint reads whole-model saves) and a missing one in one message naming
the file.

    PTDP=build/ptdp python3 -m unittest ptdp_tools.checkpoint.reader_test     (in scripts/)
"""

import os
import shutil
import subprocess
import tempfile
import unittest

from ptdp_tools import repo
from ptdp_tools.checkpoint import layout, reader

TINY = {"layers": 4, "hidden": 64, "heads": 4, "seq_length": 32, "vocab_size": 256}


class CheckpointReader(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.ptdp = os.environ.get("PTDP") or os.path.join(repo.ROOT, "build", "ptdp")
        if not os.access(cls.ptdp, os.X_OK):
            raise AssertionError(f"{cls.ptdp}: no ptdp program there (PTDP=BUILD/ptdp names one)")
        cls.work = tempfile.mkdtemp(prefix="ptdp_reader_test_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def save(self, name, *flags):
        """A checkpoint of 2 iterations of tiny with FLAGS; its --save directory."""
        d = os.path.join(self.work, name)
        r = subprocess.run([self.ptdp, "train", "--model", "tiny", "--iters", "2", "--warmup", "0", "--seed", "7",
                            *flags, "--save", d], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return d

    def check_whole_model(self, shard, arch, query_groups, ffn_hidden):
        self.assertEqual(shard.version, max(reader.VERSIONS))
        self.assertEqual({k: getattr(shard, k) for k in TINY}, TINY)
        self.assertEqual((shard.tp, shard.pp, shard.vpp, shard.tp_rank, shard.pp_rank), (1, 1, 1, 0, 0))
        self.assertEqual((shard.iteration, shard.seed, shard.arch), (2, 7, arch))
        self.assertEqual((shard.query_groups, shard.ffn_hidden), (query_groups, ffn_hidden))
        self.assertEqual((shard.norm_eps, shard.rope_theta), (1e-5, 10000.0))
        self.assertEqual(len(shard.chunks), 1)
        chunk = shard.chunks[0]
        entries = layout.param_layout(shard.layers, shard.hidden, shard.seq_length, shard.vocab_size, arch=arch,
                                      ffn_hidden=shard.ffn_hidden, heads=shard.heads, query_groups=query_groups)
        self.assertEqual(chunk.numel, layout.layout_numel(entries))
        self.assertEqual((chunk.step, chunk.param_bytes, len(chunk.params), len(chunk.exp_avg_sq)),
                         (2, 4, chunk.numel, chunk.numel))
        self.assertTrue(any(chunk.exp_avg), "AdamW's moments after two steps are not all zero")

    def test_reads_a_gpt_checkpoint(self):
        self.check_whole_model(reader.read_checkpoint(self.save("gpt")), "gpt", 4, 256)

    def test_reads_a_llama_checkpoint(self):
        shard = reader.read_checkpoint(self.save("llama", "--arch", "llama"))
        self.check_whole_model(shard, "llama", 4, layout.llama_ffn_hidden(64))

    def test_reads_a_grouped_query_attention_checkpoint(self):
        shard = reader.read_checkpoint(self.save("gqa", "--arch", "llama", "--group-query-attention",
                                                 "--num-query-groups", "2"))
        self.check_whole_model(shard, "llama", 2, layout.llama_ffn_hidden(64))

    def test_refuses_a_damaged_shard(self):
        d = self.save("damaged")
        path = os.path.join(reader.shard_dir(d, 2), reader.SHARD_FILE)
        with open(path, "r+b") as f:  # a bit of a weight (the middle of the file), not of the header
            at = os.path.getsize(path) // 2
            f.seek(at)
            byte = f.read(1)
            f.seek(at)
            f.write(bytes([byte[0] ^ 1]))
        with self.assertRaisesRegex(reader.CheckpointError, "checksum mismatch"):
            reader.read_checkpoint(d)
        reader.read_checkpoint(d, verify=False)  # the layout itself is intact
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 100)
        with self.assertRaisesRegex(reader.CheckpointError, "model_optim_rng.bin"):
            reader.read_checkpoint(d, verify=False)

    def test_refuses_a_tensor_parallel_checkpoint_and_a_missing_one(self):
        with self.assertRaisesRegex(reader.CheckpointError, "sharded as t=2 p=1"):
            reader.read_checkpoint(self.save("tp2", "--tp", "2"))
        with self.assertRaisesRegex(reader.CheckpointError, "no checkpoint there"):
            reader.read_checkpoint(os.path.join(self.work, "nothing"))


class FormatDocument(unittest.TestCase):
    def test_docs_state_the_version_ptdp_writes(self):
        """docs/PYTORCH.md's shard format names the version checkpoint.cpp writes and the reader's newest
        (it once said "1 to 7; ptdp writes and loads 7 only" beside a version-8 table)."""
        newest = max(reader.VERSIONS)
        with open(os.path.join(repo.ROOT, "core", "train", "checkpoint.cpp"), encoding="utf-8") as f:
            self.assertIn(f"constexpr uint32_t kVersion = {newest};", f.read())
        with open(os.path.join(repo.ROOT, "docs", "PYTORCH.md"), encoding="utf-8") as f:
            doc = " ".join(f.read().split())
        for claim in (f"| 8 | u32 | version ({newest}) |", f"From version {newest} on (what ptdp writes and loads)",
                      f"Versions 1 to {newest - 1} had a fixed C struct", f"ptdp loads version {newest} only"):
            self.assertIn(claim, doc)


if __name__ == "__main__":
    unittest.main()
