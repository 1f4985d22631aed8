"""File-level helpers of the disk queue: the meta file's grammar and crash recovery scans."""

from __future__ import annotations

import os
import re
import struct

_LEN = struct.Struct(">i")

# go-diskqueue's retrieveMetaData uses fmt.Fscanf("%d\n%d,%d\n%d,%d\n"); %d tolerates leading
# blanks and a sign, newlines must match.
META_RE = re.compile(
    rb"[ \t]*([+-]?\d+)\n[ \t]*([+-]?\d+),[ \t]*([+-]?\d+)\n[ \t]*([+-]?\d+),[ \t]*([+-]?\d+)\n?"
)


def data_file_numbers(data_path: str, name: str) -> list[int]:
    """Numbers of the ``<name>.diskqueue.NNNNNN.dat`` files in ``data_path``, sorted."""
    prefix = f"{name}.diskqueue."
    try:
        names = os.listdir(data_path)
    except OSError:
        return []
    nums = []
    for fn in names:
        if fn.startswith(prefix) and fn.endswith(".dat"):
            middle = fn[len(prefix) : -len(".dat")]
            if middle.isdigit():
                nums.append(int(middle))
    return sorted(nums)


def count_records(path: str, pos: int, size: int, min_size: int, max_size: int) -> int:
    """Whole, plausible records between ``pos`` and ``size`` in ``path``.

    Used when the meta file is stale or missing (the process was killed): records written
    after the last meta sync are still in the file, and depth should say so.
    """
    try:
        with open(path, "rb") as f:
            f.seek(pos)
            data = f.read(size - pos)
    except OSError:
        return 0
    count = 0
    off = 0
    while off + 4 <= len(data):
        (length,) = _LEN.unpack_from(data, off)
        if length < min_size or length > max_size:
            break
        off += 4 + length
        if off > len(data):
            break
        count += 1
    return count
