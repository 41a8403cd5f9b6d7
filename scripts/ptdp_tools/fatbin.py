"""The device code of a shared library (its CUDA fat binaries), listed, and cut to one GPU architecture.

A library built for several GPU architectures (NCCL's wheel: sm_75 to sm_120 and PTX) holds, in
its ELF sections `.nv_fatbin` and `__nv_relfatbin`, fat binary containers: a 16-byte header (magic
0xBA55ED50, version, header size, payload size), then entries, each a header (kind: 1 PTX, 2 ELF
cubin; its header size and padded payload size; the architecture as 10 * major + minor at byte 28)
and its payload. The CUDA driver loads, for each container, the entry that matches the GPU; the
others are never read.

`prune` keeps, in every container that has a cubin for the architecture asked, that cubin and
zeroes every other entry's payload (headers, sizes and offsets unchanged, so the ELF is the same
file byte for byte outside those payloads): the library loads as before on that architecture and
compresses to the size of one architecture's code. Containers without a cubin for it are left
whole (code the library uses only on other GPUs).

  python3 -m ptdp_tools.fatbin list LIB
  python3 -m ptdp_tools.fatbin prune LIB OUT --sm 90
"""
import argparse
import struct
import subprocess
import sys
from dataclasses import dataclass

MAGIC = 0xBA55ED50
SECTIONS = (".nv_fatbin", "__nv_relfatbin")
KINDS = {1: "ptx", 2: "cubin"}


class FatbinError(Exception):
    pass


@dataclass
class Entry:
    section: str
    container: int  # the container's offset in the file
    kind: int
    sm: int
    payload: int  # offset of the payload in the file
    size: int  # padded payload size


def sections(path):
    """{name: (file offset, size)} of the fat binary sections, from readelf."""
    try:
        out = subprocess.run(["readelf", "-S", "-W", path], capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError) as e:
        raise FatbinError(f"{path}: readelf cannot read its sections ({e})")
    found = {}
    for line in out.splitlines():
        parts = line.replace("[ ", "[").split()
        if len(parts) > 6 and parts[1] in SECTIONS:
            found[parts[1]] = (int(parts[4], 16), int(parts[5], 16))
    return found


def entries(data, path, secs):
    """Every entry of every container in the sections."""
    out = []
    for name, (off, size) in secs.items():
        p, end = off, off + size
        while p + 16 <= end:
            magic, _, header, payload = struct.unpack_from("<IHHQ", data, p)
            if magic != MAGIC:  # containers are 8-byte aligned, padding between them
                p += 8
                continue
            q, qend = p + header, p + header + payload
            if qend > end:
                raise FatbinError(f"{path}: {name}: a container at {p} runs past its section")
            while q < qend:
                kind, _, eheader, padded = struct.unpack_from("<HHII", data, q)
                sm = struct.unpack_from("<I", data, q + 28)[0]
                if eheader < 32 or q + eheader + padded > qend:
                    raise FatbinError(f"{path}: {name}: an entry at {q} runs past its container")
                out.append(Entry(name, p, kind, sm, q + eheader, padded))
                q += eheader + padded
            p = qend
    return out


def read(path):
    try:
        with open(path, "rb") as f:
            data = bytearray(f.read())
    except OSError as e:
        raise FatbinError(f"{path}: {e.strerror}")
    secs = sections(path)
    if not secs:
        raise FatbinError(f"{path}: no CUDA device code (no {' or '.join(SECTIONS)} section)")
    return data, entries(data, path, secs)


def prune(data, found, sm):
    """Zeroes, in data, every payload beside the sm cubins of the containers that have one. Returns
    (bytes kept, bytes zeroed, containers left whole)."""
    having = {e.container for e in found if e.kind == 2 and e.sm == sm}
    if not having:
        raise FatbinError(f"no cubin for sm_{sm}")
    kept = zeroed = 0
    for e in found:
        if e.container not in having:
            continue
        if e.kind == 2 and e.sm == sm:
            kept += e.size
        else:
            data[e.payload:e.payload + e.size] = bytes(e.size)
            zeroed += e.size
    whole = len({e.container for e in found} - having)
    return kept, zeroed, whole


def main(argv=None):
    ap = argparse.ArgumentParser(prog="fatbin", description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    ls = sub.add_parser("list", help="the entries' kinds, architectures and sizes")
    ls.add_argument("lib")
    pr = sub.add_parser("prune", help="keep one architecture's cubins")
    pr.add_argument("lib")
    pr.add_argument("out")
    pr.add_argument("--sm", type=int, required=True, help="the architecture kept, e.g. 90 for sm_90")
    a = ap.parse_args(argv)
    try:
        data, found = read(a.lib)
        if a.cmd == "list":
            sizes = {}
            for e in found:
                key = (e.section, KINDS.get(e.kind, str(e.kind)), e.sm)
                sizes[key] = sizes.get(key, 0) + e.size
            for (section, kind, sm), size in sorted(sizes.items()):
                print(f"{section} {kind} sm_{sm} {size / 1e6:.2f} MB")
            return 0
        kept, zeroed, whole = prune(data, found, a.sm)
        try:
            with open(a.out, "wb") as f:
                f.write(data)
        except OSError as e:
            raise FatbinError(f"{a.out}: {e.strerror}")
        print(f"fatbin: {a.out}: sm_{a.sm} cubins kept ({kept / 1e6:.1f} MB), {zeroed / 1e6:.1f} MB of other "
              f"architectures zeroed, {whole} container(s) without sm_{a.sm} code left whole")
        return 0
    except FatbinError as e:
        print(f"fatbin: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
