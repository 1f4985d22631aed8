"""nsqd's /stats, built from the domain into the shared schema (:mod:`nsqbox.wire.documents`).

The Structs (``TopicStats``, ``ChannelStats``, ``ClientStats``, ``MemStats``, the /stats
document) are the ones nsqadmin, the TUI, the test harness and the tools decode; they mirror
nsqd/stats.go and nsqd/client_v2.go field for field, Go's JSON quirks included.

Python has no Go ``runtime.MemStats``; :func:`memory_stats` fills the same
keys with the closest figures CPython offers (see its docstring).
"""

from __future__ import annotations

import gc
import os
import sys
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any, Protocol, cast

import msgspec

from ... import NSQ_VERSION
from ...go.syntax import format_duration_ns
from ...wire.documents import (
    ChannelStats,
    ClientStats,
    MemStats,
    PubCount,
    QuantileResult,
    StatsDocument,
    TopicStats,
    unset_if_empty,
)
from .quantile import Quantile

__all__ = [
    "ChannelStats",
    "ClientStats",
    "MemStats",
    "PubCount",
    "Stats",
    "StatsClient",
    "StatsDocument",
    "TopicStats",
    "aggregate_latency",
    "channel_stats",
    "client_line",
    "client_stats",
    "get_stats",
    "latency_result",
    "memory_stats",
    "stats_document",
    "topic_stats",
]

if TYPE_CHECKING:
    from .channel import Channel
    from .nsqd import NSQD
    from .topic import Topic


class Stats(msgspec.Struct, frozen=True):
    """What ``GetStats`` collects: topics (filtered) and producers."""

    topics: list[TopicStats] | None
    producers: list[ClientStats] | None


class StatsClient(Protocol):
    """What a stats row needs from a TCP client (the TCP edge's ``ClientState`` has it)."""

    client_id: str
    hostname: str
    user_agent: str
    remote_address: str
    state: int
    ready_count: int
    in_flight_count: int
    message_count: int
    finish_count: int
    requeue_count: int
    connect_time: float
    sample_rate: int
    tls: bool
    snappy: bool
    deflate: bool
    pub_counts: dict[str, int]
    tls_info: Any
    auth_state: Any


def client_stats(client: StatsClient, topic_name: str = "") -> ClientStats:
    """A client's row; ``topic_name`` limits ``pub_counts`` to that topic, as nsqd does.

    nsqd reports a single (arbitrary) pub count per producer; nsqbox reports
    them all, sorted by topic.
    """
    counts = [
        PubCount(topic, count)
        for topic, count in sorted(client.pub_counts.items())
        if not topic_name or topic == topic_name
    ]
    auth = client.auth_state
    tls = _tls_fields(client.tls_info) if client.tls else ("", "", "", False)
    return ClientStats(
        client_id=client.client_id,
        hostname=client.hostname,
        version="V2",
        remote_address=client.remote_address,
        state=client.state,
        ready_count=client.ready_count,
        in_flight_count=client.in_flight_count,
        message_count=client.message_count,
        finish_count=client.finish_count,
        requeue_count=client.requeue_count,
        connect_ts=int(client.connect_time),
        sample_rate=client.sample_rate,
        deflate=client.deflate,
        snappy=client.snappy,
        user_agent=client.user_agent,
        authed=unset_if_empty(bool(auth is not None and getattr(auth, "authorizations", None))),
        auth_identity=unset_if_empty(str(getattr(auth, "identity", "") or "")),
        auth_identity_url=unset_if_empty(str(getattr(auth, "identity_url", "") or "")),
        pub_counts=unset_if_empty(counts),
        tls=client.tls,
        tls_cipher_suite=tls[0],
        tls_version=tls[1],
        tls_negotiated_protocol=tls[2],
        tls_negotiated_protocol_is_mutual=tls[3],
    )


