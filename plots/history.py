#!/usr/bin/env python3
"""Throughput over builds, from the history CSV that scripts/track.sh appends to.
The command's code and usage: scripts/ptdp_tools/plots/history.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from ptdp_tools.plots.history import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
