"""What the demo cluster's channels hold, as the peek route would list it (for screenshots).

Channel *billing* of *orders* holds a few messages in every place a message can be — memory,
disk, deferred, in flight — with JSON, text and binary bodies; every other channel or topic
holds none. Times are pinned to :data:`~.demo.DEMO_TIME`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence

import msgspec

from ..peek import NodePeek, PeekMessage, PeekResult
from ..stats import Producer

__all__ = ["demo_peek"]

_NS = 1_000_000_000
#: 2026-01-01 12:34:56 UTC, as :data:`~.demo.DEMO_TIME` (not imported: demo imports this).
_NOW = 1_767_270_896 * _NS

_A, _B = "10.0.0.1:4151", "10.0.0.2:4151"


def _message(
    node: str,
    n: int,
    state: str,
    body: bytes,
    age_s: float,
    attempts: int | None = None,
    **extra: int | str,
) -> PeekMessage:
    message = PeekMessage(
        id=f"0f3a9c{n:010x}",
        state=state,
        attempts=(0 if state in ("memory", "disk") else 1) if attempts is None else attempts,
        timestamp=_NOW - int(age_s * _NS),
        size=len(body),
        body=base64.b64encode(body).decode("ascii"),
        node=node,
    )
    return msgspec.structs.replace(message, **extra)


_BILLING = [
    _message(_A, 0x1044, "memory", b'{"order": 1044, "total": 18.5, "currency": "EUR"}', 2.1),
    _message(
        _A,
        0x1045,
        "memory",
        b'{"order": 1045, "total": 64.0, "items": [{"sku": "A-17", "qty": 2}, '
        b'{"sku": "C-3", "qty": 1}], "note": "leave at the door"}',
        1.4,
    ),
    _message(_A, 0x1012, "disk", b"refund 1012: customer asked by phone, see ticket 88", 3605),
    _message(_A, 0x1031, "deferred", b'{"order": 1031, "retry": true}', 61, attempts=3,
             defer_left_ms=42_000),
    _message(_A, 0x1040, "in_flight", b'{"order": 1040, "total": 99.5}', 9,
             timeout_left_ms=51_000, client_id=7, client="10.1.0.11:51001"),
    _message(_B, 0x2046, "memory", b"\x08\x96\x01\x12\x07invoice\x1a\x03EUR \xff\x01", 0.8),
    _message(_B, 0x2039, "in_flight", b'{"order": 1039, "total": 7.25}', 48, attempts=3,
             timeout_left_ms=12_000, client_id=4, client="10.1.0.22:52002"),
]  # fmt: skip


def demo_peek(nodes: Sequence[Producer], topic: str, channel: str) -> PeekResult:
    """One page of what ``channel`` of ``topic`` holds on ``nodes``; more pages follow."""
    names = [p.http_address for p in nodes]
    held = (topic, channel) == ("orders", "billing")
    messages = [m for m in _BILLING if m.node in names] if held else []
    reports = [
        NodePeek(
            node=p.http_address,
            hostname=p.hostname,
            depth=42 * (i + 1) if held else 0,
            in_flight_count=(11 + i) if held else 0,
            deferred_count=3 if held else 0,
            listed=sum(m.node == p.http_address for m in messages),
        )
        for i, p in enumerate(nodes)
    ]
    return PeekResult(messages, reports, "e30" if held else None)
