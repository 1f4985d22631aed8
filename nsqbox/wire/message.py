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
#: A whole message frame header: size, frame type (2), timestamp, attempts.
MESSAGE_FRAME_HEADER = struct.Struct(">iiqH")


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
    return MESSAGE_FRAME_HEADER.pack(len(body) + 30, 2, timestamp, attempts) + msg_id + body


def decode_message(data: bytes) -> DecodedMessage:
    """Parse the message encoding; ValueError when it is too short."""
    if len(data) < MIN_VALID_MSG_LENGTH:
        raise ValueError(f"invalid message buffer size ({len(data)})")
    timestamp, attempts = MESSAGE_HEADER.unpack_from(data)
    return DecodedMessage(timestamp, attempts, bytes(data[10:26]), bytes(data[26:]))
