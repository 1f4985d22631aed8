"""The cluster's nouns as nsqadmin sees them: nodes, topics, channels, clients, latency.

Pure values and pure functions, no I/O: this module decodes what nsqlookupd's ``/nodes`` and
``/lookup`` and nsqd's ``/info`` and ``/stats?format=json`` answer (with the servers' own schema,
:mod:`nsqbox.wire.documents`), tags each row with the node it
came from, and sums rows from several nodes into cluster-wide rows, the way nsqadmin does
(NSQ v1.3.0 ``internal/clusterinfo/types.go``). The Structs encode to nsqadmin's JSON keys, so the
``/api`` serves them as they are.

Conventions:

* a *node* is an nsqd, named by its HTTP address as lookupd announces it,
  ``broadcast_address:http_port`` (:attr:`Producer.http_address`); nsqadmin's ``/api/nodes/:node``
  uses the same name;
* a per-node row has ``node`` set to that name and an empty ``nodes`` list; a cluster-wide row
  (from :func:`aggregate_topic` / :func:`aggregate_channel`) has ``node == "*"`` and lists the
  per-node rows it sums in ``nodes``;
* ``memory_depth`` is ``depth - backend_depth`` (nsqd reports only those two).

Unlike nsqadmin, every list is a list (never JSON ``null``), and an aggregated channel lists
every node's row in ``nodes`` (nsqadmin's merge drops the first node's row).
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterable, Sequence

import msgspec

from ..wire import documents
from ..wire.documents import (
    ChannelsDocument,
    InfoDocument,
    LookupdNode,
    NodesDocument,
    QuantileResult,
    StatsDocument,
    TopicsDocument,
)
from ..wire.peer_json import decode_peer_json

__all__ = [
    "ChannelStats",
    "ClientStats",
    "Latency",
    "NodeInfo",
    "Percentile",
    "Producer",
    "ProducerTopic",
    "TopicStats",
    "aggregate_channel",
    "aggregate_topic",
    "aggregate_topics",
    "decode_lookup_producers",
    "decode_lookupd_channels",
    "decode_lookupd_topics",
    "decode_node_info",
    "decode_nodes",
    "decode_nsqd_stats",
    "decode_stats_document",
    "join_host_port",
    "parse_version",
]


def join_host_port(host: str, port: int) -> str:
    """``host:port``, with an IPv6 host in brackets (Go's ``net.JoinHostPort``)."""
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


_SEMVER = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def parse_version(text: str) -> tuple[int, int, int]:
    """A version's ``(major, minor, patch)``; ``(0, 0, 0)`` when it is not semver-like."""
    match = _SEMVER.match(text)
    if match is None:
        return (0, 0, 0)
    return (int(match[1]), int(match[2]), int(match[3]))


# --- nodes ----------------------------------------------------------------------------------------


class ProducerTopic(msgspec.Struct, frozen=True):
    """A topic an nsqd registered with lookupd; ``tombstoned`` while tombstoned there."""

    topic: str
    tombstoned: bool = False


class Producer(msgspec.Struct, frozen=True, kw_only=True):
    """One nsqd as lookupd (``/nodes``, ``/lookup``) or its own ``/info`` describes it.

    ``remote_addresses`` lists ``lookupd/remote_address`` for every lookupd that knows the node
    (fewer entries than lookupds means some lookupd lost it); ``out_of_date`` is set when another
    node runs a newer version.
    """

    remote_addresses: list[str] = []
    remote_address: str = ""
    hostname: str = ""
    broadcast_address: str = ""
    tcp_port: int = 0
    http_port: int = 0
    version: str = ""
    topics: list[ProducerTopic] = []
    out_of_date: bool = False

    @property
    def http_address(self) -> str:
        """``broadcast_address:http_port``: where its HTTP API is, and the node's name."""
        return join_host_port(self.broadcast_address, self.http_port)

    @property
    def tcp_address(self) -> str:
        """``broadcast_address:tcp_port``: where clients connect."""
        return join_host_port(self.broadcast_address, self.tcp_port)


def _producer(node: LookupdNode) -> Producer:
    tombstones = node.tombstones or []
    topics = [
        ProducerTopic(name, i < len(tombstones) and tombstones[i])
        for i, name in enumerate(node.topics or [])
    ]
    return Producer(
        remote_address=node.remote_address,
        hostname=node.hostname,
        broadcast_address=node.broadcast_address,
        tcp_port=node.tcp_port,
        http_port=node.http_port,
        version=node.version,
        topics=sorted(topics, key=lambda t: t.topic),
    )


#: The parts of nsqd's ``GET /info`` nsqadmin reads (the schema's whole document).
NodeInfo = InfoDocument

_nodes_decoder = msgspec.json.Decoder(NodesDocument)
_topics_decoder = msgspec.json.Decoder(TopicsDocument)
_channels_decoder = msgspec.json.Decoder(ChannelsDocument)
_info_decoder = msgspec.json.Decoder(InfoDocument)


def decode_nodes(body: bytes) -> list[Producer]:
    """lookupd's ``/nodes`` body (or ``/lookup``'s, whose producers have no topics)."""
    return [_producer(p) for p in decode_peer_json(body, _nodes_decoder).producers or []]


decode_lookup_producers = decode_nodes


def decode_lookupd_topics(body: bytes) -> list[str]:
    """lookupd's ``/topics`` body."""
    return decode_peer_json(body, _topics_decoder).topics or []


def decode_lookupd_channels(body: bytes) -> list[str]:
    """lookupd's ``/channels?topic=`` body."""
    return decode_peer_json(body, _channels_decoder).channels or []


def decode_node_info(body: bytes) -> NodeInfo:
    """nsqd's ``/info`` body."""
    return decode_peer_json(body, _info_decoder)


# --- latency --------------------------------------------------------------------------------------


class Percentile(msgspec.Struct, frozen=True):
    """One end-to-end latency quantile, in nanoseconds.

    A node reports ``value``; nsqadmin adds ``min``, ``max`` and ``average`` (all ``value`` for
    one node) and ``count`` so quantiles from several nodes can be merged.
    """

    quantile: float
    value: float = 0.0
    min: float = 0.0
    max: float = 0.0
    average: float = 0.0
    count: float = 0.0


class Latency(msgspec.Struct, frozen=True):
    """End-to-end processing latency of a topic or channel (nsqadmin's aggregate)."""

    count: int = 0
    percentiles: list[Percentile] = []
    topic: str = ""
    channel: str = ""
    host: str = ""


def _latency(result: QuantileResult, topic: str, channel: str, host: str) -> Latency:
    count = float(result.count)
    return Latency(
        count=result.count,
        percentiles=[
            Percentile(p.quantile, p.value, p.value, p.value, p.value, count)
            for p in result.percentiles or []
        ],
        topic=topic,
        channel=channel,
        host=host,
    )


def _merge_latency(rows: Iterable[Latency], topic: str, channel: str) -> Latency:
    """Merge per-node latencies: counts add, min/max widen, averages weigh by count."""
    total = 0
    merged: dict[float, list[float]] = {}  # quantile -> [min, max, average, count]
    for row in rows:
        total += row.count
        for p in row.percentiles:
            acc = merged.get(p.quantile)
            if acc is None:
                merged[p.quantile] = [p.min, p.max, p.average, p.count]
                continue
            acc[0] = min(acc[0], p.min)
            acc[1] = max(acc[1], p.max)
            acc[3] += p.count
            if acc[3]:
                acc[2] += (p.average - acc[2]) * p.count / acc[3]
    percentiles = [
        Percentile(q, acc[2], acc[0], acc[1], acc[2], acc[3])
        for q, acc in sorted(merged.items(), reverse=True)
    ]
    return Latency(total, percentiles, topic, channel, "*")


# --- clients, channels, topics --------------------------------------------------------------------


class ClientStats(msgspec.Struct, frozen=True, kw_only=True):
    """One consumer connection to a channel on one node (nsqadmin's ``ClientStats``).

    ``connected`` is how long it has been connected, in nanoseconds, when the stats were read.
    """

    node: str = ""
    remote_address: str = ""
    version: str = ""
    client_id: str = ""
    hostname: str = ""
    user_agent: str = ""
    connect_ts: int = 0
    connected: int = 0
    in_flight_count: int = 0
    ready_count: int = 0
    finish_count: int = 0
    requeue_count: int = 0
    message_count: int = 0
    sample_rate: int = 0
    deflate: bool = False
    snappy: bool = False
    authed: bool = False
    auth_identity: str = ""
    auth_identity_url: str = ""
    tls: bool = False
    tls_cipher_suite: str = ""
    tls_version: str = ""
    tls_negotiated_protocol: str = ""
    tls_negotiated_protocol_is_mutual: bool = False


class ChannelStats(msgspec.Struct, frozen=True, kw_only=True):
    """A channel on one node, or summed over the nodes in ``nodes`` (then ``node == "*"``)."""

    node: str = ""
    hostname: str = ""
    topic_name: str = ""
    channel_name: str = ""
    depth: int = 0
    memory_depth: int = 0
    backend_depth: int = 0
    in_flight_count: int = 0
    deferred_count: int = 0
    requeue_count: int = 0
    timeout_count: int = 0
    message_count: int = 0
    client_count: int = 0
    nodes: list[ChannelStats] = []
    clients: list[ClientStats] = []
    paused: bool = False
    e2e_processing_latency: Latency = Latency()


class TopicStats(msgspec.Struct, frozen=True, kw_only=True):
    """A topic on one node, or summed over the nodes in ``nodes`` (then ``node == "*"``)."""

    node: str = ""
    hostname: str = ""
    topic_name: str = ""
    depth: int = 0
    memory_depth: int = 0
    backend_depth: int = 0
    message_count: int = 0
    nodes: list[TopicStats] = []
    channels: list[ChannelStats] = []
    paused: bool = False
    e2e_processing_latency: Latency = Latency()

    def channel(self, name: str) -> ChannelStats | None:
        """The channel called ``name``, or None."""
        return next((c for c in self.channels if c.channel_name == name), None)


_stats_decoder = msgspec.json.Decoder(StatsDocument)


def decode_stats_document(body: bytes) -> StatsDocument:
    """nsqd's ``/stats?format=json`` body, as the schema has it (no per-node rows).

    Raises :class:`~nsqbox.wire.peer_json.PeerJSONError` on a malformed body.
    """
    return decode_peer_json(body, _stats_decoder)


def _client(raw: documents.ClientStats, node: str, now_s: int) -> ClientStats:
    return ClientStats(
        node=node,
        remote_address=raw.remote_address,
        version=raw.version,
        client_id=raw.client_id,
        hostname=raw.hostname,
        user_agent=raw.user_agent,
        connect_ts=raw.connect_ts,
        connected=(now_s - raw.connect_ts) * 1_000_000_000,
        in_flight_count=raw.in_flight_count,
        ready_count=raw.ready_count,
        finish_count=raw.finish_count,
        requeue_count=raw.requeue_count,
        message_count=raw.message_count,
        sample_rate=raw.sample_rate,
        deflate=raw.deflate,
        snappy=raw.snappy,
        authed=raw.authed is True,
        auth_identity=raw.auth_identity or "",
        auth_identity_url=raw.auth_identity_url or "",
        tls=raw.tls,
        tls_cipher_suite=raw.tls_cipher_suite,
        tls_version=raw.tls_version,
        tls_negotiated_protocol=raw.tls_negotiated_protocol,
        tls_negotiated_protocol_is_mutual=raw.tls_negotiated_protocol_is_mutual,
    )


def _channel(
    raw: documents.ChannelStats, topic: str, node: str, hostname: str, now_s: int
) -> ChannelStats:
    latency = raw.e2e_processing_latency
    return ChannelStats(
        node=node,
        hostname=hostname,
        topic_name=topic,
        channel_name=raw.channel_name,
        depth=raw.depth,
        memory_depth=raw.depth - raw.backend_depth,
        backend_depth=raw.backend_depth,
        in_flight_count=raw.in_flight_count,
        deferred_count=raw.deferred_count,
        requeue_count=raw.requeue_count,
        timeout_count=raw.timeout_count,
        message_count=raw.message_count,
        client_count=raw.client_count,
        clients=[_client(c, node, now_s) for c in raw.clients or []],
        paused=raw.paused,
        e2e_processing_latency=_latency(latency, topic, raw.channel_name, node),
    )


def decode_nsqd_stats(
    body: bytes, *, node: str, hostname: str = "", now: float | None = None
) -> list[TopicStats]:
    """nsqd's ``/stats?format=json`` body as per-node rows tagged with ``node``/``hostname``.

    ``now`` (Unix seconds, default the current time) dates the clients' ``connected``.
    Raises :class:`~nsqbox.wire.peer_json.PeerJSONError` on a malformed body.
    """
    now_s = int(time.time() if now is None else now)
    topics = []
    for raw in decode_stats_document(body).topics or []:
        name = raw.topic_name
        latency = raw.e2e_processing_latency
        topics.append(
            TopicStats(
                node=node,
                hostname=hostname,
                topic_name=name,
                depth=raw.depth,
                memory_depth=raw.depth - raw.backend_depth,
                backend_depth=raw.backend_depth,
                message_count=raw.message_count,
                channels=[_channel(c, name, node, hostname, now_s) for c in raw.channels],
                paused=raw.paused,
                e2e_processing_latency=_latency(latency, name, "", node),
            )
        )
    return topics


def _by_host(row: TopicStats | ChannelStats) -> tuple[str, str]:
    return (row.hostname, row.node)


def aggregate_channel(topic: str, channel: str, rows: Sequence[ChannelStats]) -> ChannelStats:
    """Sum per-node rows of one channel into a cluster-wide row (``node == "*"``)."""
    nodes = sorted(rows, key=_by_host)
    clients = sorted((c for row in nodes for c in row.clients), key=lambda c: c.hostname)
    return ChannelStats(
        node="*",
        topic_name=topic,
        channel_name=channel,
        depth=sum(r.depth for r in nodes),
        memory_depth=sum(r.memory_depth for r in nodes),
        backend_depth=sum(r.backend_depth for r in nodes),
        in_flight_count=sum(r.in_flight_count for r in nodes),
        deferred_count=sum(r.deferred_count for r in nodes),
        requeue_count=sum(r.requeue_count for r in nodes),
        timeout_count=sum(r.timeout_count for r in nodes),
        message_count=sum(r.message_count for r in nodes),
        client_count=sum(r.client_count for r in nodes),
        nodes=nodes,
        clients=clients,
        paused=any(r.paused for r in nodes),
        e2e_processing_latency=_merge_latency(
            (r.e2e_processing_latency for r in nodes), topic, channel
        ),
    )


def aggregate_topic(topic: str, rows: Sequence[TopicStats]) -> TopicStats:
    """Sum per-node rows of one topic (channels by name) into a cluster-wide row."""
    nodes = sorted(rows, key=_by_host)
    per_channel: dict[str, list[ChannelStats]] = {}
    for row in nodes:
        for channel in row.channels:
            per_channel.setdefault(channel.channel_name, []).append(channel)
    return TopicStats(
        node="*",
        topic_name=topic,
        depth=sum(r.depth for r in nodes),
        memory_depth=sum(r.memory_depth for r in nodes),
        backend_depth=sum(r.backend_depth for r in nodes),
        message_count=sum(r.message_count for r in nodes),
        nodes=nodes,
        channels=[aggregate_channel(topic, name, cs) for name, cs in per_channel.items()],
        paused=any(r.paused for r in nodes),
        e2e_processing_latency=_merge_latency((r.e2e_processing_latency for r in nodes), topic, ""),
    )


def aggregate_topics(rows: Iterable[TopicStats]) -> list[TopicStats]:
    """Every topic in ``rows`` (per-node rows, any nodes) summed, sorted by name."""
    per_topic: dict[str, list[TopicStats]] = {}
    for row in rows:
        per_topic.setdefault(row.topic_name, []).append(row)
    return [aggregate_topic(name, per_topic[name]) for name in sorted(per_topic)]
