#!/usr/bin/env python3
"""The power of the history's gate, from a simulation.
The command's code and usage: scripts/ptdp_tools/plots/gate_power.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from ptdp_tools.plots.gate_power import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
