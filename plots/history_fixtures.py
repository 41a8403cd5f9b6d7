#!/usr/bin/env python3
"""A made-up throughput history for the tests of plots/history.py --changes and scripts/track.sh.

  history_fixtures.py TEMPLATE OUT EXPR

Writes OUT: 12 builds x 3 runs, each row the first row of TEMPLATE (a results/history.csv) with
git_sha "00abab..", "01abab..", ... and tokens_per_s = EXPR (a Python expression of the build
index i: the build's median) times a noise of 0.3% from a fixed seed, so every call with the same
EXPR writes the same file.
"""
import csv
import random
import sys


def main(argv):
    if len(argv) != 4:
        sys.exit(__doc__)
    template_path, out, expr = argv[1:4]
    with open(template_path, newline="") as f:
        r = csv.DictReader(f)
        header, template = r.fieldnames, next(r)
    random.seed(7)
    with open(out, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=header, lineterminator="\n")
        w.writeheader()
        for i in range(12):
            for _ in range(3):
                row = dict(template, git_sha=f"{i:02d}" + "ab" * 19)
                row["tokens_per_s"] = f"{eval(expr, {'i': i}) * (1 + random.gauss(0, 0.003)):.2f}"
                w.writerow(row)


if __name__ == "__main__":
    main(sys.argv)
