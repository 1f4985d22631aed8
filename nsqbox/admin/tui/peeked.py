"""A message the Messages view listed (:class:`Listed`), and the JSON line it is saved as.

Built from a :class:`~nsqbox.admin.peek.PeekMessage` (nsqd's peek route, merged over nodes) with
its body decoded once. ``body`` holds the bytes the route listed: the whole body unless it is
longer than the view asked for (:attr:`Listed.truncated`).
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING

from . import format as fmt

if TYPE_CHECKING:
    from ..peek import PeekMessage

__all__ = ["WHERE", "Listed", "json_line"]

#: How the view names each ``state`` of the peek route.
WHERE = {"memory": "memory", "disk": "disk", "deferred": "deferred", "in_flight": "in flight"}


@dataclass(frozen=True, slots=True)
class Listed:
    """One listed message: where it is, its counters, and its body (or its first bytes)."""

    node: str
    id: str
    state: str
    attempts: int
    timestamp: int
    size: int
    body: bytes
    defer_ms: int | None = None
    defer_left_ms: int | None = None
    timeout_left_ms: int | None = None
    client_id: int | None = None
    client: str | None = None

    @classmethod
    def from_peek(cls, message: PeekMessage) -> Listed:
        """From the peek route's message (its body is base64)."""
        try:
            body = base64.b64decode(message.body, validate=True)
        except (binascii.Error, ValueError):
            body = b""
        return cls(
            node=message.node,
            id=message.id,
            state=message.state,
            attempts=message.attempts,
            timestamp=message.timestamp,
            size=message.size,
            body=body,
            defer_ms=message.defer_ms,
            defer_left_ms=message.defer_left_ms,
            timeout_left_ms=message.timeout_left_ms,
            client_id=message.client_id,
            client=message.client,
        )

    @property
    def truncated(self) -> bool:
        """Whether only the first bytes of the body were listed."""
        return self.size > len(self.body)

    @property
    def where(self) -> str:
        """``memory``, ``disk``, ``deferred`` or ``in flight``."""
        return WHERE.get(self.state, self.state)

    @property
    def left(self) -> str:
        """Time before a deferred message is queued or an in-flight one times out, or ``-``."""
        if self.defer_left_ms is not None:
            return fmt.duration_ns(self.defer_left_ms * 1_000_000)
        if self.timeout_left_ms is not None:
            return fmt.duration_ns(self.timeout_left_ms * 1_000_000)
        if self.defer_ms is not None:
            return "defer " + fmt.duration_ns(self.defer_ms * 1_000_000)
        return fmt.NONE

    def details(self, tz: tzinfo | None = None) -> list[tuple[str, str]]:
        """``(label, value)`` pairs describing the message (for its own view); times in ``tz``."""
        when = datetime.fromtimestamp(self.timestamp / 1e9, tz)
        rows = [
            ("id", self.id),
            ("node", self.node),
            ("where", self.where),
            ("attempts", str(self.attempts)),
            ("timestamp", when.isoformat(sep=" ", timespec="milliseconds")),
            ("size", fmt.plural(self.size, "byte")),
        ]
        if self.truncated:
            rows.append(("listed", f"the first {len(self.body):,} bytes"))
        if self.defer_ms is not None:
            rows.append(("deferred by", fmt.duration_ns(self.defer_ms * 1_000_000)))
        if self.defer_left_ms is not None:
            rows.append(("queued in", fmt.duration_ns(self.defer_left_ms * 1_000_000)))
        if self.timeout_left_ms is not None:
            rows.append(("times out in", fmt.duration_ns(self.timeout_left_ms * 1_000_000)))
        if self.client is not None or self.client_id is not None:
            rows.append(("client", f"{self.client or fmt.NONE} (id {self.client_id})"))
        return rows


def json_line(message: Listed) -> str:
    """The message as one line of JSON: its fields, ``body`` in base64, ``text`` if UTF-8.

    ``truncated`` is true when only the first bytes of the body were listed.
    """
    doc: dict[str, object] = {
        "id": message.id,
        "node": message.node,
        "state": message.state,
        "attempts": message.attempts,
        "timestamp": message.timestamp,
        "size": message.size,
        "truncated": message.truncated,
        "body": base64.b64encode(message.body).decode("ascii"),
    }
    try:
        doc["text"] = message.body.decode("utf-8")
    except UnicodeDecodeError:
        pass
    return json.dumps(doc, ensure_ascii=False)
