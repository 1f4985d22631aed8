"""A disk queue's counted syncs off the caller's thread (nsqd's node has one syncer thread).

Every ``--sync-every`` reads and writes a disk queue syncs: fsync the write file, then write
the meta file. In go-diskqueue that runs on the queue's own goroutine; here the caller is the
event loop, so :class:`BackgroundSyncs` runs it on an executor: it fsyncs a duplicate of the
write file's descriptor and writes the state as of the call, in that order. The queue waits for
a running one (:meth:`~BackgroundSyncs.settle`) before any other sync, and after
:meth:`~BackgroundSyncs.stop` (a crash, a failed start) none writes to the data path again.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import Executor, Future

    from .files import QueueState

__all__ = ["BackgroundSyncs"]

log = logging.getLogger("nsqbox.nsqd.diskqueue")


class BackgroundSyncs:
    """One queue's syncs on ``executor``; ``persist`` writes the meta file for a state."""

    def __init__(
        self, name: str, executor: Executor, persist: Callable[[QueueState], None]
    ) -> None:
        self.name = name
        self._executor = executor
        self._persist = persist
        #: The sync running there, if any: the next sync of any kind waits for it first.
        self._running: Future[None] | None = None
        #: Held while a sync writes; stop() takes it, so none writes after it returns.
        self._lock = threading.Lock()
        self._stopped = False

    def start(self, write_fd: int, state: QueueState) -> None:
        """Sync the write file (``write_fd``, -1 for none) and ``state``, after the last sync."""
        self.settle()
        fd = os.dup(write_fd) if write_fd >= 0 else -1
        self._running = self._executor.submit(self._run, fd, state)

    def _run(self, fd: int, state: QueueState) -> None:
        try:
            with self._lock:
                if self._stopped:  # released meanwhile: nothing more goes to the data path
                    return
                if fd >= 0:
                    os.fsync(fd)
                self._persist(state)
        except OSError as exc:
            log.error("DISKQUEUE(%s) failed to sync - %s", self.name, exc)
        finally:
            if fd >= 0:
                os.close(fd)

    def settle(self) -> None:
        """Wait for the running sync, if there is one (it logs its own failure)."""
        if self._running is not None:
            self._running.result()
            self._running = None

    def stop(self) -> None:
        """No sync writes from now on (one that is writing finishes first)."""
        with self._lock:
            self._stopped = True
