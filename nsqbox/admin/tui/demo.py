"""A fixed, made-up cluster for screenshots and snapshot tests: no servers, no clock.

:func:`demo_snapshot` is three nsqds (one not answering) with a few topics, channels, clients,
latencies, a paused topic, a paused channel and a tombstone; :class:`DemoBackend` serves it
with fixed rates and records the actions asked of it instead of doing them. Times are pinned
to :data:`DEMO_TIME` (show them in UTC for the same picture everywhere).
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager

from ..clusterinfo import UpstreamError
from ..journal import EventsResult, GivenUpResult, TroublesQuery, TroublesResult
from ..model import ClusterSnapshot, NodeSnapshot
from ..peek import PeekQuery, PeekResult
from ..snapshot_client import LoadedFrom, SavedSnapshot, SnapshotInfo
from ..stats import (
    ChannelStats,
    ClientStats,
    Latency,
    Percentile,
    Producer,
    ProducerTopic,
    TopicStats,
    aggregate_topics,
)
from .backend import Backend, Outcome
from .demo_faults import DemoFaults
from .demo_journal import demo_given_up, demo_journey, demo_troubles
from .demo_messages import demo_peek

__all__ = ["DEMO_TIME", "DemoBackend", "demo_snapshot", "open_demo_backend"]

#: When the demo snapshot was "taken": 2026-01-01 12:34:56 UTC.
DEMO_TIME = 1_767_270_896.0
_NS = 1_000_000_000


def _latency(p50_ms: float, p99_ms: float) -> Latency:
    return Latency(
        count=2,
        percentiles=[
            Percentile(0.99, p99_ms * 1e6, p99_ms * 1e6, p99_ms * 1e6, p99_ms * 1e6, 1),
            Percentile(0.5, p50_ms * 1e6, p50_ms * 1e6, p50_ms * 1e6, p50_ms * 1e6, 1),
        ],
    )


def _client(node: str, host: str, port: int, age_s: int, **counts: int | bool | str) -> ClientStats:
    return ClientStats(
        node=node,
        remote_address=f"{host}:{port}",
        hostname=host.replace("10.1.0.", "worker-"),
        client_id=host.replace("10.1.0.", "worker-"),
        version="V2",
        connect_ts=int(DEMO_TIME) - age_s,
        connected=age_s * _NS,
        **counts,  # type: ignore[arg-type]
    )


def _node(name: str, host: str, tcp: int, topics: list[tuple[str, bool]]) -> Producer:
    return Producer(
        remote_addresses=[f"10.0.0.9:4161/{name.split(':')[0]}:{40000 + tcp % 100}"],
        remote_address=f"{name.split(':')[0]}:{40000 + tcp % 100}",
        hostname=host,
        broadcast_address=name.split(":")[0],
        tcp_port=tcp,
        http_port=int(name.split(":")[1]),
        version="1.3.0",
        topics=[ProducerTopic(t, tombstoned) for t, tombstoned in topics],
    )


def _node_rows(node: str, host: str, scale: int) -> list[TopicStats]:
    """One node's topic rows; ``scale`` varies the numbers between nodes."""
    billing_clients = [
        _client(node, f"10.1.0.{10 + scale}", 51000 + scale, 3723 + scale * 60,
                user_agent="pynsq/0.9.1", ready_count=25, in_flight_count=7 + scale,
                finish_count=120_340 * scale, requeue_count=12 * scale,
                message_count=120_359 * scale, snappy=True),
        _client(node, f"10.1.0.{20 + scale}", 52000 + scale, 86_500 + scale,
                user_agent="go-nsq/1.1.0", ready_count=50, in_flight_count=3,
                finish_count=98_001 * scale, requeue_count=4, message_count=98_008 * scale,
                tls=True, tls_version="TLS1.3", deflate=True),
    ]  # fmt: skip
    billing = ChannelStats(
        node=node, hostname=host, topic_name="orders", channel_name="billing",
        depth=42 * scale, memory_depth=42 * scale, in_flight_count=10 + scale,
        deferred_count=3, requeue_count=16 * scale, timeout_count=2, message_count=218_400 * scale,
        client_count=2, clients=billing_clients, e2e_processing_latency=_latency(4.2, 38.0),
    )  # fmt: skip
    shipping = ChannelStats(
        node=node, hostname=host, topic_name="orders", channel_name="shipping",
        depth=1_250 * scale, memory_depth=1_000, backend_depth=1_250 * scale - 1_000,
        message_count=218_400 * scale, paused=True, e2e_processing_latency=_latency(2.0, 9.5),
    )  # fmt: skip
    orders = TopicStats(
        node=node, hostname=host, topic_name="orders", depth=0, message_count=218_400 * scale,
        channels=[billing, shipping], e2e_processing_latency=_latency(1.1, 6.8),
    )  # fmt: skip
    rows = [orders]
    if scale == 1:
        rows.append(TopicStats(
            node=node, hostname=host, topic_name="signups", depth=3_120, memory_depth=3_120,
            message_count=3_120,
        ))  # fmt: skip
        rows.append(TopicStats(
            node=node, hostname=host, topic_name="clicks", depth=10_000, memory_depth=10_000,
            message_count=2_500_000, paused=True,
            channels=[ChannelStats(
                node=node, hostname=host, topic_name="clicks", channel_name="warehouse",
                depth=0, message_count=2_490_000, client_count=0,
            )],
        ))  # fmt: skip
    return rows


