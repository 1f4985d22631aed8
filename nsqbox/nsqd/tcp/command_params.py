"""A command line's parameters read as nsqd reads them (nsqd/protocol_v2.go, internal/protocol).

Numbers are nsqd's ``ByteToBase10`` (digits only, wrapping like a uint64, then read
as Go's int64); message IDs are 16 bytes; text from the peer is echoed back in error
texts byte for byte.
"""

from __future__ import annotations

from ...wire.errors import NSQError, invalid
from ...wire.message import MSG_ID_LENGTH

__all__ = ["base10", "fin_failed", "int64", "message_id", "raw_text"]

_MAX_UINT64 = (1 << 64) - 1


def base10(raw: bytes) -> int | None:
    """nsqd's ByteToBase10: digits only (empty is 0), wrapping like a uint64; None when
    ``raw`` is not digits.

    Folded in chunks: CPython's int() refuses strings of more than 4,300 digits.
    """
    if raw and not (raw.isascii() and raw.isdigit()):
        return None
    value = 0
    for i in range(0, len(raw), 1000):
        chunk = raw[i : i + 1000]
        value = (value * 10 ** len(chunk) + int(chunk)) & _MAX_UINT64
    return value


def int64(value: int) -> int:
    """Reinterpret a uint64 as Go's int64 (two's complement)."""
    value &= _MAX_UINT64
    return value - (1 << 64) if value >= 1 << 63 else value


def message_id(raw: bytes) -> bytes:
    """``raw`` when it is a message ID's length, else nsqd's ``E_INVALID``."""
    if len(raw) != MSG_ID_LENGTH:
        raise invalid("invalid message ID")
    return raw


def raw_text(name: bytes) -> str:
    """A peer's bytes as text that encodes back to the same bytes (nsqd echoes them raw)."""
    return name.decode("utf-8", "surrogateescape")


def fin_failed(msg_id: bytes, why: str) -> NSQError:
    """nsqd's answer to a FIN the channel refused (not fatal)."""
    return NSQError("E_FIN_FAILED", f"FIN {raw_text(msg_id)} failed {why}", fatal=False)
