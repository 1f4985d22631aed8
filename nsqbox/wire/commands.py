"""Client-side encoders for every protocol V2 command: pure functions returning bytes."""

from __future__ import annotations

import struct
from collections.abc import Iterable, Mapping
from typing import Any

import msgspec

from .frames import MAGIC_V2

_UINT32 = struct.Struct(">I")

__all__ = [
    "MAGIC_V2",
    "auth",
    "cls",
    "dpub",
    "fin",
    "identify",
    "mpub",
    "nop",
    "pub",
    "rdy",
    "req",
    "sub",
    "touch",
]


def _text(value: str | bytes) -> bytes:
    return value.encode() if isinstance(value, str) else value


def identify(data: Mapping[str, Any] | msgspec.Struct) -> bytes:
    """``IDENTIFY\\n[size][JSON]``."""
    body = msgspec.json.encode(data)
    return b"IDENTIFY\n" + _UINT32.pack(len(body)) + body


def auth(secret: str | bytes) -> bytes:
    """``AUTH\\n[size][secret]``."""
    body = _text(secret)
    return b"AUTH\n" + _UINT32.pack(len(body)) + body


def sub(topic: str, channel: str) -> bytes:
    """``SUB <topic> <channel>\\n``."""
    return f"SUB {topic} {channel}\n".encode()


def pub(topic: str, body: bytes) -> bytes:
    """``PUB <topic>\\n[size][body]``."""
    return f"PUB {topic}\n".encode() + _UINT32.pack(len(body)) + body


def dpub(topic: str, delay_ms: int, body: bytes) -> bytes:
    """``DPUB <topic> <defer_ms>\\n[size][body]``."""
    return f"DPUB {topic} {delay_ms}\n".encode() + _UINT32.pack(len(body)) + body


def mpub(topic: str, bodies: Iterable[bytes]) -> bytes:
    """``MPUB <topic>\\n[size][count]([size][body])*``."""
    pack = _UINT32.pack
    parts = []
    count = 0
    for body in bodies:
        parts.append(pack(len(body)))
        parts.append(body)
        count += 1
    payload = b"".join(parts)
    return f"MPUB {topic}\n".encode() + pack(len(payload) + 4) + pack(count) + payload


def rdy(count: int) -> bytes:
    """``RDY <count>\\n``."""
    return b"RDY %d\n" % count


def fin(msg_id: bytes) -> bytes:
    """``FIN <id>\\n``."""
    return b"FIN " + msg_id + b"\n"


def req(msg_id: bytes, delay_ms: int) -> bytes:
    """``REQ <id> <timeout_ms>\\n``."""
    return b"REQ " + msg_id + b" %d\n" % delay_ms


def touch(msg_id: bytes) -> bytes:
    """``TOUCH <id>\\n``."""
    return b"TOUCH " + msg_id + b"\n"


def cls() -> bytes:
    """``CLS\\n``."""
    return b"CLS\n"


def nop() -> bytes:
    """``NOP\\n``."""
    return b"NOP\n"
