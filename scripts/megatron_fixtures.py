#!/usr/bin/env python3
"""Writes the fixtures of Megatron-core's sample order (core/data/testdata/megatron/).
The command's code and usage: scripts/ptdp_tools/fixtures/megatron.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.fixtures.megatron import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
