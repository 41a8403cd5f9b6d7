"""ctest Scripts.ThePlotsWithoutMatplotlibSayWhatToInstall: plots/figures.py and plots/loss_curves.py
run by a Python without matplotlib end with one line saying what to install, exit code 2 (figures)
or 1 (loss_curves, sys.exit with a message), never a traceback. matplotlib is hidden by a stand-in
module on PYTHONPATH whose import fails as a missing package's does. Also: the legend of an
artefact of one series (fig7's "(single series)") names only the source.

    python3 -m unittest ptdp_tools.plots.figures_test     (in scripts/)
"""

import os
import subprocess
import sys
import tempfile
import unittest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


class WithoutMatplotlib(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self.tmp.cleanup)
        with open(os.path.join(self.tmp.name, "matplotlib.py"), "w", encoding="utf-8") as f:
            f.write("raise ModuleNotFoundError(\"No module named 'matplotlib'\", name='matplotlib')\n")

    def run_script(self, *args):
        env = dict(os.environ, PYTHONPATH=self.tmp.name)
        return subprocess.run([sys.executable, *args], capture_output=True, text=True, env=env, cwd=self.tmp.name)

    def assert_one_line(self, p, prefix):
        self.assertNotIn("Traceback", p.stderr)
        self.assertEqual(len(p.stderr.strip().split("\n")), 1, p.stderr)
        self.assertTrue(p.stderr.startswith(prefix), p.stderr)
        self.assertIn("python3-matplotlib", p.stderr)

    def test_figures(self):
        p = self.run_script(os.path.join(ROOT, "plots", "figures.py"), "fig18", "--results",
                            os.path.join(ROOT, "results"), "--out", self.tmp.name)
        self.assertEqual(p.returncode, 2, p.stderr)
        self.assert_one_line(p, "plots: error: drawing needs matplotlib")
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "fig18.png")))

    def test_loss_curves(self):
        loss = os.path.join(self.tmp.name, "loss.csv")
        with open(loss, "w", encoding="utf-8") as f:
            f.write("iteration,loss\n1,10.5\n2,10.1\n")
        p = self.run_script(os.path.join(ROOT, "plots", "loss_curves.py"), os.path.join(self.tmp.name, "l.png"),
                            f"a={loss}")
        self.assertNotEqual(p.returncode, 0)
        self.assert_one_line(p, "loss_curves: error: drawing needs matplotlib")


class Legends(unittest.TestCase):
    def test_a_single_series_is_not_named(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        from ptdp_tools.plots.figures import SINGLE_SERIES, legend_label
        self.assertEqual(legend_label(SINGLE_SERIES, "paper"), "paper")
        self.assertEqual(legend_label("Batch size = 8", "paper"), "Batch size = 8 (paper)")


if __name__ == "__main__":
    unittest.main()
