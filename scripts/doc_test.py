#!/usr/bin/env python3
"""Checks the documents' code blocks, ptdp flags and repository paths (ctest Docs.*).
The command's code and usage: scripts/ptdp_tools/doc_test/cli.py."""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ptdp_tools.doc_test.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
