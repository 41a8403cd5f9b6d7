#!/usr/bin/env python3
"""ctests PyTorch.ExportHf*: a ptdp checkpoint exported with `ptdp_checkpoint.py export-hf` loads in
transformers (AutoModelForCausalLM, no missing or unexpected weights) and gives the loss ptdp logged
for the next iteration: ptdp trains N+1 iterations and saves after N, so its loss of iteration N+1
is the checkpoint's loss on that iteration's global batch, which transformers then computes on the
same tokens (the dataset order of scripts/ptdp_tools/data.py). Also: the bf16 export holds exactly
torch's bf16 rounding of the f32 export, bad arguments get one line and a non-zero exit, and (gpt) a
save of t = 2, p = 2 exported by `ptdp export-hf` gives that run's loss too.

  export_hf_test.py --ptdp BUILD/ptdp --case gpt|llama|llama-gqa
"""

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from ptdp_tools import data as pdata  # noqa: E402

CASES = {  # ptdp model flags; the norm epsilon is not ptdp's default, so the export must carry it
    "gpt": ["--model", "tiny", "--norm-epsilon", "2e-5"],
    "llama": ["--model", "tiny", "--arch", "llama", "--norm-epsilon", "1e-6"],
    "llama-gqa": ["--model", "tiny", "--arch", "llama", "--group-query-attention", "--num-query-groups", "2", "--norm-epsilon", "1e-6"],
}
V, S, B, b, N, SEED = 256, 32, 8, 4, 10, 4321  # tiny's vocabulary and sequence; checkpoint after N


