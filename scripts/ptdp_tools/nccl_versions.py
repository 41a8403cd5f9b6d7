"""The version of each NCCL library given (ncclGetVersion through ctypes, no GPU needed), newest first.

  python3 -m ptdp_tools.nccl_versions LIB...     # prints "2.30.7 /path/libnccl.so.2" a line

A library that does not load or has no ncclGetVersion prints "unloadable PATH: why". Exit 0.
"""
import ctypes
import os
import sys


def version_of(path: str):
    """(code, "2.30.7") of the NCCL at path (NCCL encodes 2.30.7 as 23007)."""
    lib = ctypes.CDLL(path, mode=ctypes.RTLD_LOCAL)
    v = ctypes.c_int(0)
    if lib.ncclGetVersion(ctypes.byref(v)) != 0:
        raise OSError("ncclGetVersion failed")
    code = v.value
    return code, f"{code // 10000}.{code % 10000 // 100}.{code % 100}"


def main(argv=None) -> int:
    paths, seen = [], set()
    for p in (sys.argv[1:] if argv is None else argv):
        real = os.path.realpath(p)
        if real not in seen:
            seen.add(real)
            paths.append(p)
    found, bad = [], []
    for p in paths:
        try:
            found.append((*version_of(p), p))
        except (OSError, AttributeError) as e:
            bad.append(f"unloadable {p}: {e}")
    for _, text, p in sorted(found, reverse=True):
        print(f"{text} {p}")
    for line in bad:
        print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
