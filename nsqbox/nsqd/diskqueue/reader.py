"""The state and read side of :class:`~.queue.DiskQueue`: positions, reading, repairs, syncs.

:class:`DiskQueueReader` holds what go-diskqueue persists (depth, read and write positions),
reads records through a chunked read buffer, repairs what it finds wrong on the way (a corrupt
file is renamed ``.bad``, a depth at the tail is reset), and syncs the meta file.
:class:`~.queue.DiskQueue` adds writing, emptying and closing; only it is meant to be used.
"""

from __future__ import annotations

import logging
import os
import random
import struct
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from .files import (
    QueueState,
    count_unread,
    data_file_numbers,
    load_state,
    write_meta_file,
)
from .sync import BackgroundSyncs

if TYPE_CHECKING:
    from concurrent.futures import Executor

__all__ = ["DiskQueueReader"]

# The disk queue's one logger, whichever of its modules logs.
log = logging.getLogger("nsqbox.nsqd.diskqueue")

_LEN = struct.Struct(">i")
_unpack_len = _LEN.unpack_from

# Read this much at a time: large enough that a read syscall serves hundreds of small messages,
# small enough that a few hundred channels reading from disk at once stay cheap in memory.
READ_CHUNK = 128 * 1024
# Temp-file names come from a generator of our own, so writing metadata never moves
# the global random state of the application or test suite nsqd runs in.
_tmp_names = random.Random()


class _ReadError(Exception):
    """A record could not be read: the file is corrupt (or gone) from this point on."""


