"""Waiting for nsqlookupd: how many producers of a topic each lookupd lists.

A consumer that discovers nsqds through nsqlookupd finds only the nodes the lookupd
lists when it queries; an app that publishes to a node itself creates the topic there
and registers it a moment later. Waiting for the producers closes that race.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

from ..wire.documents import LookupDocument
from .config import Address
from .remote import NSQHTTPError, http_document

__all__ = ["all_listed", "lookup_producers", "producers_message"]

L = TypeVar("L")


def lookup_producers(lookupd_http: Address, topic: str) -> list[Address]:
    """The TCP addresses (``broadcast_address:tcp_port``) nsqlookupd lists for ``topic``."""
    try:
        doc = http_document(lookupd_http, "/lookup", LookupDocument, {"topic": topic})
    except NSQHTTPError as exc:
        if exc.status == 404:  # TOPIC_NOT_FOUND: no producer yet
            return []
        raise
    return sorted(Address.of(p.broadcast_address, p.tcp_port) for p in doc.producers or [])


def all_listed(
    lookupds: Sequence[L], nodes: int, listed: Callable[[L], list[Address]]
) -> tuple[bool, dict[str, list[Address]]]:
    """Whether every lookupd lists at least ``nodes`` producers; what each listed."""
    seen = {str(lk): listed(lk) for lk in lookupds}
    return all(len(p) >= nodes for p in seen.values()), seen


def producers_message(
    topic: str, nodes: int, limit: float
) -> Callable[[dict[str, list[Address]]], str]:
    """The WaitTimeout message of a producers wait."""

    def message(seen: dict[str, list[Address]]) -> str:
        listed = "; ".join(f"{lk}: {[str(a) for a in p]}" for lk, p in seen.items())
        return (
            f"nsqbox: timed out after {limit:g}s waiting for nsqlookupd to list {nodes} "
            f"producer(s) of topic {topic!r}; listed: {listed or 'no lookupd'}"
        )

    return message
