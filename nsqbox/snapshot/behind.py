"""A ``.gz`` snapshot compressed and written on a thread of its own, beside the thread that
makes its lines.

zlib releases the GIL while it compresses, so a second thread does it while the first builds
lines: :class:`WriteBehind` writes up to :data:`DEPTH` chunks behind its caller, holding at
most that many. What the thread raises (``OSError``...) is raised to the caller by its next
call. Closing writes what it holds and waits for the thread; abandoning (the caller is
failing) drops it.

Reading a ``.gz`` snapshot stays in one thread: there ``gzip`` decompresses in many small
calls, each taking the GIL back from the thread decoding lines, which cost that thread more
CPU than the decompression it saved (``up --load`` of 1,000,000 messages: 0.5 s more).
"""

from __future__ import annotations

import queue
import threading
from typing import IO, Final

__all__ = ["DEPTH", "WriteBehind"]

#: Chunks the thread runs behind its caller.
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
