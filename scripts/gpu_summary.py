#!/usr/bin/env python3
"""Summarises a GPU session (scripts/gpu_session.sh) into its output folder.
The command's code and usage: scripts/ptdp_tools/gpu_summary.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.gpu_summary import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
