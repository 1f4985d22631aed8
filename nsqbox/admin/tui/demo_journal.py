"""What the demo cluster's journals say, as the admin merges them (for screenshots).

Message ``0f3a9c0000001031`` of *orders* (the deferred one the Messages view lists in
*billing*) has a journey: published by a PHP shop over HTTP, copied to both channels,
delivered three times in *billing* (one time-out, one requeue with a delay), and now waiting
out its delay. Channel *billing* has messages in trouble and two a client gave up on; every
other channel has none. Times are pinned to :data:`~.demo.DEMO_TIME`.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any, TypeVar

import msgspec

from ..journal import (
    Event,
    EventsResult,
    GivenUp,
    GivenUpResult,
    NodeJournal,
    Trouble,
    TroublesResult,
    Who,
)
from ..stats import Producer

__all__ = ["demo_given_up", "demo_journey", "demo_troubles"]

_NS = 1_000_000_000
_MS = 1_000_000
#: 2026-01-01 12:34:56 UTC, as :data:`~.demo.DEMO_TIME` (not imported: demo imports this).
_NOW = 1_767_270_896 * _NS
_A, _B = "10.0.0.1:4151", "10.0.0.2:4151"
_ID = "0f3a9c0000001031"
_Held = TypeVar("_Held", Trouble, GivenUp)

_PYNSQ_WHO = Who(7, "10.1.0.11:51001", "pynsq/0.9.1", "worker-11", "worker-11")
_GONSQ_WHO = Who(4, "10.1.0.21:52001", "go-nsq/1.1.0", "worker-21", "worker-21")
#: The same clients as an event's fields.
_PYNSQ: dict[str, Any] = msgspec.structs.asdict(_PYNSQ_WHO)
_GONSQ: dict[str, Any] = msgspec.structs.asdict(_GONSQ_WHO)


def _event(n: int, ago_s: float, kind: str, channel: str = "", **fields: Any) -> Event:
    return Event(
        n=(1_000 + n) << 32, time=_NOW - int(ago_s * _NS), kind=kind, topic="orders",
        channel=channel, id=_ID, node=_A, **fields,
    )  # fmt: skip


_JOURNEY = [
    _event(0, 61.0, "published", size=31, via="HTTP", remote_address="10.2.0.5:40212",
           user_agent="shop-php/8.3"),
    _event(1, 61.0, "queued", "billing", to="memory"),
    _event(2, 61.0, "queued", "shipping", to="memory"),
    _event(3, 60.998, "delivered", "billing", attempt=1, timeout_ms=60_000, **_PYNSQ),
    _event(4, 0.998, "timed_out", "billing", held_ms=60_000.0, **_PYNSQ),
    _event(5, 0.9, "delivered", "billing", attempt=2, timeout_ms=60_000, **_GONSQ),
    _event(6, 0.897, "requeued", "billing", delay_ms=30_000, held_ms=2.7, **_GONSQ),
    _event(7, 0.897, "deferred", "billing", delay_ms=30_000),
    _event(8, 0.2, "delivered", "shipping", attempt=1, timeout_ms=60_000, **_PYNSQ),
    _event(9, 0.19, "finished", "shipping", attempt=1, since_publish_ms=60_810.0, **_PYNSQ),
]  # fmt: skip


def _b64(body: bytes) -> str:
    return base64.b64encode(body).decode("ascii")


def _reports(nodes: Sequence[Producer]) -> list[NodeJournal]:
    return [NodeJournal(node=p.http_address, hostname=p.hostname) for p in nodes]


def demo_journey(nodes: Sequence[Producer], msg_id: str) -> EventsResult:
    """The journey of ``msg_id``: the one above for its id, none for the others."""
    names = {p.http_address for p in nodes}
    events = [e for e in _JOURNEY if e.id == msg_id and e.node in names]
    reports = _reports(nodes)
    for report in reports:
        report.listed = sum(e.node == report.node for e in events)
    return EventsResult(events, reports)


_TROUBLES = [
    Trouble(id=_ID, timestamp=_NOW - 61 * _NS, since=_NOW - 1 * _NS, requeues=1, timeouts=1,
            last_client=_GONSQ_WHO, held_longest_ms=60_000.0, size=31,
            body=_b64(b'{"order": 1031, "retry": true}'), node=_A),
    Trouble(id="0f3a9c0000001040", timestamp=_NOW - 9 * _NS, since=_NOW - 4 * _NS, requeues=3,
            timeouts=0, last_client=_PYNSQ_WHO, held_longest_ms=1_250.0, size=30,
            body=_b64(b'{"order": 1040, "total": 99.5}'), node=_A),
    Trouble(id="0f3a9c0000002039", timestamp=_NOW - 48 * _NS, since=_NOW - 40 * _NS,
            requeues=0, timeouts=2, last_client=_GONSQ_WHO, held_longest_ms=60_000.0,
            size=30, body=_b64(b'{"order": 1039, "total": 7.25}'), node=_B),
]  # fmt: skip

_GIVEN_UP = [
    GivenUp(id="0f3a9c0000001027", time=_NOW - 95 * _NS, timestamp=_NOW - 300 * _NS,
            attempts=4, requeues=3, timeouts=0, finished_by=_PYNSQ_WHO, size=52,
            body=_b64(b'{"order": 1027, "error": "card declined [b]twice[/b]"}'), node=_A),
    GivenUp(id="0f3a9c0000002011", time=_NOW - 610 * _NS, timestamp=_NOW - 1_210 * _NS,
            attempts=6, requeues=2, timeouts=3, finished_by=_GONSQ_WHO, size=20,
            body=_b64(b"\x08\x96\x01\x12\x07refund\x1a"), node=_B),
]  # fmt: skip


def _of_billing(
    messages: list[_Held], nodes: Sequence[Producer], topic: str, channel: str
) -> tuple[list[_Held], list[NodeJournal]]:
    """``messages`` on ``nodes`` (none unless ``channel`` of ``topic`` is *billing* of
    *orders*), and every node's report."""
    names = {p.http_address for p in nodes}
    held = (topic, channel) == ("orders", "billing")
    listed = [m for m in messages if m.node in names] if held else []
    reports = _reports(nodes)
    for report in reports:
        report.listed = report.count = sum(m.node == report.node for m in listed)
    return listed, reports


def demo_troubles(nodes: Sequence[Producer], topic: str, channel: str) -> TroublesResult:
    """The messages ``channel`` of ``topic`` has in trouble on ``nodes``."""
    return TroublesResult(*_of_billing(_TROUBLES, nodes, topic, channel))


def demo_given_up(nodes: Sequence[Producer], topic: str, channel: str) -> GivenUpResult:
    """The messages clients of ``channel`` of ``topic`` gave up on, on ``nodes``."""
    return GivenUpResult(*_of_billing(_GIVEN_UP, nodes, topic, channel))
