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
    "LookupdQueryError",
    "initial_poll_delay",
    "lookup_url",
    "open_lookupd_client",
    "parse_lookup_response",
    "query_lookupd",
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


class LookupdQueryError(Exception):
    """One lookupd's ``/lookup`` failed; ``str()`` says how ("query error: ...", "answered 500")."""


def open_lookupd_client(timeout: float, urls: Iterable[str]) -> httpx.AsyncClient:
    """The HTTP client for lookupd queries of ``urls``; close it (``async with``) when done.

    Like every nsqbox client of a peer it takes no proxy from the environment
    (``trust_env=False``: ``HTTP_PROXY`` is for the user's web traffic, not for a
    cluster's own addresses); ``timeout`` bounds each operation, and
    :func:`query_lookupd` the whole answer too. Certificates are verified for
    ``https://`` lookupds; with none among ``urls`` no CA store is loaded (loading it
    costs a quarter of a second, far more than a lookup), as the admin's client does.
    """
    import httpx

    https = any(url.startswith("https://") for url in urls)
    return httpx.AsyncClient(timeout=timeout, trust_env=False, verify=https)


async def query_lookupd(client: httpx.AsyncClient, url: str) -> list[str]:
    """Ask the lookupd at ``url`` (:func:`lookup_url`); the nsqd addresses it lists.

    ``[]`` when it answers 404 (TOPIC_NOT_FOUND: no producer has the topic yet).
    The answer is read as every peer's is (:func:`nsqbox.net.peer_http.fetch`): at most
    16 MiB, all of it within the client's timeout. :class:`LookupdQueryError` for a
    failed request, any other status or a reply that is not a lookup's JSON.
    """
    import httpx

    from ..net.peer_http import fetch

    try:
        response = await fetch(client, "GET", url, headers={"Accept": ACCEPT})
    except httpx.HTTPError as exc:
        raise LookupdQueryError(f"query error: {exc}") from exc
    if response.status_code == 404:
        return []
    if response.status_code != 200:
        raise LookupdQueryError(f"answered {response.status_code}")
    try:
        return parse_lookup_response(response.content)
    except PeerJSONError as exc:
        raise LookupdQueryError(f"sent a bad reply: {exc}") from exc


async def _query(client: httpx.AsyncClient, url: str) -> list[str]:
    try:
        return await query_lookupd(client, url)
    except LookupdQueryError as exc:
        log.warning("lookupd %s %s", url, exc)
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
