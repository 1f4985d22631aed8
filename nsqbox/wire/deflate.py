"""Deflate stream compression (raw RFC 1951, no zlib or gzip header), sans-IO.

After an IDENTIFY that negotiated ``deflate``, both directions of an NSQ
connection are one raw deflate stream each (nsqd wraps its socket in Go's
``flate.NewReader`` / ``flate.NewWriter(level)``). nsqd flushes its writer
after every write with a sync flush (``Z_SYNC_FLUSH``: an empty stored block
that ends on a byte boundary), so the peer can decode everything sent so far;
:class:`DeflateEncoder` does the same. Neither side ever finishes the stream
in normal operation; if a peer does (some clients do on close), the decoder
reports :attr:`DeflateDecoder.eof` and ignores what follows, as Go's reader
returns EOF there.
"""

from __future__ import annotations

import zlib

__all__ = ["DeflateDecoder", "DeflateEncoder", "DeflateError"]

_RAW = -zlib.MAX_WBITS  # negative window bits: raw deflate, no header or checksum


class DeflateError(ValueError):
    """The peer sent something that is not a valid raw deflate stream."""


class DeflateEncoder:
    """Compress outgoing bytes at ``level`` (0-9), sync-flushing after each call."""

    def __init__(self, level: int = 6) -> None:
        if not 0 <= level <= 9:
            raise ValueError(f"deflate level must be in [0, 9], not {level}")
        self.level = level
        self._compressor = zlib.compressobj(level, zlib.DEFLATED, _RAW)

    def encode(self, data: bytes | bytearray | memoryview) -> bytes:
        """Compressed bytes for ``data``, decodable on their own (``b""`` for empty input)."""
        if not data:
            return b""
        compressor = self._compressor
        return compressor.compress(data) + compressor.flush(zlib.Z_SYNC_FLUSH)

    def finish(self) -> bytes:
        """End the stream (the final block); nothing may be encoded afterwards."""
        return self._compressor.flush(zlib.Z_FINISH)


class DeflateDecoder:
    """Decompress a raw deflate stream that arrives in arbitrary pieces.

    Feed bytes with :meth:`receive_data`; :meth:`read` returns up to
    ``max_bytes`` of decompressed output (``b""`` when it needs more input).
    Output is produced lazily, so a small, highly compressed input cannot make
    one call allocate more than ``max_bytes``. Corrupt input raises
    :class:`DeflateError`.
    """

    def __init__(self) -> None:
        self._decompressor = zlib.decompressobj(_RAW)
        self._pending = b""  # input not yet handed to zlib (or left over by max_bytes)
        self._more = False  # the last read stopped at max_bytes: zlib may hold more output

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the connection."""
        if self._decompressor.eof:
            return  # after the final block nothing belongs to the stream
        self._pending += data

    @property
    def eof(self) -> bool:
        """True once the peer finished the stream (its final block was decoded)."""
        return self._decompressor.eof

    def read(self, max_bytes: int = 1 << 20) -> bytes:
        """Up to ``max_bytes`` decompressed bytes; ``b""`` when more input is needed."""
        decompressor = self._decompressor
        if decompressor.eof or not (self._pending or self._more):
            return b""
        try:
            out = decompressor.decompress(self._pending, max_bytes)
        except zlib.error as exc:
            raise DeflateError(str(exc)) from exc
        self._pending = decompressor.unconsumed_tail
        self._more = len(out) == max_bytes
        return out
