"""Rows (dicts) as CSV text: a header of the given columns (default: every key of the rows, in the
order first seen), a missing value as an empty cell, '\n' line ends."""

from __future__ import annotations

import csv
import io


def csv_text(rows: list, columns: list | None = None, cell=lambda v: v) -> str:
    """CELL(value) is written for each value (a formatter, say, for floats)."""
    if columns is None:
        columns = []
        for r in rows:
            columns += [k for k in r if k not in columns]
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=columns, lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({k: cell(r.get(k, "")) for k in columns})
    return buf.getvalue()
