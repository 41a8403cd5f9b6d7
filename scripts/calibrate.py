#!/usr/bin/env python3
"""Fits a hardware profile's GEMM curve to Google Benchmark results.
The command's code and usage: scripts/ptdp_tools/calibrate.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.calibrate import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
