"""ptdp against the same GPT and LLaMA in PyTorch (docs/PYTORCH.md): env (what is installed, the
ptdp binary), model (the PyTorch model in ptdp's layout), trainer (ptdp's optimizer step), loss
and throughput (the two commands) and cli (the `compare_pytorch.py` command)."""
