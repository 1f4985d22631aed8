"""Frames: ``[4-byte size][4-byte type][data]``, big-endian, size counting type + data.

Also the ``"  V2"`` magic and the sans-IO :class:`FrameReader` a client uses to
turn received bytes into frames.
"""

from __future__ import annotations

import struct
from enum import IntEnum
from typing import Final

from .buffer import ReceiveBuffer

MAGIC_V2: Final = b"  V2"

FRAME_HEADER = struct.Struct(">ii")
HEARTBEAT: Final = b"_heartbeat_"
OK: Final = b"OK"
CLOSE_WAIT: Final = b"CLOSE_WAIT"


class FrameType(IntEnum):
    """The type field of a frame."""

    RESPONSE = 0
    ERROR = 1
    MESSAGE = 2


def encode_frame(frame_type: int, data: bytes) -> bytes:
    """One frame, ready for the wire."""
    return FRAME_HEADER.pack(len(data) + 4, frame_type) + data


def encode_response(data: bytes) -> bytes:
    """A response frame (``OK``, ``CLOSE_WAIT``, ``_heartbeat_``, JSON...)."""
    return encode_frame(FrameType.RESPONSE, data)


def encode_error(data: bytes) -> bytes:
    """An error frame (``E_CODE description``)."""
    return encode_frame(FrameType.ERROR, data)


class FrameTooLarge(Exception):
    """A frame header announced more bytes than the reader accepts."""


class FrameReader(ReceiveBuffer):
    """Incrementally split received bytes into ``(frame_type, data)`` tuples.

    Feed bytes with :meth:`receive_data`; :meth:`frames` returns every complete
    frame buffered so far. Sizes below 4 or above ``max_frame_size`` raise
    :class:`FrameTooLarge` (the stream cannot be resynchronised after that).
    """

    def __init__(self, max_frame_size: int = 64 * 1024 * 1024) -> None:
        super().__init__()
        self._max = max_frame_size

    def next_frame(self) -> tuple[int, bytes] | None:
        """The next complete frame, or None when more data is needed."""
        buf = self._buf
        pos = self._pos
        if len(buf) - pos < 8:
            return None
        size, frame_type = FRAME_HEADER.unpack_from(buf, pos)
        if size < 4 or size > self._max:
            raise FrameTooLarge(f"invalid frame size {size}")
        end = pos + 4 + size
        if len(buf) < end:
            return None
        data = bytes(buf[pos + 8 : end])
        self._pos = end
        return frame_type, data

    def frames(self) -> list[tuple[int, bytes]]:
        """Every complete frame buffered so far, in order."""
        out = []
        try:
            while (frame := self.next_frame()) is not None:
                out.append(frame)
        except FrameTooLarge:
            if not out:
                raise
            # hand over the good frames now; the bad one raises on the next call
        return out