def run(cmd: list) -> subprocess.CompletedProcess:
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {r.returncode}:\n{r.stdout[-2000:]}\n{r.stderr[-2000:]}")
    return r


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--ptdp", required=True)
    p.add_argument("--case", choices=sorted(CASES), required=True)
    a = p.parse_args()
    import torch
    import transformers
    from safetensors.torch import load_file

    torch.manual_seed(0)
    work = tempfile.mkdtemp(prefix="ptdp_export_hf_")
    prefix, save, log = (os.path.join(work, n) for n in ("data", "ckpt", "loss.csv"))
    pdata.write_dataset(prefix, pdata.phrase_documents(V, (N + 1) * B * S + 1, SEED), V)
    run([a.ptdp, "train", *CASES[a.case], "--data", prefix, "--micro-batch", str(b), "--global-batch", str(B),
         "--iters", str(N + 1), "--lr", "1e-2", "--warmup", "0", "--seed", str(SEED), "--save", save,
         "--save-interval", str(N), "--loss-log", log, "--log-interval", str(N + 1)])
    with open(log, newline="") as f:
        ptdp_loss = float(list(csv.DictReader(f))[N]["loss"])  # iteration N + 1, the weights of iteration N

    tool = [sys.executable, os.path.join(HERE, "ptdp_checkpoint.py"), "export-hf", save]
    hf, hf16 = os.path.join(work, "hf"), os.path.join(work, "hf-bf16")
    print(run(tool + [hf, "--iteration", str(N)]).stdout.strip())
    run(tool + [hf16, "--iteration", str(N), "--dtype", "bf16"])

    model, info = transformers.AutoModelForCausalLM.from_pretrained(hf, torch_dtype=torch.float32,
                                                                    output_loading_info=True)
    missing = [k for k in info["missing_keys"] if not k.endswith(".attn.bias")]  # GPT-2's causal-mask buffer
    problems = {"missing": missing, "unexpected": info["unexpected_keys"], "mismatched": info["mismatched_keys"]}
    if any(problems.values()):
        sys.exit(f"FAIL: transformers loaded {hf} with {problems}")
    config = json.load(open(os.path.join(hf, "config.json")))
    eps_key = "layer_norm_epsilon" if config["model_type"] == "gpt2" else "rms_norm_eps"
    want_eps = float(CASES[a.case][CASES[a.case].index("--norm-epsilon") + 1])
    if config[eps_key] != want_eps:
        sys.exit(f"FAIL: config.json has {eps_key} {config[eps_key]}, the run trained with {want_eps}")

    samples = pdata.DatasetSamples(pdata.read_dataset_tokens(prefix), S, SEED)
    batch = torch.tensor([samples.get(i) for i in range(N * B, (N + 1) * B)], dtype=torch.long)
    model.eval()
    with torch.no_grad():
        logits = model(input_ids=batch[:, :-1]).logits
        hf_loss = float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                          batch[:, 1:].reshape(-1)))
    rel = abs(hf_loss - ptdp_loss) / abs(ptdp_loss)
    print(f"{type(model).__name__} (transformers {transformers.__version__}): loss {hf_loss:.8f}, "
          f"ptdp {ptdp_loss:.8f} (iteration {N + 1}), relative difference {rel:.2e}")
    if rel > 1e-6:  # seen: below 1e-8; a key and value swapped, or GPT-2's q|k|v columns not regrouped: 3e-3, 7e-5
        sys.exit("FAIL: the losses differ by more than 1e-6")

    f32, b16 = load_file(os.path.join(hf, "model.safetensors")), load_file(os.path.join(hf16, "model.safetensors"))
    wrong = [k for k in f32 if b16[k].dtype != torch.bfloat16 or not torch.equal(f32[k].to(torch.bfloat16), b16[k])]
    if sorted(f32) != sorted(b16) or wrong:
        sys.exit(f"FAIL: the bf16 export is not torch's bf16 rounding of the f32 export ({wrong[:3]})")

    bad = subprocess.run(tool + [os.path.join(work, "x"), "--norm-epsilon", "1e-3"], capture_output=True, text=True)
    if bad.returncode == 0 or "was trained with" not in bad.stderr or len(bad.stderr.strip().splitlines()) != 1:
        sys.exit(f"FAIL: an --norm-epsilon the checkpoint contradicts was not refused in one line: {bad.stderr!r}")
    none = subprocess.run(tool[:-1] + [os.path.join(work, "nothing"), hf], capture_output=True, text=True)
    if none.returncode == 0 or "no checkpoint there" not in none.stderr:
        sys.exit(f"FAIL: a directory without a checkpoint was not refused: {none.stderr!r}")
    if a.case == "gpt":  # a t=2, p=2 save, gathered by `ptdp export-hf`: transformers gives that run's loss
        save2, log2, hf2 = (os.path.join(work, n) for n in ("ckpt-t2p2", "loss-t2p2.csv", "hf-t2p2"))
        run([a.ptdp, "train", *CASES[a.case], "--tp", "2", "--pp", "2", "--data", prefix, "--micro-batch", str(b),
             "--global-batch", str(B), "--iters", str(N + 1), "--lr", "1e-2", "--warmup", "0", "--seed", str(SEED),
             "--save", save2, "--save-interval", str(N), "--loss-log", log2, "--log-interval", str(N + 1)])
        with open(log2, newline="") as f:
            loss2 = float(list(csv.DictReader(f))[N]["loss"])
        r = subprocess.run([a.ptdp, "export-hf", save2, hf2, "--iteration", str(N)], capture_output=True, text=True,
                           env=dict(os.environ, PTDP_PYTHON=sys.executable))
        if r.returncode != 0 or "gathered from 4 shards" not in r.stdout:
            sys.exit(f"FAIL: ptdp export-hf of a t=2 p=2 save: exit {r.returncode}, {r.stdout!r} {r.stderr!r}")
        with torch.no_grad():
            logits = transformers.AutoModelForCausalLM.from_pretrained(hf2, torch_dtype=torch.float32).eval()(
                input_ids=batch[:, :-1]).logits
            got = float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]).double(),
                                                          batch[:, 1:].reshape(-1)))
        if abs(got - loss2) / abs(loss2) > 1e-6:
            sys.exit(f"FAIL: the t=2 p=2 export's loss {got:.8f} is not that run's {loss2:.8f}")
        print(f"t=2 p=2 export: loss {got:.8f}, that run's {loss2:.8f}")
    print(f"PASS: {a.case} exported, loaded by transformers and equal to ptdp's loss")
    import shutil

    shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