class DiskQueueReader:
    """A disk queue's state, its read side and its syncs (see :class:`~.queue.DiskQueue`).

    Reading is two-phase, so a record is only consumed once the caller has it somewhere safe:
    :meth:`peek` returns the next record (the same one until consumed), :meth:`pop` consumes it.
    """

    def __init__(
        self,
        name: str,
        data_path: str,
        max_bytes_per_file: int,
        min_msg_size: int,
        max_msg_size: int,
        sync_every: int,
        sync_timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
        syncer: Executor | None = None,
    ) -> None:
        self.name = name
        self.data_path = data_path
        self.max_bytes_per_file = max_bytes_per_file
        self.min_msg_size = min_msg_size
        self.max_msg_size = max_msg_size
        self.sync_every = sync_every
        self.sync_timeout = sync_timeout
        self._clock = clock

        # The state go-diskqueue persists in the meta file.
        self._depth = 0
        self._read_file_num = 0
        self._read_pos = 0
        self._write_file_num = 0
        self._write_pos = 0
        # Where the reader will be once the peeked record is popped.
        self._next_read_file_num = 0
        self._next_read_pos = 0
        # Size of the file being read, once it is known to be complete (maxBytesPerFileRead).
        self._max_bytes_per_file_read = 0

        self._read_fd = -1
        self._write_fd = -1
        # Bytes of the read file starting at file offset _rbuf_pos.
        self._rbuf = b""
        self._rbuf_pos = 0
        self._peeked: bytes | None = None

        self._count = 0  # puts and pops since the last sync
        self._need_sync = False
        self._last_sync = clock()
        self._closed = False
        #: The counted syncs off the caller's thread (None: in place, as every other sync).
        self._syncs = (
            None if syncer is None else BackgroundSyncs(name, syncer, self._persist_metadata)
        )

        self._file_prefix = os.path.join(data_path, f"{name}.diskqueue.")
        self._meta_file_name = os.path.join(data_path, f"{name}.diskqueue.meta.dat")
        self._retrieve_metadata()

    # -- names -------------------------------------------------------------------------------

    def file_name(self, file_num: int) -> str:
        """Path of data file number ``file_num``."""
        return f"{self._file_prefix}{file_num:06d}.dat"

    @property
    def meta_file_name(self) -> str:
        """Path of the meta file."""
        return self._meta_file_name

    # -- state -------------------------------------------------------------------------------

    @property
    def depth(self) -> int:
        """Records written and not yet popped (a peeked record still counts)."""
        return self._depth

    @property
    def positions(self) -> tuple[int, int, int, int]:
        """``(read_file_num, read_pos, write_file_num, write_pos)``, as the meta file has them."""
        return (self._read_file_num, self._read_pos, self._write_file_num, self._write_pos)

    @property
    def closed(self) -> bool:
        """True after :meth:`close` or :meth:`delete`."""
        return self._closed

    # -- reading -----------------------------------------------------------------------------

    def peek(self) -> bytes | None:
        """The next record without consuming it, or ``None`` when the queue is drained.

        Calling it again returns the same record until :meth:`pop` consumes it. Corrupt files met
        on the way are renamed ``.bad`` and skipped.
        """
        if self._peeked is not None or self._closed:
            return self._peeked
        while self._read_file_num < self._write_file_num or self._read_pos < self._write_pos:
            try:
                data = self._read_one()
            except (_ReadError, OSError) as exc:
                log.error(
                    "DISKQUEUE(%s) reading at %d of %s - %s",
                    self.name,
                    self._read_pos,
                    self.file_name(self._read_file_num),
                    exc,
                )
                self._handle_read_error()
                continue
            if data is not None:
                self._peeked = data
                break
        else:
            # At the tail: a depth still above 0 would have callers read forever.
            self._check_tail_corruption()
        if self._need_sync:
            self._sync_logged()
        return self._peeked

    def pop(self) -> bytes | None:
        """Consume and return the next record, or ``None`` when the queue is drained."""
        if self._peeked is None and not self._need_sync and self._count + 1 < self.sync_every:
            data = self._pop_buffered()
            if data is not None:
                return data
        data = self.peek()
        if data is None:
            return None
        self._peeked = None
        self._move_forward()
        self._count += 1
        if self._need_sync or self._count >= self.sync_every:
            self._sync_counted()
        return data

    def _pop_buffered(self) -> bytes | None:
        """The next record if popping it is only taking it from the read buffer, else None.

        That is: it lies whole in the buffer, not at its end; it neither finishes its file
        nor reaches the tail (which have more to do); its size is valid; the depth stays
        above 0. Everything else goes through :meth:`peek`, and this gives the same result.
        """
        buf = self._rbuf
        pos = self._read_pos
        off = pos - self._rbuf_pos
        if off < 0 or off + 4 > len(buf) or self._depth <= 1 or self._closed:
            return None
        (size,) = _unpack_len(buf, off)
        end = off + 4 + size
        after = pos + 4 + size
        if (
            end >= len(buf)
            or size < self.min_msg_size
            or size > self.max_msg_size
            or after
            >= (
                self._max_bytes_per_file_read
                if self._read_file_num < self._write_file_num
                else self._write_pos
            )
        ):
            return None
        self._read_pos = self._next_read_pos = after
        self._depth -= 1
        self._count += 1
        return buf[off + 4 : end]

    def _read_one(self) -> bytes | None:
        """Read the record at the read position; ``None`` if it skipped a finished file instead."""
        fd = self._read_fd
        if fd < 0:
            fd = self._open_read_file()
        if self._read_file_num < self._write_file_num:
            limit = self._max_bytes_per_file_read
            if self._read_pos >= limit:
                # A finished file with nothing left in it (go-diskqueue issue #42): move on.
                self._finish_read_file()
                return None
        else:
            # Never buffer past write_pos: bytes there are not records (yet).
            limit = self._write_pos
        pos = self._read_pos
        buf = self._rbuf
        off = pos - self._rbuf_pos
        if off < 0 or off + 4 > len(buf):
            buf, off = self._fill(fd, pos, 4, limit), 0
        (size,) = _unpack_len(buf, off)
        if size < self.min_msg_size or size > self.max_msg_size:
            # Corrupt; no reasonable guarantee where a new record would begin.
            self._close_read_file()
            raise _ReadError(f"invalid message read size ({size})")
        end = off + 4 + size
        if end > len(buf):
            buf, off = self._fill(fd, pos, 4 + size, limit), 0
            end = 4 + size
        data = buf[off + 4 : end]
        if end == len(buf):
            self._rbuf = b""  # all consumed: let the chunk go
            self._rbuf_pos = pos + 4 + size
        self._next_read_pos = pos + 4 + size
        self._next_read_file_num = self._read_file_num
        # Only a complete file can be finished, and its real size is what counts, not
        # max_bytes_per_file (which may have changed since it was written).
        if (
            self._read_file_num < self._write_file_num
            and self._next_read_pos >= self._max_bytes_per_file_read
        ):
            self._close_read_file()
            self._next_read_file_num += 1
            self._next_read_pos = 0
        return data

    def _open_read_file(self) -> int:
        name = self.file_name(self._read_file_num)
        fd = os.open(name, os.O_RDONLY | os.O_CLOEXEC)
        log.info("DISKQUEUE(%s): readOne() opened %s", self.name, name)
        self._read_fd = fd
        self._rbuf = b""
        self._rbuf_pos = self._read_pos
        self._max_bytes_per_file_read = self.max_bytes_per_file
        if self._read_file_num < self._write_file_num:
            try:
                self._max_bytes_per_file_read = os.fstat(fd).st_size
            except OSError:
                pass  # as Go: fall back to max_bytes_per_file
        return fd

    def _fill(self, fd: int, pos: int, need: int, limit: int) -> bytes:
        """Read at least ``need`` bytes at ``pos`` (up to a chunk, not past ``limit``)."""
        want = max(min(READ_CHUNK, limit - pos), need)
        parts: list[bytes] = []
        got = 0
        while got < want:
            chunk = os.pread(fd, want - got, pos + got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        buf = parts[0] if len(parts) == 1 else b"".join(parts)
        if got < need:
            self._close_read_file()
            raise _ReadError("EOF" if got == 0 else "unexpected EOF")
        self._rbuf = buf
        self._rbuf_pos = pos
        return buf

    def _move_forward(self) -> None:
        """Commit the peeked record (moveForward)."""
        old_read_file_num = self._read_file_num
        self._read_file_num = self._next_read_file_num
        self._read_pos = self._next_read_pos
        self._depth -= 1
        if old_read_file_num != self._read_file_num:
            self._need_sync = True  # sync every time reading moves to a new file
            self._remove_quietly(self.file_name(old_read_file_num))
        self._check_tail_corruption()

    def _finish_read_file(self) -> None:
        """Leave a fully read, complete file: delete it and go on with the next one."""
        self._close_read_file()
        self._remove_quietly(self.file_name(self._read_file_num))
        self._jump_to_next_read_file()

    def _handle_read_error(self) -> None:
        """Rename the unreadable file ``.bad`` and jump to the next one (handleReadError)."""
        self._close_read_file()
        if self._read_file_num == self._write_file_num:
            # The write file is unreadable too: start a fresh one for writes.
            self._close_write_file()
            self._write_file_num += 1
            self._write_pos = 0
        bad = self.file_name(self._read_file_num)
        log.warning("DISKQUEUE(%s) jump to next file and saving bad file as %s.bad", self.name, bad)
        try:
            os.rename(bad, bad + ".bad")
        except FileNotFoundError:
            # A missing file: go on with the next one that exists, not one number at a time
            # (a corrupt meta file can put the write file numbers away).
            later = [
                n
                for n in data_file_numbers(self.data_path, self.name)
                if self._read_file_num < n < self._write_file_num
            ]
            self._read_file_num = (later[0] if later else self._write_file_num) - 1
        except OSError as exc:
            log.error("DISKQUEUE(%s) failed to rename bad diskqueue file - %s", self.name, exc)
        self._jump_to_next_read_file()

    def _jump_to_next_read_file(self) -> None:
        self._read_file_num += 1
        self._read_pos = 0
        self._next_read_file_num = self._read_file_num
        self._next_read_pos = 0
        self._need_sync = True
        self._check_tail_corruption()

    def _check_tail_corruption(self) -> None:
        """At the tail, force depth to 0 and repair impossible positions (checkTailCorruption)."""
        if self._read_file_num < self._write_file_num or self._read_pos < self._write_pos:
            if self._depth <= 0:
                self._recount_depth()
            return
        if self._depth != 0:
            why = "metadata corruption" if self._depth < 0 else "data loss"
            log.error(
                "DISKQUEUE(%s) depth %d at tail, %s, resetting 0", self.name, self._depth, why
            )
            self._depth = 0
            self._need_sync = True
        if self._read_file_num != self._write_file_num or self._read_pos != self._write_pos:
            log.error("DISKQUEUE(%s) read past write, corruption, skipping to new file", self.name)
            self._skip_to_next_rw_file()
            self._need_sync = True

    # -- syncing -----------------------------------------------------------------------------

    def sync(self) -> None:
        """fsync the write file and persist the meta file. Raises OSError on failure."""
        self.settle()
        if self._write_fd >= 0:
            try:
                os.fsync(self._write_fd)
            except OSError:
                self._close_write_file()
                raise
        self._persist_metadata()
        self._need_sync = False
        self._count = 0
        self._last_sync = self._clock()

    def maybe_sync(self) -> bool:
        """Sync if anything happened since the last sync and ``sync_timeout`` has passed.

        The owner calls this periodically (go-diskqueue runs a ticker per queue). Returns True
        if it synced.
        """
        if self._closed or not (self._count or self._need_sync):
            return False
        if self._clock() - self._last_sync < self.sync_timeout:
            return False
        self._sync_logged()
        return True

    def _sync_counted(self) -> None:
        """The sync ``sync_every`` reads and writes call for: off the loop if it can; logged."""
        if self._syncs is None:
            self._sync_logged()
            return
        self._syncs.start(self._write_fd, self._state())
        self._need_sync = False
        self._count = 0
        self._last_sync = self._clock()

    def settle(self) -> None:
        """Wait for the background sync, if one is running (it logs its own failure)."""
        if self._syncs is not None:
            self._syncs.settle()

    def _stop_background(self) -> None:
        """No background sync writes from now on (one that is writing finishes first)."""
        if self._syncs is not None:
            self._syncs.stop()
        self._closed = True

    def _sync_logged(self) -> None:
        """Sync where go-diskqueue's ioLoop would; like it, log failures rather than raise."""
        try:
            self.sync()
        except OSError as exc:
            log.error("DISKQUEUE(%s) failed to sync - %s", self.name, exc)
            self._count = 0

    def _state(self) -> QueueState:
        return QueueState(
            self._depth, self._read_file_num, self._read_pos, self._write_file_num, self._write_pos
        )

    def _persist_metadata(self, state: QueueState | None = None) -> None:
        """Write the meta file atomically: temp file, fsync, rename (persistMetaData)."""
        if state is None:
            state = self._state()
        # Go's temp name: fmt.Sprintf("%s.%d.tmp", fileName, rand.Int()), rand.Int() in [0, 2**63).
        tmp = f"{self._meta_file_name}.{_tmp_names.getrandbits(63)}.tmp"
        write_meta_file(self._meta_file_name, tmp, state)

    def _retrieve_metadata(self) -> None:
        """Load the meta file, repaired where it contradicts the data files (retrieveMetaData)."""
        state = load_state(self.data_path, self.name, self.min_msg_size, self.max_msg_size)
        self._depth = state.depth
        self._read_file_num = self._next_read_file_num = state.read_file_num
        self._read_pos = self._next_read_pos = state.read_pos
        self._write_file_num, self._write_pos = state.write_file_num, state.write_pos

    def _recount_depth(self) -> None:
        """Depth says nothing is left while records are: count them in the files."""
        state = self._state()
        depth = count_unread(self.data_path, self.name, state, self.min_msg_size, self.max_msg_size)
        if depth != self._depth:
            msg = "DISKQUEUE(%s) depth %d with records left to read, counted %d in the files"
            log.error(msg, self.name, self._depth, depth)
            self._depth = depth
            self._need_sync = True

    # -- files -------------------------------------------------------------------------------

    def _skip_to_next_rw_file(self) -> OSError | None:
        """Remove every data file and move both ends to a fresh file (skipToNextRWFile)."""
        self._close_files()
        error: OSError | None = None
        for num in range(self._read_file_num, self._write_file_num + 1):
            try:
                os.remove(self.file_name(num))
            except FileNotFoundError:
                pass
            except OSError as exc:
                log.error("DISKQUEUE(%s) failed to remove data file - %s", self.name, exc)
                error = exc
        self._write_file_num += 1
        self._write_pos = 0
        self._read_file_num = self._write_file_num
        self._read_pos = 0
        self._next_read_file_num = self._write_file_num
        self._next_read_pos = 0
        self._depth = 0
        self._peeked = None
        return error

    def _remove_quietly(self, path: str) -> None:
        try:
            os.remove(path)
        except OSError as exc:
            log.error("DISKQUEUE(%s) failed to Remove(%s) - %s", self.name, path, exc)

    def _close_read_file(self) -> None:
        if self._read_fd >= 0:
            os.close(self._read_fd)
            self._read_fd = -1
        self._rbuf = b""

    def _close_write_file(self) -> None:
        if self._write_fd >= 0:
            os.close(self._write_fd)
            self._write_fd = -1

    def _close_files(self) -> None:
        self._close_read_file()
        self._close_write_file()