def demo_snapshot() -> ClusterSnapshot:
    """The demo cluster: nsqd-a and nsqd-b answer, nsqd-c does not."""
    a, b, c = "10.0.0.1:4151", "10.0.0.2:4151", "10.0.0.3:4151"
    nodes = (
        NodeSnapshot(
            _node(a, "nsqd-a", 4150, [("clicks", False), ("orders", False), ("signups", False)]),
            tuple(_node_rows(a, "nsqd-a", 1)),
        ),
        NodeSnapshot(
            _node(b, "nsqd-b", 4150, [("clicks", True), ("orders", False)]),
            tuple(_node_rows(b, "nsqd-b", 2)),
        ),
        NodeSnapshot(
            _node(c, "nsqd-c", 4150, [("orders", False)]),
            error=UpstreamError(
                c, f"http://{c}/stats?format=json", "All connection attempts failed"
            ),
        ),
    )
    return ClusterSnapshot(
        taken_at=1000.0,
        wall_time=DEMO_TIME,
        nodes=nodes,
        topics=tuple(aggregate_topics(t for n in nodes for t in n.topics)),
        registered_topics=("audit", "clicks", "orders", "signups"),
    )


def _series(seed: int, base: float, points: int = 30) -> list[float | None]:
    """A made-up but fixed rate history: a slow wave plus a ripple."""
    return [
        round(base * (1 + 0.5 * math.sin((i + seed) / 4) + 0.15 * math.sin(i * seed)), 1)
        for i in range(points)
    ]


