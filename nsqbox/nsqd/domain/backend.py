"""Where a topic or channel puts messages its memory queue has no room for.

Non-ephemeral queues spill to a disk queue in go-diskqueue's format; ephemeral
ones to :class:`DummyBackend`, which drops them (as nsqd's dummyBackendQueue).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol


class BackendQueue(Protocol):
    """What topics and channels need from a spill queue (records are message encodings)."""

    @property
    def depth(self) -> int:
        """Records held."""
        ...

    def put(self, data: bytes) -> None:
        """Append one record; OSError when it cannot be stored."""
        ...

    def put_many(self, items: Sequence[bytes]) -> None:
        """Append records in order (one write per file); OSError when they cannot be stored."""
        ...

    def pop(self) -> bytes | None:
        """Remove and return the oldest record, or None."""
        ...

    def maybe_sync(self) -> bool:
        """fsync if the sync timeout has passed since the last sync; True if it synced.

        The owner calls it periodically (go-diskqueue's sync ticker).
        """
        ...

    def empty(self) -> None:
        """Drop every record."""
        ...

    def delete(self) -> None:
        """Drop every record and remove the queue's files."""
        ...

    def close(self) -> None:
        """Persist and release resources."""
        ...

    def release(self) -> None:
        """Release resources without persisting anything (a start that failed)."""
        ...


class DummyBackend:
    """The backend of ephemeral topics and channels: holds nothing, drops what it is given."""

    depth = 0

    def put(self, data: bytes) -> None:
        """Drop ``data``."""

    def put_many(self, items: Sequence[bytes]) -> None:
        """Drop ``items``."""

    def pop(self) -> bytes | None:
        """Nothing is ever held."""
        return None

    def maybe_sync(self) -> bool:
        """Nothing to sync."""
        return False

    def empty(self) -> None:
        """Nothing to drop."""

    def delete(self) -> None:
        """Nothing to remove."""

    def close(self) -> None:
        """Nothing to persist."""

    def release(self) -> None:
        """Nothing to release."""
