#!/usr/bin/env python3
"""The paper's figures and tables from the result CSVs, the published points overlaid.
The command's code and usage: scripts/ptdp_tools/plots/figures.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from ptdp_tools.plots.figures import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
