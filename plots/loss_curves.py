#!/usr/bin/env python3
"""Training-loss curves from `ptdp train --loss-log` files.
The command's code and usage: scripts/ptdp_tools/plots/loss_curves.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from ptdp_tools.plots.loss_curves import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
