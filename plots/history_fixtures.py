#!/usr/bin/env python3
"""A made-up throughput history for the tests of plots/history.py and scripts/track.sh.
The command's code and usage: scripts/ptdp_tools/fixtures/history.py."""
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "scripts"))
from ptdp_tools.fixtures.history import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
