"""The receive buffer every sans-IO reader in ``nsqbox.wire`` parses from."""

from __future__ import annotations


class ReceiveBuffer:
    """Bytes received and not yet consumed: a bytearray plus a read position.

    Consumed bytes are dropped lazily (when they are at least half the buffer), so
    parsing many small records from one large chunk stays linear.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the connection."""
        if self._pos and self._pos >= len(self._buf) >> 1:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def buffered(self) -> int:
        """Bytes received and not yet consumed."""
        return len(self._buf) - self._pos

    def take_buffered(self) -> bytes:
        """Remove and return the unconsumed bytes.

        After a TLS or compression upgrade they belong to the new layer (the
        client guide's "read to empty").
        """
        rest = bytes(self._buf[self._pos :])
        self._buf.clear()
        self._pos = 0
        return rest
