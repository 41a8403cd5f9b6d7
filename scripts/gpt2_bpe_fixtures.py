#!/usr/bin/env python3
"""Writes the GPT-2 BPE tokenizer's test fixtures (core/data/testdata/gpt2_bpe/).
The command's code and usage: scripts/ptdp_tools/fixtures/gpt2_bpe.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.fixtures.gpt2_bpe import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
