"""Discovery through nsqlookupd (guide, Discovery).

A consumer asks every configured lookupd ``/lookup?topic=...`` and merges the
answers into one set of nsqd addresses, keyed by ``broadcast_address:tcp_port``
(lookupds do not share data, so each may know different producers). The first
round goes out when the consumer starts; later rounds follow every poll
interval, after a random initial delay of up to ``jitter`` of an interval, so
many consumers started together do not poll in step.
"""

from __future__ import annotations

import logging
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import msgspec

from ..wire.peer_json import PeerJSONError, decode_peer_json
from .config import format_address

if TYPE_CHECKING:  # the blocking client uses the sans-IO parts without trio or httpx
    import httpx

__all__ = [
    "ACCEPT",
    "initial_poll_delay",
    "lookup_url",
    "parse_lookup_response",
    "query_lookupds",
]

log = logging.getLogger("nsqbox.client")

#: nsqlookupd answers with bare JSON (and ``X-NSQ-Content-Type``) when asked for version 1.0.
ACCEPT = "application/vnd.nsq; version=1.0"


def lookup_url(address: str, topic: str) -> str:
    """``/lookup?topic=`` on a lookupd given as ``host:port`` or an ``http(s)://`` URL.

    A URL's own path and query are kept (a path of ``/`` or nothing becomes
    ``/lookup``), as go-nsq and pynsq do.
    """
    if "://" not in address:
        address = "http://" + address
    parts = urlsplit(address)
    if parts.port is None:
        raise ValueError(f"lookupd address needs a port: {address!r}")
    path = parts.path if parts.path not in ("", "/") else "/lookup"
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "topic"]
    query.append(("topic", topic))
    return urlunsplit((parts.scheme, parts.netloc, path, urlencode(query), ""))


class _Producer(msgspec.Struct):
    broadcast_address: str = ""
    address: str = ""  # nsqlookupd before 1.0 called broadcast_address this
    tcp_port: int = 0


class _Lookup(msgspec.Struct):
    producers: list[_Producer] = msgspec.field(default_factory=list)


class _Wrapped(msgspec.Struct):
    data: _Lookup | None = None


_any_decoder: msgspec.json.Decoder[Any] = msgspec.json.Decoder()
_wrapped_decoder = msgspec.json.Decoder(_Wrapped)
_lookup_decoder = msgspec.json.Decoder(_Lookup)


def parse_lookup_response(body: bytes) -> list[str]:
    """The nsqd TCP addresses in a ``/lookup`` reply (bare, or an old ``{"data": ...}`` one)."""
    raw: Any = decode_peer_json(body, _any_decoder)
    if isinstance(raw, dict) and "data" in raw and "producers" not in raw:
        lookup = decode_peer_json(body, _wrapped_decoder).data or _Lookup()
    else:
        lookup = decode_peer_json(body, _lookup_decoder)
    out = []
    for producer in lookup.producers:
        host = producer.broadcast_address or producer.address
        if host and producer.tcp_port:
            out.append(format_address((host, producer.tcp_port)))
    return out


async def _query(client: httpx.AsyncClient, url: str) -> list[str]:
    import httpx

    try:
        response = await client.get(url, headers={"Accept": ACCEPT})
    except httpx.HTTPError as exc:
        log.warning("lookupd %s query error: %s", url, exc)
        return []
    if response.status_code == 404:
        return []  # TOPIC_NOT_FOUND: no producer has the topic yet
    if response.status_code != 200:
        log.warning("lookupd %s answered %d", url, response.status_code)
        return []
    try:
        return parse_lookup_response(response.content)
    except PeerJSONError as exc:
        log.warning("lookupd %s sent a bad reply: %s", url, exc)
        return []


async def query_lookupds(client: httpx.AsyncClient, urls: Iterable[str]) -> set[str]:
    """Ask every lookupd at once; the union of the nsqd addresses they know."""
    import trio

    found: set[str] = set()

    async def one(url: str) -> None:
        found.update(await _query(client, url))

    async with trio.open_nursery() as nursery:
        for url in urls:
            nursery.start_soon(one, url)
    return found


def initial_poll_delay(interval: float, jitter: float, rng: random.Random) -> float:
    """The random wait before the periodic polls start: up to ``jitter`` of an interval."""
    return rng.random() * jitter * interval
