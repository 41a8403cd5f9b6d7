"""gpu_summary.py's verdicts on issue 54's criteria: ptdp's fastest attention backend against
torch.compile per shape (speed, peak memory, GPT's MFU), only where both were measured; and the
memory model against a pipeline layout's first stage."""
import os
import tempfile
import unittest

from ptdp_tools import gpu_summary


def row(impl, tokens, mem, mfu="0.4", arch="gpt", h="2048", l="24", s="2048", g=""):
    return {"implementation": impl, "status": "ok", "tokens_per_s": str(tokens), "peak_mem_gb": str(mem),
            "mfu": mfu, "arch": arch, "hidden": h, "layers": l, "seq_length": s, "query_groups": g}


class Criteria(unittest.TestCase):
    def test_the_fastest_backend_is_judged_against_torch_compile(self):
        rows = [row("ptdp-unfused", 50000, 50.0), row("ptdp-cudnn", 60000, 37.0, mfu="0.52"),
                row("pytorch-compile", 53600, 37.8), row("pytorch-eager", 49000, 41.0)]
        got = {r["item"]: r for r in gpu_summary.criteria_rows(rows)}
        speed = got["gpt h=2048 l=24 ptdp-cudnn/pytorch-compile"]
        self.assertEqual((speed["value"], speed["status"], speed["unit"]), ("1.119", "met", "x (target 1.10)"))
        self.assertEqual(got["gpt h=2048 l=24 ptdp-cudnn peak memory"]["status"], "met")
        self.assertEqual(got["gpt h=2048 l=24 ptdp-cudnn MFU"]["status"], "met")

    def test_a_shortfall_is_not_met_and_a_shape_without_torch_compile_is_left_out(self):
        rows = [row("ptdp-cudnn", 70000, 26.0, arch="llama", h="4096", l="4"),
                row("pytorch-compile", 67713, 22.6, arch="llama", h="4096", l="4"),
                row("ptdp-cudnn", 30000, 40.0, arch="llama", h="4096", l="4", s="8192", g="8"),
                row("ptdp-cudnn", 99999, 1.0, arch="gpt", h="64", l="2")]
        got = {r["item"]: r for r in gpu_summary.criteria_rows(rows)}
        self.assertEqual(got["llama h=4096 l=4 ptdp-cudnn/pytorch-compile"]["status"], "not met")  # 1.034 < 1.20
        self.assertEqual(got["llama h=4096 l=4 ptdp-cudnn peak memory"]["status"], "not met")
        self.assertNotIn("llama h=4096 l=4 ptdp-cudnn MFU", got)  # no MFU target for LLaMA
        self.assertEqual(len(got), 2)  # s = 8192 has no torch.compile row; h=64 is no target shape


class FirstStageMemory(unittest.TestCase):
    def work(self, peak: str, model_log: str) -> str:
        tmp = tempfile.TemporaryDirectory()
        self.addCleanup(tmp.cleanup)
        d = tmp.name
        os.makedirs(os.path.join(d, "raw"))
        os.makedirs(os.path.join(d, "logs"))
        with open(os.path.join(d, "raw", "memory_pp.csv"), "w") as f:
            f.write(f"experiment,peak_mem_gb\nrun,{peak}\n")
        with open(os.path.join(d, "logs", "memory_pp_model.log"), "w") as f:
            f.write(model_log)
        return d

    def test_the_measured_peak_is_judged_against_stage_0_of_the_model(self):
        log = "  memory: fits: stage 0 needs 29.2 GB (...)\n  in use per stage, GB (without the reserved): 26.21 20.12\n"
        [row] = gpu_summary.memory_rows(self.work("25.0", log))
        self.assertEqual((row["value"], row["status"]), ("25", "within 10%"))
        [row] = gpu_summary.memory_rows(self.work("31.0", log))
        self.assertEqual(row["status"], "model off by -15%")  # the model says 15% less than measured

    def test_nothing_without_both_numbers(self):
        self.assertEqual(gpu_summary.memory_rows(self.work("25.0", "simulate failed\n")), [])


if __name__ == "__main__":
    unittest.main()
