"""nsqd's disk-backed queue, in go-diskqueue v1.1.0's on-disk format.

:class:`DiskQueue` reads and writes the exact files real nsqd (go-diskqueue v1.1.0) does, so a
``--data-path`` can move between nsqbox and nsqd in either direction::

    <name>.diskqueue.000000.dat      records: [int32 BE length][length bytes], back to back
    <name>.diskqueue.000001.dat      the next file, once a record would pass max_bytes_per_file
    <name>.diskqueue.meta.dat        "depth\\nreadFileNum,readPos\\nwriteFileNum,writePos\\n"

``name`` is the topic, or ``topic:channel`` for a channel (see :func:`backend_name`).

Go runs each queue in its own goroutine behind channels. nsqbox has one trio thread, so the queue
is a plain synchronous object: writes go straight to the kernel with one ``pwrite`` per
:meth:`DiskQueue.put` (or per file for :meth:`DiskQueue.put_many`), reads come from a chunked
read buffer, and time-based fsyncs happen when the owner calls :meth:`DiskQueue.maybe_sync`.
Given a ``syncer`` (an executor: nsqd's node has one thread for all its queues), the fsyncs that
every ``sync_every`` writes and reads call for run there instead, so ingest does not wait for the
disk; every other sync first waits for the one in the background.
"""

from __future__ import annotations

import logging
import os
import struct
from collections.abc import Sequence
from itertools import chain

from .reader import DiskQueueReader

__all__ = ["DiskQueue", "DiskQueueClosedError", "backend_name", "split_framed"]

log = logging.getLogger("nsqbox.nsqd.diskqueue")

_pack_len = struct.Struct(">i").pack


def backend_name(topic: str, channel: str | None = None) -> str:
    """The diskqueue name nsqd uses: the topic, or ``topic:channel`` (nsqd/dqname.go)."""
    return topic if channel is None else f"{topic}:{channel}"


class DiskQueueClosedError(RuntimeError):
    """The queue was closed or deleted; go-diskqueue answers such calls with ``exiting``."""

    def __init__(self) -> None:
        super().__init__("exiting")


