"""The message encoding shared by delivery frames and the disk queue.

::

    [x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x][x]...
    |       (int64)        ||    ||      (hex string encoded in ASCII)           || (binary)
    |       8-byte         ||    ||                 16-byte                      || N-byte
    ------------------------------------------------------------------------------------...
      nanosecond timestamp    ^^                   message ID                       message body
                           (uint16)
                            2-byte
                           attempts
"""

from __future__ import annotations

import struct
from typing import Final, NamedTuple

MSG_ID_LENGTH: Final = 16
MIN_VALID_MSG_LENGTH: Final = MSG_ID_LENGTH + 8 + 2

MESSAGE_HEADER = struct.Struct(">qH")
#: A whole message frame header: size, frame type (2), timestamp, attempts: what a
#: delivery adds on the wire to the message's id and body (``.size``, 18 bytes).
MESSAGE_FRAME_HEADER = struct.Struct(">iiqH")
#: A frame's size field counts what follows it: for ``data`` (id + body), this plus
#: ``len(data)`` (the header without the size field itself).
MESSAGE_FRAME_SIZE_EXTRA: Final = MESSAGE_FRAME_HEADER.size - 4


class DecodedMessage(NamedTuple):
    """A message as read off the wire or the disk."""

    timestamp: int
    attempts: int
    id: bytes
    body: bytes


def encode_message(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    """The message encoding (without a frame or a disk-queue length prefix)."""
    return MESSAGE_HEADER.pack(timestamp, attempts) + msg_id + body


def encode_message_frame(timestamp: int, attempts: int, msg_id: bytes, body: bytes) -> bytes:
    """A complete message frame (type 2)."""
    size = len(msg_id) + len(body) + MESSAGE_FRAME_SIZE_EXTRA
    return MESSAGE_FRAME_HEADER.pack(size, 2, timestamp, attempts) + msg_id + body


def decode_message(data: bytes) -> DecodedMessage:
    """Parse the message encoding; ValueError when it is too short."""
    if len(data) < MIN_VALID_MSG_LENGTH:
        raise ValueError(f"invalid message buffer size ({len(data)})")
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
    return DecodedMessage(timestamp, attempts, bytes(data[10:26]), bytes(data[26:]))
