"""The NSQ wire protocol, sans-IO (no trio, no sockets, no clocks).

Frames, the message encoding, the V2 command parser (server side) and encoders
(client side), IDENTIFY structs, name validation and error codes. Everything in
nsqbox that talks NSQ builds on this one codec.
"""

from __future__ import annotations

from .errors import NSQError, ProtocolViolation
from .frames import MAGIC_V2, FrameReader, FrameType
from .message import DecodedMessage, decode_message, encode_message
from .names import is_valid_channel_name, is_valid_topic_name

__all__ = [
    "MAGIC_V2",
    "DecodedMessage",
    "FrameReader",
    "FrameType",
    "NSQError",
    "ProtocolViolation",
    "decode_message",
    "encode_message",
    "is_valid_channel_name",
    "is_valid_topic_name",
]
