"""The cluster model: periodic snapshots of an NSQ cluster, with rates from their history.

This is what a UI builds on (the Textual TUI does). It reads only public HTTP endpoints —
lookupd ``/nodes`` and ``/topics``, each nsqd's ``/stats?format=json`` — so it works the same
against nsqbox and a real NSQ cluster, and it runs under asyncio and trio alike (httpx and anyio,
no trio import)::

    async with open_cluster_model(lookupd_http_addresses=["127.0.0.1:4161"]) as model:
        snap = await model.refresh()              # a ClusterSnapshot; never raises for
        for topic in snap.topics:                 # unreachable hosts (see snap.errors)
            print(topic.topic_name, topic.depth, model.rate(topic.topic_name))
        await model.actions.pause_channel("orders", "billing")

Public API:

* :class:`ClusterModel` — ``refresh()``, ``snapshot`` (latest), ``history`` (oldest first),
  ``rate()`` / ``rate_series()`` / ``series()`` for rates and sparklines, ``snapshots(interval)``
  (an async iterator that refreshes forever), ``actions`` (:class:`~.actions.ClusterActions`),
  ``info`` (:class:`~.clusterinfo.ClusterInfo`);
* :class:`ClusterSnapshot` — ``nodes``, ``topics`` (cluster-wide rows with per-node ``nodes``
  and aggregated ``channels``), ``topic()``, ``channel()``, ``clients()``, ``node()``,
  ``errors``, ``node_errors``;
* :class:`NodeSnapshot` — one nsqd: its ``producer`` (addresses, version, registered topics),
  its own ``topics`` rows, and ``error`` when its ``/stats`` failed.

The rows are :mod:`nsqbox.admin.stats` Structs (frozen): :class:`~.stats.TopicStats`,
:class:`~.stats.ChannelStats`, :class:`~.stats.ClientStats`, :class:`~.stats.Producer`.
"""

from __future__ import annotations

import itertools
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field

import anyio
import httpx

from .actions import ClusterActions
from .clusterinfo import ClusterError, ClusterInfo, UpstreamError, make_http_client
from .stats import ChannelStats, ClientStats, Producer, TopicStats, aggregate_topics

__all__ = [
    "ALL_NODES",
    "ClusterModel",
    "ClusterSnapshot",
    "NodeSnapshot",
    "open_cluster_model",
]

#: The ``node`` argument meaning "summed over every node".
ALL_NODES = "*"


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One nsqd at one refresh: who it is, its own topic rows, or why they are missing."""

    producer: Producer
    #: This node's rows (``node`` == :attr:`name`), channels and clients included.
    topics: tuple[TopicStats, ...] = ()
    #: Why ``/stats`` failed on this node at this refresh; None when it answered.
    error: UpstreamError | None = None

    @property
    def name(self) -> str:
        """The node's name: its HTTP address, ``broadcast_address:http_port``."""
        return self.producer.http_address

    @property
    def ok(self) -> bool:
        """Whether the node answered this refresh."""
        return self.error is None

    @property
    def message_count(self) -> int:
        """Messages published to this node, over all its topics."""
        return sum(t.message_count for t in self.topics)

    @property
    def depth(self) -> int:
        """Messages queued on this node, topics and channels together."""
        return sum(t.depth + sum(c.depth for c in t.channels) for t in self.topics)

    @property
    def client_count(self) -> int:
        """Consumers connected to this node's channels."""
        return sum(c.client_count for t in self.topics for c in t.channels)

    def topic(self, name: str) -> TopicStats | None:
        """This node's row for topic ``name``, or None."""
        return next((t for t in self.topics if t.topic_name == name), None)


