"""ctest Scripts.ExportHfGathersShardedSaves (scripts/export_hf_gather_test.sh): the shards of a
save of t = 2, p = 2, interleaved stages, --zero 1 and --zero 3 gather into the whole model of a
t = 1, p = 1 save of the same run (the initial weights, which ptdp draws from each element's place in
the whole tensor: equal bit for bit; and after training, equal to rounding); `export-hf` of such a
save writes them (ptdp_checkpoint.py and `ptdp export-hf`), with the tokenizer's bos and eos ids and
under another --make-vocab-size-divisible-by; and it refuses, in one line naming the file, a shard of
another save, a missing shard (naming the sharding), and says what to install without numpy.
Needs numpy (the export's own need); $PTDP names the ptdp binary.

    PTDP=build/ptdp python3 -m unittest ptdp_tools.checkpoint.gather_test     (in scripts/)
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from ptdp_tools import repo
from ptdp_tools.checkpoint import gather, layout, reader

SCRIPTS = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TOOL = os.path.join(SCRIPTS, "ptdp_checkpoint.py")
V = 256  # tiny's vocabulary
SHARDED = {  # name: the flags of a sharded save of tiny (4 layers, 4 heads)
    "t2p2": ["--tp", "2", "--pp", "2"],
    "p2v2": ["--pp", "2", "--vpp", "2", "--schedule", "interleaved"],
    "zero1": ["--dp", "2", "--zero", "1", "--grad-bucket-size", "5000"],
    "zero3": ["--dp", "2", "--zero", "3"],
    "t2zero1": ["--tp", "2", "--dp", "2", "--zero", "1", "--grad-bucket-size", "3000"],
    "llama-t2p2": ["--arch", "llama", "--group-query-attention", "--num-query-groups", "2", "--tp", "2", "--pp", "2"],
}


class GatherShards(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        try:
            import numpy
        except ImportError:
            raise unittest.SkipTest("no numpy in this Python (export-hf needs it)") from None
        cls.np = numpy
        cls.ptdp = os.environ.get("PTDP") or os.path.join(repo.ROOT, "build", "ptdp")
        if not os.access(cls.ptdp, os.X_OK):
            raise AssertionError(f"{cls.ptdp}: no ptdp program there (PTDP=BUILD/ptdp names one)")
        cls.work = tempfile.mkdtemp(prefix="ptdp_gather_test_")

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.work, ignore_errors=True)

    def train(self, name, *flags, iters=0):
        """A save of tiny with FLAGS: the initial weights (iters 0, --save-init) or after ITERS."""
        d = os.path.join(self.work, name)
        save = ["--iters", "1", "--save-init", d] if iters == 0 else ["--iters", str(iters), "--save", d]
        r = subprocess.run([self.ptdp, "train", "--model", "tiny", "--warmup", "0", "--seed", "11", "--micro-batch",
                            "2", "--global-batch", "8", "--lr", "1e-3", *flags, *save], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return d

    def gathered(self, d, iteration=None):
        return gather.gather(self.np, reader.read_all_shards(d, iteration))

    def assert_same_model(self, a, b, atol=0.0):
        self.assertEqual(sorted(a), sorted(b))
        for name in a:
            x, y = (a[name][:V], b[name][:V]) if name in ("wte", "output") else (a[name], b[name])
            self.assertEqual(x.shape, y.shape, name)
            if atol == 0:
                self.assertTrue(self.np.array_equal(x, y), f"{name} differs")
            else:
                self.assertTrue(self.np.allclose(x, y, rtol=0, atol=atol),
                                f"{name} differs by {float(abs(x - y).max())}")

    def test_sharded_initial_weights_gather_to_the_whole_models_bit_for_bit(self):
        whole = {"gpt": self.gathered(self.train("whole-gpt"), 0),
                 "llama": self.gathered(self.train("whole-llama", *SHARDED["llama-t2p2"][:5]), 0)}
        for name, flags in SHARDED.items():
            with self.subTest(name):
                got = self.gathered(self.train("init-" + name, *flags), 0)
                self.assert_same_model(got, whole["llama" if "--arch" in flags else "gpt"])

    def test_a_trained_t2_p2_save_gathers_to_the_weights_of_t1_p1(self):
        # Four Adam steps at lr 1e-3: the runs differ only in the order of sums (t = 2).
        whole = self.gathered(self.train("trained-whole", iters=4))
        for name in ("t2p2", "zero1"):
            with self.subTest(name):
                self.assert_same_model(self.gathered(self.train("trained-" + name, *SHARDED[name], iters=4)), whole,
                                       atol=2e-4)

    def export(self, *args, env=None):
        return subprocess.run([sys.executable, TOOL, "export-hf", *args], capture_output=True, text=True, env=env)

    def test_export_hf_writes_a_sharded_save_and_the_tokenizers_ids(self):
        d = self.train("export-t2p2", *SHARDED["t2p2"], "--vocab-size", "2048", iters=2)
        out = os.path.join(self.work, "hf-t2p2")
        vocab = os.path.join(repo.ROOT, "core", "data", "testdata", "gpt2_bpe", "vocab.json")
        r = self.export(d, out, "--vocab-file", vocab)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("gathered from 4 shards saved as t=2 p=2", r.stdout)
        with open(vocab) as f:
            eot = json.load(f)["<|endoftext|>"]
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["bos_token_id"], config["eos_token_id"]), (eot, eot))
        r = self.export(d, out, "--bos-token-id", "1", "--eos-token-id", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "config.json")) as f:
            config = json.load(f)
        self.assertEqual((config["bos_token_id"], config["eos_token_id"]), (1, 2))
        r = self.export(d, os.path.join(self.work, "hf-bad-id"), "--eos-token-id", "2048")
        self.assertEqual((r.returncode, r.stderr.count("\n")), (1, 1), r.stderr)
        self.assertIn("eos_token_id 2048 (the tokenizer's) is outside the model's vocabulary of 2048", r.stderr)
        # The same through ptdp's own subcommand (its errors are ptdp's: one line, exit 2).
        r = subprocess.run([self.ptdp, "export-hf", d, os.path.join(self.work, "hf-cli")], capture_output=True,
                           text=True, env=dict(os.environ, PTDP_PYTHON=sys.executable))
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(self.work, "hf-cli", "config.json")) as f:
            self.assertIsNone(json.load(f)["eos_token_id"])  # no tokenizer named: not known
        r = subprocess.run([self.ptdp, "export-hf", os.path.join(self.work, "nothing"), out], capture_output=True,
                           text=True, env=dict(os.environ, PTDP_PYTHON=sys.executable))
        self.assertEqual((r.returncode, r.stderr.count("\n")), (2, 1), r.stderr)
        self.assertRegex(r.stderr, "^ptdp: error: .*no checkpoint there")

    def test_export_hf_under_another_vocabulary_padding(self):
        d = self.train("vocab64", "--vocab-size", "300", "--make-vocab-size-divisible-by", "64", iters=1)
        r = self.export(d, os.path.join(self.work, "hf-vocab64"))
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.export(d, os.path.join(self.work, "hf-vocab128"), "--make-vocab-size-divisible-by", "128")
        self.assertEqual(r.returncode, 1)
        self.assertIn("--make-vocab-size-divisible-by 128: ", r.stderr)
        self.assertIn("was saved with --make-vocab-size-divisible-by 64", r.stderr)

    def test_a_shard_of_another_save_is_refused(self):
        a, b = self.train("save-a", iters=1), self.train("save-b", iters=1)
        shard = os.path.join(reader.shard_dir(a, 1), reader.SHARD_FILE)
        shutil.copy(os.path.join(reader.shard_dir(b, 1), reader.SHARD_FILE), shard)
        out = os.path.join(self.work, "hf-mixed")
        r = self.export(a, out)
        self.assertEqual((r.returncode, r.stderr.count("\n")), (1, 1), r.stderr)
        self.assertIn(f"{shard} belongs to save", r.stderr)
        self.assertFalse(os.path.exists(out))

    def test_a_missing_pipeline_shard_names_the_sharding(self):
        d = self.train("p2-missing", "--pp", "2", iters=1)
        shutil.rmtree(reader.shard_dir(d, 1, 0, 1, 2))
        r = self.export(d, os.path.join(self.work, "hf-missing"))
        self.assertEqual((r.returncode, r.stderr.count("\n")), (1, 1), r.stderr)
        self.assertIn("is missing: the save is sharded as t=1 p=2 and needs every shard", r.stderr)

    def test_without_numpy_it_says_what_to_install(self):
        d = self.train("no-numpy", iters=1)
        code = ("import sys; sys.modules['numpy'] = None; from ptdp_tools.checkpoint.cli import main; "
                f"sys.exit(main(['export-hf', {d!r}, {os.path.join(self.work, 'hf-no-numpy')!r}]))")
        r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=SCRIPTS)
        self.assertEqual((r.returncode, r.stderr.count("\n")), (1, 1), r.stderr)
        self.assertIn("needs numpy: install it", r.stderr)


if __name__ == "__main__":
    unittest.main()
