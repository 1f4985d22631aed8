"""A snapshot file's I/O and gzip on a thread of its own, beside the thread that makes or
checks its lines.

Compressing or decompressing a ``.gz`` snapshot (zlib) and the reads and writes themselves
release the GIL, so a second thread does them while the first builds or decodes lines:
:class:`ReadAhead` reads a stream up to :data:`DEPTH` blocks ahead, :class:`WriteBehind`
writes up to :data:`DEPTH` chunks behind. Either holds at most that many blocks; what the
thread raises (``EOFError`` for a gzip stream cut short, ``OSError``...) is raised to the
caller by its next call, in order: a read first hands out every block read before the
error. Closing stops the thread and waits for it (a write-behind writes what it holds
first, unless the caller is failing).
"""

from __future__ import annotations

import queue
import threading
from typing import IO, Final

__all__ = ["DEPTH", "ReadAhead", "WriteBehind"]

#: Blocks a thread runs ahead (or behind) of its caller.
DEPTH: Final = 4
#: How often a blocked thread looks whether it was stopped (seconds).
_POLL: Final = 0.05


class _Stopped(Exception):
    """The other side is gone."""


def _put(items: queue.Queue[object], item: object, stop: threading.Event) -> None:
    """Put ``item``, waiting for room while ``stop`` is not set (_Stopped when it is)."""
    while not stop.is_set():
        try:
            items.put(item, timeout=_POLL)
            return
        except queue.Full:
            continue
    raise _Stopped


class ReadAhead:
    """Reads ``stream`` ``block`` bytes at a time on a thread, up to :data:`DEPTH` blocks
    ahead; :meth:`read` hands them out (``b""`` at the end). Closing closes ``stream``."""

    def __init__(self, stream: IO[bytes], block: int) -> None:
        self._stream = stream
        self._block = block
        self._items: queue.Queue[object] = queue.Queue(DEPTH)
        self._stop = threading.Event()
        self._rest = b""
        self._ended = False
        self._thread = threading.Thread(target=self._run, name="nsqbox-snapshot-read", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            while True:
                data = self._stream.read(self._block)
                _put(self._items, data, self._stop)
                if not data:
                    return
        except _Stopped:
            return
        except BaseException as exc:  # raised to the caller, in order
            try:
                _put(self._items, exc, self._stop)
            except _Stopped:
                return

    def read(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes (all of a block when ``size`` is -1); ``b""`` at the end."""
        if not self._rest:
            if self._ended:
                return b""
            item = self._items.get()
            if isinstance(item, BaseException):
                self._ended = True
                raise item
            assert isinstance(item, bytes)
            if not item:
                self._ended = True
                return b""
            self._rest = item
        if size < 0 or size >= len(self._rest):
            data, self._rest = self._rest, b""
            return data
        data, self._rest = self._rest[:size], self._rest[size:]
        return data

    def close(self) -> None:
        """Stop the thread, wait for it, and close the stream."""
        self._stop.set()
        self._thread.join()
        self._stream.close()

    def __enter__(self) -> ReadAhead:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class WriteBehind:
    """Writes to ``stream`` on a thread, up to :data:`DEPTH` chunks behind :meth:`write`.
    :meth:`close` writes what is left and raises what the thread raised; :meth:`abandon`
    drops it (the caller is failing). Neither closes ``stream``."""

    def __init__(self, stream: IO[bytes]) -> None:
        self._stream = stream
        self._items: queue.Queue[object] = queue.Queue(DEPTH)
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="nsqbox-snapshot-write", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while True:
            item = self._items.get()
            if item is None:
                return
            if self._error is None and not self._stop.is_set():
                assert isinstance(item, bytes)
                try:
                    self._stream.write(item)
                except BaseException as exc:  # raised to the caller by its next call
                    self._error = exc

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def write(self, data: bytes) -> int:
        """Queue ``data`` to be written (waiting while :data:`DEPTH` chunks are queued)."""
        self._raise()
        _put(self._items, bytes(data), self._stop)
        return len(data)

    def close(self) -> None:
        """Write what is queued and stop the thread; raise what a write raised."""
        if self._thread.is_alive():
            self._items.put(None)  # the thread takes every item: room comes
            self._thread.join()
        self._raise()

    def abandon(self) -> None:
        """Drop what is queued and stop the thread (the caller is failing)."""
        self._stop.set()
        self._items.put(None)
        self._thread.join()
