"""How many messages wait in the channel on each nsqd: the readers' look before they plan.

NSQ has no offsets, so a stream reader cannot compare "where it is" with "where
the log ends" as Kafka's source does. What nsqd does tell is the channel's
*depth*: the messages queued for the channel (in memory and on disk), not
counting those in flight or deferred. ``GET /stats?format=json&topic=T&channel=C``
on each nsqd's HTTP address gives it, as nsqadmin and nsq_stat read it.

The readers ask before they plan a micro-batch: a depth of 0 on every node is
an idle stream (no batch), a depth below ``minMessagesPerTrigger`` waits, and
the sum is the lag reported in each batch's progress.

Where nsqd's HTTP address is: ``nsqdHttp`` (one per ``nsqd`` address, in the
same order), and for nodes found through ``lookupd`` the ``http_port`` that
lookupd lists beside each producer. A node whose HTTP address is unknown, or
that does not answer, has an unknown depth (None): the readers then plan as if
it had messages, so nothing waits on a node they cannot see.

The simple reader also asks for the channel's clients (``include_clients=true``): how
many messages nsqd has sent each of its connections, which :mod:`.lag` turns into
the messages it has prefetched.

Every answer is bounded: at most :data:`MAX_DOCUMENT` bytes, within the
connection's ``dialTimeout`` for the whole exchange; no proxy from the
environment (these are the cluster's own addresses).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Mapping
from urllib.parse import urlencode

import httpx
import msgspec

from ..client.config import format_address
from ..client.discovery import ACCEPT, lookup_url
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .lag import ChannelStats
from .options import ConnectionOptions

__all__ = [
    "MAX_DOCUMENT",
    "DepthProbe",
    "parse_lookup_http",
    "parse_stats_channel",
    "parse_stats_depth",
]

log = logging.getLogger("nsqbox.spark")

#: The largest /stats or /lookup answer read (one topic and one channel: a few KiB; the
#: cap is for a stranger's node registered with lookupd).
MAX_DOCUMENT = 4 * 1024 * 1024
#: The largest depth believed from a node (nsqd counts in int64).
MAX_DEPTH = 2**62


class _Client(msgspec.Struct):
    remote_address: str = ""
    message_count: int = 0


class _Channel(msgspec.Struct):
    channel_name: str = ""
    depth: int = 0
    clients: list[_Client] | None = None


class _Topic(msgspec.Struct):
    topic_name: str = ""
    channels: list[_Channel] = msgspec.field(default_factory=list)


class _Stats(msgspec.Struct):
    topics: list[_Topic] = msgspec.field(default_factory=list)


class _Producer(msgspec.Struct):
    broadcast_address: str = ""
    address: str = ""
    tcp_port: int = 0
    http_port: int = 0


class _Lookup(msgspec.Struct):
    producers: list[_Producer] = msgspec.field(default_factory=list)


_stats_decoder = msgspec.json.Decoder(_Stats)
_lookup_decoder = msgspec.json.Decoder(_Lookup)


def _bounded(count: int) -> int:
    return min(max(count, 0), MAX_DEPTH)


def parse_stats_channel(body: bytes, topic: str, channel: str) -> ChannelStats | None:
    """The channel's depth and the messages sent to each client (by ``remote_address``)
    in an nsqd ``/stats?format=json`` answer; None when it has no such channel (not
    created yet: the first reader to subscribe creates it)."""
    stats = decode_peer_json(body, _stats_decoder, max_size=MAX_DOCUMENT)
    for entry in stats.topics:
        if entry.topic_name == topic:
            for chan in entry.channels:
                if chan.channel_name == channel:
                    sent = {c.remote_address: _bounded(c.message_count) for c in chan.clients or ()}
                    return ChannelStats(_bounded(chan.depth), sent)
    return None


def parse_stats_depth(body: bytes, topic: str, channel: str) -> int | None:
    """The channel's depth in an nsqd ``/stats?format=json`` answer; None when it has no
    such channel (not created yet: the first reader to subscribe creates it)."""
    found = parse_stats_channel(body, topic, channel)
    return None if found is None else found.depth


def parse_lookup_http(body: bytes) -> dict[str, str]:
    """``{tcp address: http address}`` of the producers in a lookupd ``/lookup`` answer."""
    lookup = decode_peer_json(body, _lookup_decoder, max_size=MAX_DOCUMENT)
    out: dict[str, str] = {}
    for producer in lookup.producers:
        host = producer.broadcast_address or producer.address
        if host and 0 < producer.tcp_port < 65536 and 0 < producer.http_port < 65536:
            out[format_address((host, producer.tcp_port))] = format_address(
                (host, producer.http_port)
            )
    return out


class DepthProbe:
    """Asks each nsqd for the channel's depth (one per reader, on the driver's side)."""

    def __init__(self, connection: ConnectionOptions, topic: str, channel: str) -> None:
        self.connection = connection
        self.topic = topic
        self.channel = channel
        #: The HTTP address of each nsqd TCP address known so far.
        self.http: dict[str, str] = dict(zip(connection.nsqd, connection.nsqd_http, strict=False))

    def _get(self, client: httpx.Client, url: str, headers: Mapping[str, str]) -> bytes | None:
        deadline = time.monotonic() + self.connection.dial_timeout
        try:
            with client.stream("GET", url, headers=headers) as response:
                if response.status_code != 200:
                    log.debug("%s answered %d", url, response.status_code)
                    return None
                body = bytearray()
                for chunk in response.iter_bytes():
                    body += chunk
                    if len(body) > MAX_DOCUMENT or time.monotonic() > deadline:
                        log.warning("%s: answer too large or too slow, ignored", url)
                        return None
                return bytes(body)
        except httpx.HTTPError as exc:
            log.debug("%s: %s", url, exc)
            return None

    def _client(self) -> httpx.Client:
        # no https address: no CA store to load (a quarter of a second, at every plan)
        https = any(
            a.startswith("https://") for a in (*self.connection.lookupd, *self.http.values())
        )
        return httpx.Client(timeout=self.connection.dial_timeout, trust_env=False, verify=https)

    def _learn_from_lookupd(self, client: httpx.Client, missing: Iterable[str]) -> None:
        if not self.connection.lookupd or not list(missing):
            return
        for address in self.connection.lookupd:
            try:
                url = lookup_url(address, self.topic)
            except ValueError:
                continue
            body = self._get(client, url, {"Accept": ACCEPT})
            if body is None:
                continue
            try:
                self.http.update(parse_lookup_http(body))
            except PeerJSONError as exc:
                log.warning("lookupd %s sent a bad /lookup: %s", address, exc)

    def depths(self, nodes: Iterable[str]) -> dict[str, int | None]:
        """``{nsqd tcp address: depth or None (unknown)}`` for each of ``nodes``."""
        return {
            node: None if stats is None else stats.depth
            for node, stats in self.channel_stats(nodes, clients=False).items()
        }

    def channel_stats(
        self, nodes: Iterable[str], *, clients: bool = True
    ) -> dict[str, ChannelStats | None]:
        """``{nsqd tcp address: the channel's stats or None (unknown)}`` for each of
        ``nodes``; with ``clients``, what each node sent each client of the channel."""
        nodes = list(nodes)
        out: dict[str, ChannelStats | None] = dict.fromkeys(nodes)
        if not nodes:
            return out
        with self._client() as client:
            self._learn_from_lookupd(client, [n for n in nodes if n not in self.http])
            query = urlencode(
                {
                    "format": "json",
                    "topic": self.topic,
                    "channel": self.channel,
                    "include_clients": "true" if clients else "false",
                }
            )
            for node in nodes:
                http = self.http.get(node)
                if http is None:
                    continue
                base = http if "://" in http else f"http://{http}"
                body = self._get(client, f"{base.rstrip('/')}/stats?{query}", {})
                if body is None:
                    continue
                try:
                    out[node] = parse_stats_channel(body, self.topic, self.channel)
                except PeerJSONError as exc:
                    log.warning("nsqd %s sent a bad /stats: %s", http, exc)
        return out
