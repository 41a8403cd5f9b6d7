"""Files written whole or not at all: the content goes to a temporary file beside the target, is
flushed to the disk (fsync) and renamed over the target, so that a reader sees the old file or the
new one, never a part of one. The file gets the permissions a plain open() gives (0666 less the
umask). A file a user names goes through user_file: a symlink or a device is written through."""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile


@contextlib.contextmanager
def replacing(path: str):
    """Yields a temporary path beside PATH that ends with PATH's name (so that a writer choosing a
    format by the suffix, such as matplotlib's savefig, chooses PATH's). When the block ends without
    an exception, what was written there replaces PATH; otherwise it is removed."""
    directory = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(dir=directory, prefix=".tmp-", suffix="-" + os.path.basename(path))
    os.close(fd)
    try:
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp made it 0600
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        raise


def write(path: str, data) -> None:
    """Writes DATA to PATH atomically: str (UTF-8, line ends as they are), bytes, or a list of
    bytes written one after the other."""
    with replacing(path) as tmp:
        if isinstance(data, str):
            with open(tmp, "w", encoding="utf-8", newline="") as f:
                f.write(data)
        else:
            with open(tmp, "wb") as f:
                for part in [data] if isinstance(data, (bytes, bytearray, memoryview)) else data:
                    f.write(part)


@contextlib.contextmanager
def user_file(path: str):
    """As replacing(PATH), for a file a user names: when PATH is a symlink or exists and is not a
    regular file (a device, a pipe), it is written through instead of replaced (the link stays, the
    device gets the bytes): the content goes to a temporary file in the system's temporary folder
    and is copied into PATH when the block ends without an exception."""
    if not os.path.islink(path) and (not os.path.exists(path) or os.path.isfile(path)):
        with replacing(path) as tmp:
            yield tmp
        return
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix="-" + os.path.basename(path))
    os.close(fd)
    try:
        yield tmp
        with open(tmp, "rb") as src, open(path, "wb") as dst:
            shutil.copyfileobj(src, dst)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