def client_line(client: ClientStats) -> str:
    """A client in nsqd's text /stats, one line (producers and consumers differ)."""
    port = client.remote_address.rpartition(":")[2]
    ident = f"{client.hostname}:{port} {client.user_agent}"
    connected = format_duration_ns(int(max(0.0, time.time() - client.connect_ts)) * 10**9)
    if isinstance(client.pub_counts, list) and client.pub_counts:
        total = sum(p.count for p in client.pub_counts)
        topics = ",".join(f"{p.topic}={p.count}" for p in client.pub_counts)
        return (
            f"[{client.version} {ident:<21}] msgs: {total:<8d} topics: {topics} "
            f"connected: {connected}"
        )
    return (
        f"[{client.version} {ident:<21}] state: {client.state} inflt: {client.in_flight_count:<4d} "
        f"rdy: {client.ready_count:<4d} fin: {client.finish_count:<8d} "
        f"re-q: {client.requeue_count:<8d} msgs: {client.message_count:<8d} "
        f"connected: {connected}"
    )


def _tls_fields(info: Any) -> tuple[str, str, str, bool]:
    """Cipher, version, ALPN protocol, mutual, from an ``ssl`` object (or SSLStream).

    Names are OpenSSL's (``ECDHE-RSA-AES128-GCM-SHA256``) where Go prints IANA's;
    versions are Go's spelling (``TLS1.2``).
    """
    if info is None:
        return ("", "", "", False)
    cipher = info.cipher()
    version = info.version() or ""
    alpn = info.selected_alpn_protocol() or ""
    # Go: NegotiatedProtocolIsMutual is always true since Go 1.x dropped NPN.
    return (cipher[0] if cipher else "", version.replace("TLSv", "TLS"), alpn, True)


def channel_stats(channel: Channel, include_clients: bool, topic_name: str = "") -> ChannelStats:
    """A channel's row (its clients' rows only with ``include_clients``)."""
    clients: list[ClientStats] | None = None
    if include_clients:
        clients = [
            client_stats(cast("StatsClient", c), topic_name) for c in channel.clients.values()
        ]
    return ChannelStats(
        channel_name=channel.name,
        depth=channel.depth(),
        backend_depth=channel.backend_depth(),
        in_flight_count=channel.in_flight_count(),
        deferred_count=channel.deferred_count(),
        message_count=channel.message_count,
        requeue_count=channel.requeue_count,
        timeout_count=channel.timeout_count,
        client_count=len(channel.clients),
        clients=clients,
        paused=channel.paused,
        e2e_processing_latency=latency_result(channel.e2e_latency),
    )


def topic_stats(topic: Topic, channels: list[ChannelStats]) -> TopicStats:
    """A topic's row, with its channels' latency merged as nsqd aggregates it."""
    return TopicStats(
        topic_name=topic.name,
        channels=channels,
        depth=topic.depth(),
        backend_depth=topic.backend_depth(),
        message_count=topic.message_count,
        message_bytes=topic.message_bytes,
        paused=topic.paused,
        e2e_processing_latency=latency_result(
            aggregate_latency(c.e2e_latency for c in topic.channels.values())
        ),
    )


def latency_result(quantile: Quantile | None) -> QuantileResult:
    """A quantile's result; the empty result (``percentiles: null``) for none."""
    return QuantileResult() if quantile is None else quantile.result()


def aggregate_latency(streams: Iterable[Quantile | None]) -> Quantile | None:
    """One quantile holding every given channel's samples (None when none track latency)."""
    total: Quantile | None = None
    for stream in streams:
        if stream is None:
            continue
        if total is None:
            total = Quantile(stream.move_window_time * 2, stream.percentiles)
        total.merge(stream)
    return total


