"""What a comparison needs and where it runs: PyTorch (refused in one line, exit code 2, when it is
not installed), the ptdp binary, the device; running ptdp."""

from __future__ import annotations

import importlib
import os
import shlex
import subprocess
import sys

from ptdp_tools import cli

PROG = "compare_pytorch.py"


def refuse(msg: str):
    cli.refuse(PROG, msg)


def import_torch():
    try:
        torch = importlib.import_module("torch")
    except ImportError as e:
        hint = " (Debian's python3-torch is installed for /usr/bin/python3)" if os.path.exists(
            "/usr/lib/python3/dist-packages/torch") and sys.executable != "/usr/bin/python3" else ""
        refuse(f"PyTorch is not installed for {sys.executable}: {e}{hint}")
    return torch


def check_ptdp(path: str) -> str:
    if not (os.path.isfile(path) and os.access(path, os.X_OK)):
        refuse(f"--ptdp {path}: no ptdp executable there (build it: cmake --build build --target ptdp)")
    return os.path.abspath(path)


def check_device(torch, device: str) -> None:
    if device == "cuda" and not torch.cuda.is_available():
        refuse(f"--device cuda: PyTorch sees no GPU (torch {torch.__version__}, CUDA build "
               f"{torch.version.cuda or 'none'}, torch.cuda.is_available() is false)")


def device_name(torch, device: str) -> str:
    if device == "cuda":
        return torch.cuda.get_device_name(torch.cuda.current_device())
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "cpu"


def torch_dtype(torch, precision: str):
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[precision]


def run_ptdp(cmd: list, what: str, threads: int = 0) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS=str(threads)) if threads else None
    print(f"$ {'OMP_NUM_THREADS=' + str(threads) + ' ' if threads else ''}{shlex.join(cmd)}", flush=True)
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        last = (r.stderr.strip() or r.stdout.strip() or "(no output)").splitlines()[-1]
        print(f"{PROG}: {what}: ptdp exited with {r.returncode}: {last}", file=sys.stderr)
    return r
