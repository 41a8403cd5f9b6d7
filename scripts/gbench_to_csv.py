#!/usr/bin/env python3
"""Google Benchmark JSON -> CSV, one row per benchmark run.
The command's code and usage: scripts/ptdp_tools/gbench_to_csv.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.gbench_to_csv import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