def get_stats(
    nsqd: NSQD, topic: str = "", channel: str = "", include_clients: bool = True
) -> Stats:
    """nsqd's ``GetStats``: topics and channels sorted by name, filtered by name if given."""
    if topic:
        found = nsqd.topics.get(topic)
        if found is None:
            return Stats(topics=None, producers=None)
        topics = [found]
    else:
        topics = sorted(nsqd.topics.values(), key=lambda t: t.name)
    rows: list[TopicStats] = []
    for t in topics:
        if channel:
            found_channel = t.channels.get(channel)
            if found_channel is None:
                continue
            channels = [found_channel]
        else:
            channels = sorted(t.channels.values(), key=lambda c: c.name)
        rows.append(topic_stats(t, [channel_stats(c, include_clients, topic) for c in channels]))
    producers: list[ClientStats] | None = None
    if include_clients:
        # nsqd's typeProducer: a client that has published anything.
        found_producers = [
            client_stats(cast("StatsClient", c), topic)
            for c in nsqd.clients.values()
            if c.pub_counts
        ]
        producers = found_producers or None
    return Stats(topics=rows, producers=producers)


def stats_document(nsqd: NSQD, stats: Stats, memory: MemStats | None) -> StatsDocument:
    """The /stats JSON document around ``stats``."""
    return StatsDocument(
        version=NSQ_VERSION,
        health=nsqd.get_health(),
        start_time=int(nsqd.start_time),
        topics=stats.topics,
        memory=msgspec.UNSET if memory is None else memory,
        producers=stats.producers,
    )


class _GCPauses:
    """The last 256 garbage-collection pauses, like Go's ``MemStats.PauseNs`` ring.

    Installed as a ``gc.callbacks`` hook the first time memory stats are read,
    so a process that never asks pays nothing.
    """

    def __init__(self) -> None:
        self.pauses_ns: list[int] = []
        self._started = 0
        self._installed = False

    def install(self) -> None:
        if not self._installed:
            gc.callbacks.append(self._callback)
            self._installed = True

    def _callback(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._started = time.perf_counter_ns()
        elif self._started:
            self.pauses_ns.append(time.perf_counter_ns() - self._started)
            if len(self.pauses_ns) > 256:
                del self.pauses_ns[0]


_gc_pauses = _GCPauses()


def _percentile(percent: float, ordered: list[int]) -> int:
    """nsqd's ``percentile`` over a sorted list (nearest rank, rounded half up)."""
    if not ordered:
        return 0
    index = int(percent / 100.0 * len(ordered) + 0.5)
    return ordered[min(index, len(ordered) - 1)]


def _rss_bytes() -> int:
    """Resident set size: /proc/self/statm on Linux, else peak RSS from getrusage."""
    try:
        with open("/proc/self/statm", "rb") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        return peak if sys.platform == "darwin" else peak * 1024


def memory_stats() -> MemStats:
    """Process memory with nsqd's keys, from the closest CPython figures.

    * ``heap_objects``: memory blocks allocated by the interpreter
      (``sys.getallocatedblocks``);
    * ``heap_in_use_bytes``: resident set size (Go reports heap spans in use);
    * ``heap_idle_bytes``, ``heap_released_bytes``: 0 (CPython does not expose
      free arena bytes);
    * ``gc_pause_usec_100/99/95``: percentiles of the last 256 cyclic-GC pauses
      (timed with ``gc.callbacks`` from the first call on);
    * ``next_gc_bytes``: allocations left before the next generation-0
      collection (CPython triggers on counts, not bytes);
    * ``gc_total_runs``: collections in all generations since start.
    """
    _gc_pauses.install()
    pauses = sorted(_gc_pauses.pauses_ns)
    threshold = gc.get_threshold()[0]
    return MemStats(
        heap_objects=sys.getallocatedblocks(),
        heap_idle_bytes=0,
        heap_in_use_bytes=_rss_bytes(),
        heap_released_bytes=0,
        gc_pause_usec_100=_percentile(100.0, pauses) // 1000,
        gc_pause_usec_99=_percentile(99.0, pauses) // 1000,
        gc_pause_usec_95=_percentile(95.0, pauses) // 1000,
        next_gc_bytes=max(0, threshold - gc.get_count()[0]),
        gc_total_runs=sum(s["collections"] for s in gc.get_stats()),
    )