class DemoBackend:
    """A :class:`~.backend.Backend` that serves :func:`demo_snapshot` and records actions."""

    description = "lookupd 10.0.0.9:4161 (demo)"

    def __init__(self, snapshot: ClusterSnapshot | None = None) -> None:
        self.snapshot = snapshot or demo_snapshot()
        self.faults = DemoFaults()
        #: The box was loaded from a snapshot 25 minutes before the demo's time.
        self.snapshots = SnapshotInfo(
            loaded=LoadedFrom(
                file="bug.jsonl.gz",
                loaded_at_ns=int(DEMO_TIME - 1520) * _NS,
                messages=1284,
                nodes=2,
            ),
            directory="/home/dev/shop",
        )
        #: ``(method, args)`` of every action asked for.
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    async def refresh(self) -> ClusterSnapshot:
        """The same snapshot, every time."""
        return self.snapshot

    def rate_series(
        self, topic: str, channel: str | None = None, *, node: str = "*"
    ) -> list[float | None]:
        """A fixed history per topic/channel/node."""
        key = f"{topic}/{channel}/{node}"
        seed = sum(map(ord, key)) % 17 + 1
        base = {"orders": 140.0, "clicks": 0.0, "signups": 3.0}.get(topic, 0.0)
        if node != "*":
            base /= 2
        return _series(seed, base)

    def rate(self, topic: str, channel: str | None = None, *, node: str = "*") -> float | None:
        """The last point of :meth:`rate_series`."""
        return self.rate_series(topic, channel, node=node)[-1]

    async def peek(self, nodes: Sequence[Producer], query: PeekQuery) -> PeekResult:
        """A fixed page (:mod:`.demo_messages`), whatever the cursor."""
        return demo_peek(nodes, query.topic, query.channel)

    async def journey(self, nodes: Sequence[Producer], msg_id: str) -> EventsResult:
        """A fixed journey (:mod:`.demo_journal`) for one message, none for the others."""
        return demo_journey(nodes, msg_id)

    async def troubles(self, nodes: Sequence[Producer], query: TroublesQuery) -> TroublesResult:
        """Fixed troubles of channel *billing* of *orders*."""
        return demo_troubles(nodes, query.topic, query.channel)

    async def given_up(self, nodes: Sequence[Producer], query: TroublesQuery) -> GivenUpResult:
        """Fixed given-up messages of channel *billing* of *orders*."""
        return demo_given_up(nodes, query.topic, query.channel)

    async def _record(self, name: str, *args: object) -> Outcome:
        self.calls.append((name, args))
        return ()

    async def create_topic(self, topic: str, channel: str = "") -> Outcome:
        """Recorded."""
        return await self._record("create_topic", topic, channel)

    async def delete_topic(self, topic: str) -> Outcome:
        """Recorded."""
        return await self._record("delete_topic", topic)

    async def delete_channel(self, topic: str, channel: str) -> Outcome:
        """Recorded."""
        return await self._record("delete_channel", topic, channel)

    async def pause_topic(self, topic: str) -> Outcome:
        """Recorded."""
        return await self._record("pause_topic", topic)

    async def unpause_topic(self, topic: str) -> Outcome:
        """Recorded."""
        return await self._record("unpause_topic", topic)

    async def empty_topic(self, topic: str) -> Outcome:
        """Recorded."""
        return await self._record("empty_topic", topic)

    async def pause_channel(self, topic: str, channel: str) -> Outcome:
        """Recorded."""
        return await self._record("pause_channel", topic, channel)

    async def unpause_channel(self, topic: str, channel: str) -> Outcome:
        """Recorded."""
        return await self._record("unpause_channel", topic, channel)

    async def empty_channel(self, topic: str, channel: str) -> Outcome:
        """Recorded."""
        return await self._record("empty_channel", topic, channel)

    async def tombstone_topic(self, topic: str, node: str) -> Outcome:
        """Recorded."""
        return await self._record("tombstone_topic", topic, node)

    async def publish(self, node: str, topic: str, body: bytes) -> Outcome:
        """Recorded."""
        return await self._record("publish", node, topic, body)

    async def save_snapshot(self, name: str) -> SavedSnapshot:
        """Recorded; "saved" in the demo's directory."""
        await self._record("save_snapshot", name)
        return SavedSnapshot(
            file=name, directory="/home/dev/shop", nodes=3, topics=4, channels=6, messages=1290
        )


@asynccontextmanager
async def open_demo_backend(backend: DemoBackend | None = None) -> AsyncIterator[Backend]:
    """A :data:`~.backend.BackendFactory` result for ``backend`` (default: a new one)."""
    yield backend or DemoBackend()
