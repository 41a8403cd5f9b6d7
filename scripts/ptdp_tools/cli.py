"""Argument parsing for the commands, as ptdp's own: a bad argument is one line on stderr,
"PROG: error: MESSAGE", and exit code 2 (argparse's default prints the usage first)."""

from __future__ import annotations

import argparse
import sys
from typing import NoReturn


def refuse(prog: str, message: str) -> NoReturn:
    print(f"{prog}: error: {message}", file=sys.stderr)
    sys.exit(2)


class Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors are refuse()'s one line, named after the command (for a
    subcommand too: 'compare_pytorch.py: error: ...', not 'compare_pytorch.py loss: error: ...')."""

    def error(self, message):
        refuse(self.prog.split()[0], message)
