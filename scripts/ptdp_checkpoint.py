#!/usr/bin/env python3
"""Reads ptdp checkpoints; export-hf writes one as a Hugging Face model folder.
The command's code and usage: scripts/ptdp_tools/checkpoint/cli.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.checkpoint.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
