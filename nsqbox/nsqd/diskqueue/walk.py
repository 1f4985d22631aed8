"""Every unread record of a disk queue, read in order in big chunks (nsqbox's snapshots).

:func:`unread_records` reads the go-diskqueue data files (``[int32 BE length][record]``, back
to back) from the queue's read position to its write position with a file descriptor of its
own, :data:`CHUNK` bytes per read, and yields the records a chunk held as one list. Like
:mod:`.peek` it changes nothing (read position, depth, meta file and files stay as they
were), but it reads a queue whole and fast instead of a page at a time; a corrupt length or
a missing or short file raises :class:`DiskWalkError`, which says where.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator
from typing import Final

from .reader import DiskQueueReader

__all__ = ["CHUNK", "DiskWalkError", "unread_records"]

#: Bytes read at a time (a longer record is read on its own).
CHUNK: Final = 1024 * 1024

_unpack_len = struct.Struct(">i").unpack_from


class DiskWalkError(OSError):
    """The queue's files do not hold what its meta file says."""


def unread_records(reader: DiskQueueReader) -> Iterator[list[bytes]]:
    """The unread records of ``reader``'s queue, in order, in batches (module doc)."""
    read_file, read_pos, write_file, write_pos = reader.positions
    lo, hi = reader.min_msg_size, reader.max_msg_size
    file_num, pos = read_file, read_pos
    while (file_num, pos) < (write_file, write_pos):
        try:
            fd = os.open(reader.file_name(file_num), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            raise DiskWalkError(f"{exc.strerror}: file {file_num}") from None
        try:
            limit = write_pos if file_num == write_file else os.fstat(fd).st_size
            while pos + 4 <= limit:
                data = os.pread(fd, min(CHUNK, limit - pos), pos)
                batch: list[bytes] = []
                off = 0
                n = len(data)
                while off + 4 <= n:
                    size = _unpack_len(data, off)[0]
                    if not lo <= size <= hi or pos + off + 4 + size > limit:
                        raise DiskWalkError(f"bad record at {file_num},{pos + off}")
                    end = off + 4 + size
                    if end > n:
                        break
                    batch.append(data[off + 4 : end])
                    off = end
                if off == 0:  # one record longer than a chunk (or a short read)
                    if n < 4:
                        raise DiskWalkError(f"short file {file_num} at {pos}")
                    size = _unpack_len(data, 0)[0]
                    record = os.pread(fd, size, pos + 4)
                    if len(record) != size:
                        raise DiskWalkError(f"short record at {file_num},{pos}")
                    batch.append(record)
                    off = 4 + size
                pos += off
                yield batch
        finally:
            os.close(fd)
        if file_num == write_file:
            break
        file_num, pos = file_num + 1, 0
