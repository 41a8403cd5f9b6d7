#!/usr/bin/env python3
"""Compares ptdp with the same GPT or LLaMA written in PyTorch (docs/PYTORCH.md).
The command's code and usage: scripts/ptdp_tools/compare_pytorch/cli.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.compare_pytorch.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