class DiskQueue(DiskQueueReader):
    """A FIFO of byte records in go-diskqueue v1.1.0's on-disk format.

    Opening loads ``<name>.diskqueue.meta.dat`` (if any) and continues where the last run left
    off. Writes fsync every ``sync_every`` puts and pops, when a write file is finished, on
    :meth:`sync` and :meth:`close`, and on :meth:`maybe_sync` once ``sync_timeout`` seconds (on
    ``clock``) have passed since the last sync. Each sync also rewrites the meta file (temp file,
    fsync, rename).

    A record whose length prefix is outside ``[min_msg_size, max_msg_size]``, or that ends past
    the end of its file, means the rest of that file is garbage: it is renamed ``.dat.bad`` and
    reading continues with the next file, as go-diskqueue's handleReadError does.

    One deliberate difference from v1.1.0: when the reader has consumed the last record of the
    write file and the writer then rolls to a new file, go-diskqueue reads past the end of the
    old file, calls that corruption and leaves an empty ``.bad`` file behind (go-diskqueue issue
    #42). This queue recognises the finished file and deletes it instead; no record is lost
    either way and the files stay compatible. (Also, :meth:`close` fsyncs the data file, which
    v1.1.0 closes without.)

    The state, the read side and syncing are :class:`~.reader.DiskQueueReader`'s.

    Reading is two-phase, so a record is only consumed once the caller has it somewhere safe:
    :meth:`peek` returns the next record (the same one until consumed), :meth:`pop` consumes it.
    Every call blocks the calling thread for its file I/O; fsyncs happen only where listed above.
    """

    # -- writing -----------------------------------------------------------------------------

    def put(self, data: bytes) -> None:
        """Append one record.

        Raises ValueError (go-diskqueue's text) when ``len(data)`` is outside
        ``[min_msg_size, max_msg_size]``, :class:`DiskQueueClosedError` after close, and OSError
        when the write fails (nothing is then counted as written).
        """
        if self._closed:
            raise DiskQueueClosedError
        size = len(data)
        if size < self.min_msg_size or size > self.max_msg_size:
            raise ValueError(self._bad_size_text(size))
        if self._write_pos > 0 and self._write_pos + size + 4 > self.max_bytes_per_file:
            self._roll_write_file()
        self._write_at(_pack_len(size) + data)
        self._write_pos += size + 4
        self._depth += 1
        self._count += 1
        if self._count >= self.sync_every:
            self._sync_counted()

    def put_many(self, items: Sequence[bytes]) -> None:
        """Append ``items`` in order, with one write per data file they land in.

        Sizes are checked first, so a bad size writes nothing. If a write fails, the items of
        earlier files are kept (``depth`` counts them) and OSError is raised.
        """
        if self._closed:
            raise DiskQueueClosedError
        if not items:
            return
        sizes = list(map(len, items))
        lo, hi = self.min_msg_size, self.max_msg_size
        if min(sizes) < lo or max(sizes) > hi:
            raise ValueError(self._bad_size_text(next(s for s in sizes if s < lo or s > hi)))
        nbytes = sum(sizes) + 4 * len(sizes)
        if self._write_pos + nbytes <= self.max_bytes_per_file:  # all in the write file
            framed = b"".join(chain.from_iterable(zip(map(_pack_len, sizes), items, strict=True)))
            self._commit_batch([framed], nbytes, len(sizes))
        else:
            self._put_rolling(items)
        if self._count >= self.sync_every:
            self._sync_counted()

    def put_framed(self, framed: bytes, count: int) -> None:
        """Append ``count`` records given already framed as on disk (``[int32 BE length]
        [record]``, back to back): one write when they fit in the write file, else as
        :meth:`put_many` (which splits them and checks every size).

        The caller built ``framed`` itself with every length in ``[min_msg_size,
        max_msg_size]`` (a snapshot's staged records): on the one-write path they are not
        read again. Raises as :meth:`put_many`.
        """
        if self._closed:
            raise DiskQueueClosedError
        if not count:
            return
        nbytes = len(framed)
        if self._write_pos + nbytes > self.max_bytes_per_file:
            self.put_many(split_framed(framed))
            return
        self._commit_batch([framed], nbytes, count)
        if self._count >= self.sync_every:
            self._sync_counted()

    def _put_rolling(self, items: Sequence[bytes]) -> None:
        """put_many's items, rolling to a new file as each record requires."""
        limit = self.max_bytes_per_file
        parts: list[bytes] = []
        pos = self._write_pos
        start = pos
        n = 0
        for data in items:
            total = len(data) + 4
            if pos > 0 and pos + total > limit:
                if parts:
                    self._commit_batch(parts, pos - start, n)
                    parts, n = [], 0
                self._roll_write_file()
                pos = start = 0
            parts.append(_pack_len(total - 4))
            parts.append(data)
            pos += total
            n += 1
        if parts:
            self._commit_batch(parts, pos - start, n)

    def _commit_batch(self, parts: list[bytes], nbytes: int, count: int) -> None:
        self._write_at(b"".join(parts))
        self._write_pos += nbytes
        self._depth += count
        self._count += count

    def _write_at(self, buf: bytes) -> None:
        """Write ``buf`` at the write position (reopening the write file if needed)."""
        fd = self._write_fd
        if fd < 0:
            fd = self._open_write_file()
        try:
            written = os.pwrite(fd, buf, self._write_pos)
            while written < len(buf):  # a short write: the rest, as Go's File.Write loops
                written += os.pwrite(fd, memoryview(buf)[written:], self._write_pos + written)
        except OSError:
            # As writeOne: drop the handle; the next put reopens and overwrites from write_pos.
            self._close_write_file()
            raise

    def _open_write_file(self) -> int:
        name = self.file_name(self._write_file_num)
        self._write_fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        log.info("DISKQUEUE(%s): writeOne() opened %s", self.name, name)
        return self._write_fd

    def _roll_write_file(self) -> None:
        """Start the next data file; the same steps, in the same order, as writeOne's roll."""
        if self._read_file_num == self._write_file_num:
            # The reader can now tell where the finished file ends.
            self._max_bytes_per_file_read = self._write_pos
        self._write_file_num += 1
        self._write_pos = 0
        # Sync every time a new file is started (fsyncs the finished one, records the roll).
        self._sync_logged()
        self._close_write_file()

    def _bad_size_text(self, size: int) -> str:
        return (
            f"invalid message write size ({size}) "
            f"minMsgSize={self.min_msg_size} maxMsgSize={self.max_msg_size}"
        )

    # -- emptying, closing -------------------------------------------------------------------

    def empty(self) -> None:
        """Drop every record: remove the data files and the meta file (Empty/deleteAllFiles).

        Writing continues in a new file numbered after the last one. Raises OSError (after
        finishing) if a file could not be removed.
        """
        if self._closed:
            raise DiskQueueClosedError
        log.info("DISKQUEUE(%s): emptying", self.name)
        self._delete_all_files()

    def delete(self) -> None:
        """Close, removing every data file and the meta file (``.bad`` files stay).

        This is what nsqd does when a topic or channel is deleted: ``Empty()`` then
        ``Delete()``. Closing twice is harmless.
        """
        if self._closed:
            return
        log.info("DISKQUEUE(%s): deleting", self.name)
        self._closed = True
        try:
            self._delete_all_files()
        finally:
            self._close_files()

    def close(self) -> None:
        """fsync, persist the meta file and close. Closing twice is harmless."""
        if self._closed:
            return
        log.info("DISKQUEUE(%s): closing", self.name)
        self._closed = True
        self._peeked = None
        try:
            self.sync()
        finally:
            self._close_files()

    def release(self) -> None:
        """Close the files without writing anything (a start that failed must leave no trace)."""
        self._stop_background()
        self._peeked = None
        self._close_files()

    def _delete_all_files(self) -> None:
        self.settle()  # a background sync must not write the meta file back afterwards
        error = self._skip_to_next_rw_file()
        self._count = 0
        try:
            os.remove(self._meta_file_name)
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.error("DISKQUEUE(%s) failed to remove metadata file - %s", self.name, exc)
            raise
        if error is not None:
            raise error

    def __repr__(self) -> str:
        return (
            f"<DiskQueue {self.name!r} depth={self._depth} "
            f"read={self._read_file_num},{self._read_pos} "
            f"write={self._write_file_num},{self._write_pos}>"
        )


_unpack_len = struct.Struct(">i").unpack_from


def split_framed(framed: bytes) -> list[bytes]:
    """The records of ``framed`` (:meth:`DiskQueue.put_framed`); ValueError if a length
    runs past the end."""
    items = []
    off, end = 0, len(framed)
    while off < end:
        size = _unpack_len(framed, off)[0]
        if size < 0 or off + 4 + size > end:
            raise ValueError(f"invalid framed record at {off}")
        items.append(framed[off + 4 : off + 4 + size])
        off += 4 + size
    return items
