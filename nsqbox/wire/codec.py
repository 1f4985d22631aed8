"""The shape of a sans-IO stream codec (snappy, deflate): what both connections layer in.

The trio streams (:mod:`nsqbox.net.streams`) and the blocking client's socket connection
(:mod:`nsqbox.client.sync_conn`) wrap any :class:`Encoder` and :class:`Decoder`; the codecs
in :mod:`nsqbox.wire.snappy` and :mod:`nsqbox.wire.deflate` are such pairs. No I/O here.
"""

from __future__ import annotations

from typing import Protocol

__all__ = ["Decoder", "Encoder"]


class Encoder(Protocol):
    """The sending half of a sans-IO codec."""

    def encode(self, data: bytes | bytearray | memoryview) -> bytes:
        """Bytes for the wire that carry ``data`` (decodable without later input)."""
        ...


class Decoder(Protocol):
    """The receiving half of a sans-IO codec.

    :meth:`read` raises :class:`ValueError` (a subclass) on corrupt input.
    """

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes from the wire."""
        ...

    def read(self, max_bytes: int) -> bytes:
        """Up to ``max_bytes`` decoded bytes; ``b""`` when more input is needed."""
        ...

    @property
    def eof(self) -> bool:
        """True when the peer ended the encoded stream itself."""
        ...
