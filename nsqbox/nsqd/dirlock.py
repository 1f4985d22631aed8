"""An exclusive lock on nsqd's ``--data-path``, so two daemons never share one (internal/dirlock).

The lock is ``flock(LOCK_EX | LOCK_NB)`` on an open descriptor of the directory itself, exactly as
real nsqd takes it, so nsqbox and nsqd also exclude each other. The kernel drops it when the
process dies, so a crash never leaves a stale lock behind.
"""

from __future__ import annotations

import fcntl
import os
from types import TracebackType

__all__ = ["DirLock", "DirLockError"]


def _go_strerror(errno: int) -> str:
    # Go's syscall.Errno strings are the C ones with a lower-case first letter.
    text = os.strerror(errno)
    return text[:1].lower() + text[1:]


class DirLockError(OSError):
    """The data path could not be locked; the text is nsqd's startup error."""

    def __init__(self, message: str, errno: int | None) -> None:
        super().__init__(message)
        self.errno = errno


class DirLock:
    """An exclusive, non-blocking lock on a directory."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._fd = -1

    @property
    def locked(self) -> bool:
        """True while this object holds the lock."""
        return self._fd >= 0

    def lock(self) -> None:
        """Take the lock, or raise :class:`DirLockError` at once if anyone holds it.

        The message matches nsqd's, e.g. ``failed to lock data-path: cannot flock directory
        /data - resource temporarily unavailable (possibly in use by another instance of nsqd)``.
        """
        if self._fd >= 0:
            return
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except OSError as exc:
            reason = f"open {self.path}: {_go_strerror(exc.errno or 0)}"
            raise DirLockError(f"failed to lock data-path: {reason}", exc.errno) from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            reason = (
                f"cannot flock directory {self.path} - {_go_strerror(exc.errno or 0)} "
                "(possibly in use by another instance of nsqd)"
            )
            raise DirLockError(f"failed to lock data-path: {reason}", exc.errno) from exc
        self._fd = fd

    def unlock(self) -> None:
        """Release the lock (a no-op when it is not held)."""
        if self._fd < 0:
            return
        fd, self._fd = self._fd, -1
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def __enter__(self) -> DirLock:
        self.lock()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unlock()
