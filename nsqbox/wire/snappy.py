"""Snappy stream compression (the snappy *framing format*), sans-IO.

After an IDENTIFY that negotiated ``snappy``, both directions of an NSQ
connection are a snappy framed stream (nsqd wraps its socket in Go's
``snappy.NewReader`` / ``snappy.NewWriter``). The stream is a sequence of
chunks ``[1-byte type][3-byte little-endian length][payload]``:

=========  ==================================================================
type       meaning
=========  ==================================================================
``0xff``   stream identifier, payload ``sNaPpY``; must come first, may repeat
``0x00``   compressed data: ``[4-byte masked CRC-32C][snappy block]``
``0x01``   uncompressed data: ``[4-byte masked CRC-32C][bytes]``
``0xfe``   padding (skipped)
``0x80``+  reserved skippable chunks (skipped)
``0x02``+  reserved unskippable chunks (an error)
=========  ==================================================================

A data chunk holds at most 65536 uncompressed bytes. The block codec and the
checksums are python-snappy's (which uses cramjam); this module adds what an
incremental peer needs: splitting arbitrary reads into whole chunks, the same
validation Go's reader applies, and an output bound per :meth:`SnappyDecoder.read`.
"""

from __future__ import annotations

from typing import Final

import snappy

__all__ = ["STREAM_IDENTIFIER", "SnappyDecoder", "SnappyEncoder", "SnappyError"]

#: The stream identifier chunk every snappy framed stream starts with.
STREAM_IDENTIFIER: Final = b"\xff\x06\x00\x00sNaPpY"
#: Largest uncompressed payload of one data chunk.
MAX_BLOCK_SIZE: Final = 65536
#: Largest compressed chunk Go accepts: snappy's MaxEncodedLen(65536) + the checksum.
MAX_COMPRESSED_CHUNK: Final = 32 + MAX_BLOCK_SIZE + MAX_BLOCK_SIZE // 6 + 4

_COMPRESSED, _UNCOMPRESSED, _PADDING, _IDENTIFIER = 0x00, 0x01, 0xFE, 0xFF
_HEADER_SIZE: Final = 4
_CHECKSUM_SIZE: Final = 4


class SnappyError(ValueError):
    """The peer sent something that is not a valid snappy framed stream."""


class SnappyEncoder:
    """Compress outgoing bytes into snappy framed chunks.

    The first non-empty :meth:`encode` output starts with the stream
    identifier; each call returns whole chunks, so the result can be written
    straight to the connection (nsqd flushes after every write the same way).
    """

    def __init__(self) -> None:
        self._compressor = snappy.StreamCompressor()

    def encode(self, data: bytes | bytearray | memoryview) -> bytes:
        """Whole chunks carrying ``data`` (``b""`` for empty input)."""
        if not data:
            return b""
        # cramjam accepts only bytes objects
        chunk: bytes = self._compressor.add_chunk(bytes(data))
        return chunk


class SnappyDecoder:
    """Decompress a snappy framed stream that arrives in arbitrary pieces.

    Feed bytes with :meth:`receive_data`; :meth:`read` returns decompressed
    bytes from the whole chunks received so far (``b""`` when it needs more
    input). Corrupt input raises :class:`SnappyError`; the stream cannot be
    resynchronised after that.
    """

    def __init__(self) -> None:
        self._buf = bytearray()
        self._pos = 0
        self._out = bytearray()
        self._started = False

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        """Append bytes read from the connection."""
        if self._pos and self._pos >= len(self._buf) >> 1:
            del self._buf[: self._pos]
            self._pos = 0
        self._buf += data

    @property
    def eof(self) -> bool:
        """Always False: a snappy stream has no end marker (the connection ends it)."""
        return False

    @property
    def buffered(self) -> int:
        """Input bytes received and not yet decoded (a partial chunk)."""
        return len(self._buf) - self._pos

    def read(self, max_bytes: int = 1 << 20) -> bytes:
        """Up to ``max_bytes`` decompressed bytes; ``b""`` when more input is needed."""
        out = self._out
        # loop: chunks that decode to nothing (empty data chunks) must not read as "need more"
        while len(out) < max_bytes and self._decode(max_bytes - len(out)):
            pass
        if len(out) <= max_bytes:
            data = bytes(out)
            out.clear()
        else:
            data = bytes(out[:max_bytes])
            del out[:max_bytes]
        return data

    def _decode(self, wanted: int) -> bool:
        """Decompress whole chunks until about ``wanted`` input bytes are used; False if none."""
        buf = self._buf
        start = pos = self._pos
        end = len(buf)
        data_chunks = False
        # stop at the budget only once some data was taken: b"" must mean "need more input"
        while end - pos >= _HEADER_SIZE and (pos - start < wanted or not data_chunks):
            kind = buf[pos]
            length = buf[pos + 1] | buf[pos + 2] << 8 | buf[pos + 3] << 16
            if kind == _COMPRESSED:
                if length < _CHECKSUM_SIZE or length > MAX_COMPRESSED_CHUNK:
                    raise SnappyError(f"corrupt input: compressed chunk of {length} bytes")
            elif kind == _UNCOMPRESSED:
                if length < _CHECKSUM_SIZE or length > MAX_BLOCK_SIZE + _CHECKSUM_SIZE:
                    raise SnappyError(f"corrupt input: uncompressed chunk of {length} bytes")
            elif kind == _IDENTIFIER:
                if length != 6:
                    raise SnappyError("corrupt input: bad stream identifier length")
            elif kind < 0x80:
                raise SnappyError(f"unsupported input: reserved chunk type {kind:#04x}")
            if not self._started and kind != _IDENTIFIER:
                # Go's reader: the first chunk must be the stream identifier
                raise SnappyError("corrupt input: stream does not start with sNaPpY")
            if end - pos < _HEADER_SIZE + length:
                break
            if kind == _IDENTIFIER:
                if buf[pos + 4 : pos + 10] != b"sNaPpY":
                    raise SnappyError("corrupt input: bad stream identifier")
                self._started = True
            elif kind <= _UNCOMPRESSED:
                data_chunks = True
            pos += _HEADER_SIZE + length
        if pos == start:
            return False
        self._pos = pos
        if not data_chunks:
            return True  # identifiers, padding and skippable chunks only
        chunks = bytes(buf[start:pos])
        if not chunks.startswith(STREAM_IDENTIFIER):
            # python-snappy decodes one stream per call; restate the (already seen) identifier
            chunks = STREAM_IDENTIFIER + chunks
        try:
            decoded: bytes = snappy.StreamDecompressor().decompress(chunks)
        except Exception as exc:  # python-snappy lets cramjam's DecompressionError through
            raise SnappyError(str(exc)) from exc
        self._out += decoded
        return True
