"""Read a disk queue's unread records without consuming them (nsqbox's peek route).

:func:`scan` walks the go-diskqueue data files (``[int32 BE length][record]``, back to
back) from a position at or after the queue's read position, with a file descriptor of
its own: the queue's read position, depth, read buffer and files are left exactly as they
were, and nothing is written (no meta file sync either). It reads a bounded number of
records, and of each only its first bytes, through one chunk-sized buffer, so its memory
does not grow with the queue's depth or the records' sizes.

A position is ``(file_num, pos)``, as in the meta file. One before the queue's read
position (records consumed since a previous page) is moved up to it.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass

from .reader import DiskQueueReader

__all__ = ["CHUNK", "DiskRecord", "ScanResult", "scan"]

#: Bytes read at a time (a record's prefix longer than this is read on its own).
CHUNK = 64 * 1024

_unpack_len = struct.Struct(">i").unpack_from


@dataclass(frozen=True, slots=True)
class DiskRecord:
    """One unread record: where it is, its full length and its first bytes."""

    file_num: int
    pos: int
    size: int
    head: bytes


@dataclass(frozen=True, slots=True)
class ScanResult:
    """Records read, where the next one is (``None`` at the end) and why it stopped early."""

    records: list[DiskRecord]
    next: tuple[int, int] | None
    error: str = ""


class _Window:
    """A chunk of one file, read with ``pread`` and never past ``limit``."""

    def __init__(self, fd: int, limit: int) -> None:
        self.fd = fd
        self.limit = limit
        self.start = 0
        self.buf = b""

    def get(self, pos: int, n: int) -> bytes:
        """``n`` bytes at ``pos`` (fewer only if the file is shorter)."""
        off = pos - self.start
        if off >= 0 and off + n <= len(self.buf):
            return self.buf[off : off + n]
        if n > CHUNK:  # a long prefix: read it on its own
            return os.pread(self.fd, n, pos)
        self.buf = os.pread(self.fd, max(n, min(CHUNK, self.limit - pos)), pos)
        self.start = pos
        return self.buf[:n]


def scan(
    reader: DiskQueueReader,
    start: tuple[int, int] | None,
    count: int,
    prefix: int,
    max_bytes: int,
) -> ScanResult:
    """Up to ``count`` unread records from ``start`` (``None``: the read position) on.

    Each record's ``head`` is its first ``prefix`` bytes; the scan also stops once the heads
    hold ``max_bytes`` (after at least one record). A corrupt length or a missing or short
    file ends the scan with ``error`` set (the queue itself repairs such files when it reads
    them).
    """
    read_file, read_pos, write_file, write_pos = reader.positions
    file_num, pos = max(start or (read_file, read_pos), (read_file, read_pos))
    records: list[DiskRecord] = []
    held = 0
    lo, hi = reader.min_msg_size, reader.max_msg_size
    while (file_num, pos) < (write_file, write_pos):
        if len(records) >= count or (records and held >= max_bytes):
            return ScanResult(records, (file_num, pos))
        try:
            fd = os.open(reader.file_name(file_num), os.O_RDONLY | os.O_CLOEXEC)
        except OSError as exc:
            return ScanResult(records, None, f"{exc.strerror}: file {file_num}")
        try:
            limit = write_pos if file_num == write_file else os.fstat(fd).st_size
            window = _Window(fd, limit)
            while pos + 4 <= limit:
                if len(records) >= count or (records and held >= max_bytes):
                    return ScanResult(records, (file_num, pos))
                raw = window.get(pos, 4)
                size = _unpack_len(raw, 0)[0] if len(raw) == 4 else -1
                ok = lo <= size <= hi and pos + 4 + size <= limit
                head = window.get(pos + 4, min(size, prefix)) if ok else b""
                if not ok or len(head) < min(size, prefix):
                    return ScanResult(records, None, f"bad record at {file_num},{pos}")
                records.append(DiskRecord(file_num, pos, size, head))
                held += len(head)
                pos += 4 + size
        finally:
            os.close(fd)
        if file_num == write_file:
            break
        file_num, pos = file_num + 1, 0
    return ScanResult(records, None)
