"""The journal's lists of messages kept apart: those in trouble now, those given up on
(:attr:`~.journal.Journal.troubles` and :attr:`~.journal.Journal.given_up`, bodies and
all), and who a client was, as ``/nsqbox/journal`` and its events show them."""

from __future__ import annotations

import base64
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .journal import Journal

__all__ = ["given_up_doc", "troubles_doc", "who_doc"]

Doc = dict[str, Any]

_ID = 16


def who_doc(journal: Journal, client: int) -> Doc:
    """Who ``client`` (a TCP client's id) was, as the journal remembers it."""
    who = journal.who.get(client)
    if who is None:
        return {"client": client}
    return {
        "client": client,
        "remote_address": who.remote_address,
        "user_agent": who.user_agent,
        "hostname": who.hostname,
        "client_id": who.client_id,
    }


def _b64(data: bytes, body_bytes: int) -> str:
    return base64.b64encode(data[_ID : _ID + body_bytes]).decode("ascii")


def troubles_doc(
    journal: Journal,
    topic: str,
    channel: str,
    *,
    requeues: int,
    held_ms: float,
    timed_out: bool,
    body_bytes: int,
    limit: int,
) -> Doc:
    """The messages of ``channel`` in trouble now: requeued at least ``requeues`` times,
    held at least ``held_ms`` before a failure, timed out (when ``timed_out``)."""
    held = journal.troubles.get((topic, channel), {})
    out: list[Doc] = []
    for msg_id, trouble in held.items():
        if trouble.requeues < requeues or trouble.held_longest * 1000 < held_ms:
            continue
        if timed_out and not trouble.timeouts:
            continue
        if len(out) >= limit:
            break
        out.append(
            {
                "id": msg_id.decode("ascii", "replace"),
                "timestamp": trouble.timestamp,
                "since": trouble.since,
                "requeues": trouble.requeues,
                "timeouts": trouble.timeouts,
                "last_client": who_doc(journal, trouble.last_client),
                "held_longest_ms": round(trouble.held_longest * 1000, 3),
                "size": len(trouble.data) - _ID,
                "body": _b64(trouble.data, body_bytes),
            }
        )
    return {"topic": topic, "channel": channel, "count": len(held), "messages": out}


def given_up_doc(
    journal: Journal, topic: str, channel: str, *, attempts: int, body_bytes: int, limit: int
) -> Doc:
    """The messages of ``channel`` finished at attempt ``attempts`` or later after earlier
    deliveries of them failed, newest first (at most ``limit``), and ``count``: how many
    the node keeps, listed or not, as :func:`troubles_doc` counts."""
    out: list[Doc] = []
    count = 0
    for gave in reversed(journal.given_up):
        if gave.topic != topic or gave.channel != channel or gave.attempts < attempts:
            continue
        count += 1
        if len(out) >= limit:
            continue
        out.append(
            {
                "id": gave.data[:_ID].decode("ascii", "replace"),
                "time": gave.time,
                "timestamp": gave.timestamp,
                "attempts": gave.attempts,
                "requeues": gave.requeues,
                "timeouts": gave.timeouts,
                "finished_by": who_doc(journal, gave.client),
                "size": len(gave.data) - _ID,
                "body": _b64(gave.data, body_bytes),
            }
        )
    return {"topic": topic, "channel": channel, "count": count, "messages": out}