@dataclass(frozen=True, slots=True)
class ClusterSnapshot:
    """The whole cluster at one refresh. Rows are frozen; nothing here changes later."""

    #: When it was taken, on the model's clock (monotonic seconds; for rates).
    taken_at: float
    #: When it was taken, Unix seconds (for display).
    wall_time: float
    #: Every nsqd, sorted by hostname then name.
    nodes: tuple[NodeSnapshot, ...] = ()
    #: Every topic any node has, summed over the nodes (``node == "*"``), sorted by name.
    topics: tuple[TopicStats, ...] = ()
    #: Topics the lookupds know, with or without a node that has them, sorted.
    registered_topics: tuple[str, ...] = ()
    #: Hosts that did not answer the node listing: lookupds, or without lookupds the nsqds
    #: (which are then missing from ``nodes``).
    discovery_errors: tuple[UpstreamError, ...] = ()
    _topics_by_name: dict[str, TopicStats] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        self._topics_by_name.update((t.topic_name, t) for t in self.topics)

    @property
    def errors(self) -> tuple[UpstreamError, ...]:
        """Every failed request of this refresh: discovery first, then nodes."""
        return self.discovery_errors + tuple(n.error for n in self.nodes if n.error is not None)

    @property
    def node_errors(self) -> dict[str, str]:
        """``{node name: error text}`` for the nodes that did not answer."""
        return {n.name: str(n.error) for n in self.nodes if n.error is not None}

    @property
    def topic_names(self) -> list[str]:
        """Every topic, on a node or only registered with lookupd, sorted."""
        return sorted({*self._topics_by_name, *self.registered_topics})

    def topic(self, name: str) -> TopicStats | None:
        """The cluster-wide row of topic ``name`` (per-node rows in its ``nodes``), or None."""
        return self._topics_by_name.get(name)

    def channel(self, topic: str, channel: str) -> ChannelStats | None:
        """The cluster-wide row of a channel (per-node rows in its ``nodes``), or None."""
        row = self.topic(topic)
        return row.channel(channel) if row is not None else None

    def clients(self, topic: str, channel: str) -> list[ClientStats]:
        """Every consumer of a channel on any node (each tagged with its ``node``)."""
        row = self.channel(topic, channel)
        return list(row.clients) if row is not None else []

    def node(self, name: str) -> NodeSnapshot | None:
        """The node called ``name`` (its HTTP address), or None."""
        return next((n for n in self.nodes if n.name == name), None)

    def row(
        self, topic: str, channel: str | None = None, node: str = ALL_NODES
    ) -> TopicStats | ChannelStats | None:
        """A topic or channel row, cluster-wide (``node="*"``) or of one node; None if absent."""
        if node == ALL_NODES:
            top = self.topic(topic)
        else:
            found = self.node(node)
            top = found.topic(topic) if found is not None else None
        if top is None or channel is None:
            return top
        return top.channel(channel)


class ClusterModel:
    """Snapshots of one cluster, known by its lookupds (or, without any, by its nsqds).

    ``client`` is an ``httpx.AsyncClient`` the caller owns (:func:`open_cluster_model` makes
    one). ``history`` is how many snapshots are kept for rates; ``clock`` is the time source
    for ``taken_at`` (monotonic seconds).
    """

    def __init__(
        self,
        client: httpx.AsyncClient,
        *,
        lookupd_http_addresses: Sequence[str] = (),
        nsqd_http_addresses: Sequence[str] = (),
        history: int = 60,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if not lookupd_http_addresses and not nsqd_http_addresses:
            raise ValueError("a cluster needs lookupd or nsqd HTTP addresses")
        self.lookupd_http_addresses = list(lookupd_http_addresses)
        self.nsqd_http_addresses = list(nsqd_http_addresses)
        #: The queries behind the model, for anything it does not cover.
        self.info = ClusterInfo(client)
        #: Admin actions on the same cluster (pause, empty, delete, tombstone, create).
        self.actions = ClusterActions(
            self.info,
            lookupd_http_addresses=self.lookupd_http_addresses,
            nsqd_http_addresses=self.nsqd_http_addresses,
        )
        self._history: deque[ClusterSnapshot] = deque(maxlen=max(2, history))
        self._clock = clock

    @property
    def snapshot(self) -> ClusterSnapshot | None:
        """The latest snapshot, or None before the first :meth:`refresh`."""
        return self._history[-1] if self._history else None

    @property
    def history(self) -> tuple[ClusterSnapshot, ...]:
        """The kept snapshots, oldest first."""
        return tuple(self._history)

    async def refresh(self) -> ClusterSnapshot:
        """Read the whole cluster now, keep the snapshot in the history and return it.

        Unreachable lookupds and nodes do not raise: they show up in the snapshot's
        ``errors`` (a node that fails keeps its place in ``nodes``, with ``error`` set).
        """
        discovery_errors: list[UpstreamError] = []
        registered: list[str] = []
        producers: list[Producer] = []
        try:
            found = await self.info.producers(self.lookupd_http_addresses, self.nsqd_http_addresses)
            producers, discovery_errors = found.value, list(found.errors)
            if self.lookupd_http_addresses:
                topics = await self.info.lookupd_topics(self.lookupd_http_addresses)
                registered = topics.value
        except ClusterError as exc:
            discovery_errors = list(exc.errors)
        results = await self.info.nodes_stats(producers)
        nodes = tuple(
            NodeSnapshot(p, error=r) if isinstance(r, UpstreamError) else NodeSnapshot(p, tuple(r))
            for p, r in zip(producers, results, strict=True)
        )
        snapshot = ClusterSnapshot(
            taken_at=self._clock(),
            wall_time=time.time(),
            nodes=nodes,
            topics=tuple(aggregate_topics(t for n in nodes for t in n.topics)),
            registered_topics=tuple(registered),
            discovery_errors=tuple(discovery_errors),
        )
        self._history.append(snapshot)
        return snapshot

    async def snapshots(self, interval: float) -> AsyncIterator[ClusterSnapshot]:
        """Refresh now and then every ``interval`` seconds, yielding each snapshot."""
        while True:
            started = self._clock()
            yield await self.refresh()
            await anyio.sleep(max(0.0, interval - (self._clock() - started)))

    # -- history ------------------------------------------------------------------------------

    def series(
        self,
        topic: str,
        channel: str | None = None,
        *,
        node: str = ALL_NODES,
        field: str = "message_count",
    ) -> list[tuple[float, int | None]]:
        """``(taken_at, value)`` of one row's ``field`` across the history, oldest first.

        ``field`` is any integer field of the row (``depth``, ``in_flight_count``...); the
        value is None in snapshots where the row is absent.
        """
        out: list[tuple[float, int | None]] = []
        for snap in self._history:
            row = snap.row(topic, channel, node)
            out.append((snap.taken_at, None if row is None else int(getattr(row, field))))
        return out

    def rate_series(
        self, topic: str, channel: str | None = None, *, node: str = ALL_NODES
    ) -> list[float | None]:
        """Messages per second between consecutive snapshots, oldest first (for sparklines).

        One entry fewer than the history; None where the row is missing at either end.
        """
        points = self.series(topic, channel, node=node)
        return [_rate(a, b) for a, b in itertools.pairwise(points)]

    def rate(
        self,
        topic: str,
        channel: str | None = None,
        *,
        node: str = ALL_NODES,
        window: float | None = None,
    ) -> float | None:
        """Messages per second into a topic or channel (``message_count``'s growth).

        Over the last two snapshots, or over the oldest snapshot at most ``window`` seconds
        older than the latest. None until two snapshots have the row. A counter that went
        down (a node restarted, the topic was re-created) counts as 0.
        """
        points = [p for p in self.series(topic, channel, node=node) if p[1] is not None]
        if len(points) < 2:
            return None
        last = points[-1]
        first = points[-2]
        if window is not None:
            first = next((p for p in points if last[0] - p[0] <= window), first)
            if first is last:
                first = points[-2]
        return _rate(first, last)


def _rate(a: tuple[float, int | None], b: tuple[float, int | None]) -> float | None:
    (t0, c0), (t1, c1) = a, b
    if c0 is None or c1 is None or t1 <= t0:
        return None
    return max(0, c1 - c0) / (t1 - t0)


@asynccontextmanager
async def open_cluster_model(
    *,
    lookupd_http_addresses: Sequence[str] = (),
    nsqd_http_addresses: Sequence[str] = (),
    history: int = 60,
    connect_timeout: float = 2.0,
    request_timeout: float = 5.0,
) -> AsyncIterator[ClusterModel]:
    """A :class:`ClusterModel` with its own HTTP client, closed on exit.

    The timeouts are nsqadmin's ``--http-client-connect-timeout`` and
    ``--http-client-request-timeout`` (seconds). Proxy settings from the environment are
    ignored, as NSQ's tools do.
    """
    addresses = [*lookupd_http_addresses, *nsqd_http_addresses]
    async with make_http_client(connect_timeout, request_timeout, addresses=addresses) as client:
        yield ClusterModel(
            client,
            lookupd_http_addresses=lookupd_http_addresses,
            nsqd_http_addresses=nsqd_http_addresses,
            history=history,
        )
