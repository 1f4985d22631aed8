"""What the TUI needs from a cluster, and the adapter that gets it from a real one.

The screens never touch HTTP. They read :class:`ClusterSnapshot` objects and rates, and ask for
actions, through a :class:`Backend`. :class:`ModelBackend` is the real one: a
:class:`~nsqbox.admin.model.ClusterModel` (lookupd ``/nodes``, nsqd ``/stats``) and its
:class:`~nsqbox.admin.actions.ClusterActions`, plus nsqd's HTTP ``/pub`` for publishing, the
nodes' journals (journeys, troubles), and the nodes' (or the admin service's) fault routes
for faults; with an admin service, its ``/api/snapshot`` too (saving a snapshot of the box,
and where the box was loaded from, read at each refresh). Tests and the screenshot script
use a fixed one (:mod:`.demo`).

A backend is opened by a :data:`BackendFactory` (an async context manager), so the app owns its
HTTP client for exactly as long as it runs.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

import httpx

from ..clusterinfo import UpstreamError, base_url
from ..faults import ClusterFaults, FaultSource
from ..faults_client import AdminFaults
from ..journal import (
    EventsResult,
    GivenUpResult,
    JournalQuery,
    TroublesQuery,
    TroublesResult,
    read_events,
    read_given_up,
    read_troubles,
)
from ..model import ClusterModel, ClusterSnapshot, open_cluster_model
from ..peek import PeekQuery, PeekResult, peek_nodes
from ..snapshot_client import (
    AdminSnapshots,
    LoadedFrom,
    SavedSnapshot,
    SnapshotClientError,
    SnapshotInfo,
)
from ..stats import Producer

__all__ = [
    "JOURNEY_LIMIT",
    "Backend",
    "BackendFactory",
    "LoadedFrom",
    "ModelBackend",
    "Outcome",
    "SavedSnapshot",
    "SnapshotClientError",
    "SnapshotInfo",
    "open_model_backend",
]

#: What an action returns: the errors of the hosts that failed (empty on full success).
Outcome = tuple[UpstreamError, ...]
#: The most events of one message's journey read from one node (nsqd's most per page).
JOURNEY_LIMIT = 1000


class Backend(Protocol):
    """A cluster as the TUI sees it: snapshots, rates and actions."""

    #: Where the cluster is read from, for the status line (``lookupd 127.0.0.1:4161``).
    description: str

    @property
    def faults(self) -> FaultSource | None:
        """The cluster's faults (the Faults view), or None when there are none to read."""
        ...

    @property
    def snapshots(self) -> SnapshotInfo | None:
        """What the box's admin service said of its snapshots at the last refresh (where it
        was loaded from, where it saves), or None without one."""
        ...

    async def save_snapshot(self, name: str) -> SavedSnapshot:
        """Have the box save a snapshot of itself as ``name`` in its directory;
        SnapshotClientError when it cannot (no admin service: status 0)."""
        ...

    async def refresh(self) -> ClusterSnapshot:
        """Read the cluster now; unreachable hosts are in the snapshot's ``errors``."""
        ...

    def rate(self, topic: str, channel: str | None = None, *, node: str = "*") -> float | None:
        """Messages per second into a topic or channel; None until known."""
        ...

    def rate_series(
        self, topic: str, channel: str | None = None, *, node: str = "*"
    ) -> list[float | None]:
        """Rates between consecutive refreshes, oldest first (for sparklines)."""
        ...

    async def peek(self, nodes: Sequence[Producer], query: PeekQuery) -> PeekResult:
        """One page of what the query's channel (or topic) holds on ``nodes``, changing nothing.

        nsqbox's peek route (:func:`~nsqbox.admin.peek.peek_nodes`): real nsqd is reported
        as not supported; ``query.cursor`` is the previous page's ``next``.
        """
        ...

    async def journey(self, nodes: Sequence[Producer], msg_id: str) -> EventsResult:
        """Message ``msg_id``'s events on ``nodes``, in broker-time order (nsqbox's journal,
        :func:`~nsqbox.admin.journal.read_events`; real nsqd is reported as not supported)."""
        ...

    async def troubles(self, nodes: Sequence[Producer], query: TroublesQuery) -> TroublesResult:
        """The query's channel's messages in trouble on ``nodes`` (nsqbox's journal)."""
        ...

    async def given_up(self, nodes: Sequence[Producer], query: TroublesQuery) -> GivenUpResult:
        """The messages the query's channel's clients gave up on, on ``nodes``."""
        ...

    async def create_topic(self, topic: str, channel: str = "") -> Outcome:
        """Create a topic (and a channel of it when ``channel`` is given)."""
        ...

    async def delete_topic(self, topic: str) -> Outcome:
        """Delete a topic everywhere."""
        ...

    async def delete_channel(self, topic: str, channel: str) -> Outcome:
        """Delete a channel everywhere."""
        ...

    async def pause_topic(self, topic: str) -> Outcome:
        """Pause a topic everywhere."""
        ...

    async def unpause_topic(self, topic: str) -> Outcome:
        """Unpause a topic everywhere."""
        ...

    async def empty_topic(self, topic: str) -> Outcome:
        """Drop a topic's queued messages everywhere."""
        ...

    async def pause_channel(self, topic: str, channel: str) -> Outcome:
        """Pause a channel everywhere."""
        ...

    async def unpause_channel(self, topic: str, channel: str) -> Outcome:
        """Unpause a channel everywhere."""
        ...

    async def empty_channel(self, topic: str, channel: str) -> Outcome:
        """Drop a channel's queued, in-flight and deferred messages everywhere."""
        ...

    async def tombstone_topic(self, topic: str, node: str) -> Outcome:
        """Tombstone ``node`` (its HTTP address) for ``topic`` and delete the topic there."""
        ...

    async def publish(self, node: str, topic: str, body: bytes) -> Outcome:
        """Publish one message through ``node``'s (HTTP address) ``/pub``."""
        ...


#: Opens a backend for as long as the app runs.
BackendFactory = Callable[[], AbstractAsyncContextManager[Backend]]


class ModelBackend:
    """A :class:`Backend` over a :class:`ClusterModel` and the HTTP client it uses."""

    def __init__(self, model: ClusterModel, *, admin_http_address: str | None = None) -> None:
        self.model = model
        #: Through the admin service when given (it can restart nodes), else the nodes.
        self.faults: FaultSource = (
            AdminFaults(model.info.client, admin_http_address)
            if admin_http_address
            else ClusterFaults(model.info, model.lookupd_http_addresses, model.nsqd_http_addresses)
        )
        if model.lookupd_http_addresses:
            self.description = "lookupd " + ", ".join(model.lookupd_http_addresses)
        else:
            self.description = "nsqd " + ", ".join(model.nsqd_http_addresses)
        self._actions = model.actions
        self._snapshots = (
            AdminSnapshots(model.info.client, admin_http_address) if admin_http_address else None
        )
        self.snapshots: SnapshotInfo | None = None

    async def refresh(self) -> ClusterSnapshot:
        """See :meth:`ClusterModel.refresh`; then the admin service's ``GET /api/snapshot``
        (its failure only leaves :attr:`snapshots` None: a cluster without a box has none)."""
        snapshot = await self.model.refresh()
        if self._snapshots is not None:
            try:
                self.snapshots = await self._snapshots.info()
            except SnapshotClientError:
                self.snapshots = None
        return snapshot

    async def save_snapshot(self, name: str) -> SavedSnapshot:
        """``POST /api/snapshot?file=NAME`` on the admin service."""
        if self._snapshots is None:
            raise SnapshotClientError(
                0, "saving a snapshot needs nsqbox's admin service (--admin-http-address)"
            )
        return await self._snapshots.save(name)

    def rate(self, topic: str, channel: str | None = None, *, node: str = "*") -> float | None:
        """See :meth:`ClusterModel.rate`."""
        return self.model.rate(topic, channel, node=node)

    def rate_series(
        self, topic: str, channel: str | None = None, *, node: str = "*"
    ) -> list[float | None]:
        """See :meth:`ClusterModel.rate_series`."""
        return self.model.rate_series(topic, channel, node=node)

    async def peek(self, nodes: Sequence[Producer], query: PeekQuery) -> PeekResult:
        """See :func:`~nsqbox.admin.peek.peek_nodes`."""
        return await peek_nodes(self.model.info, nodes, query)

    async def journey(self, nodes: Sequence[Producer], msg_id: str) -> EventsResult:
        """See :func:`~nsqbox.admin.journal.read_events` (up to 1000 events a node)."""
        query = JournalQuery(msg_id=msg_id, limit=JOURNEY_LIMIT)
        return await read_events(self.model.info, nodes, query)

    async def troubles(self, nodes: Sequence[Producer], query: TroublesQuery) -> TroublesResult:
        """See :func:`~nsqbox.admin.journal.read_troubles`."""
        return await read_troubles(self.model.info, nodes, query)

    async def given_up(self, nodes: Sequence[Producer], query: TroublesQuery) -> GivenUpResult:
        """See :func:`~nsqbox.admin.journal.read_given_up`."""
        return await read_given_up(self.model.info, nodes, query)

    async def create_topic(self, topic: str, channel: str = "") -> Outcome:
        """See :meth:`ClusterActions.create_topic`."""
        return await self._actions.create_topic(topic, channel)

    async def delete_topic(self, topic: str) -> Outcome:
        """See :meth:`ClusterActions.delete_topic`."""
        return await self._actions.delete_topic(topic)

    async def delete_channel(self, topic: str, channel: str) -> Outcome:
        """See :meth:`ClusterActions.delete_channel`."""
        return await self._actions.delete_channel(topic, channel)

    async def pause_topic(self, topic: str) -> Outcome:
        """See :meth:`ClusterActions.pause_topic`."""
        return await self._actions.pause_topic(topic)

    async def unpause_topic(self, topic: str) -> Outcome:
        """See :meth:`ClusterActions.unpause_topic`."""
        return await self._actions.unpause_topic(topic)

    async def empty_topic(self, topic: str) -> Outcome:
        """See :meth:`ClusterActions.empty_topic`."""
        return await self._actions.empty_topic(topic)

    async def pause_channel(self, topic: str, channel: str) -> Outcome:
        """See :meth:`ClusterActions.pause_channel`."""
        return await self._actions.pause_channel(topic, channel)

    async def unpause_channel(self, topic: str, channel: str) -> Outcome:
        """See :meth:`ClusterActions.unpause_channel`."""
        return await self._actions.unpause_channel(topic, channel)

    async def empty_channel(self, topic: str, channel: str) -> Outcome:
        """See :meth:`ClusterActions.empty_channel`."""
        return await self._actions.empty_channel(topic, channel)

    async def tombstone_topic(self, topic: str, node: str) -> Outcome:
        """See :meth:`ClusterActions.tombstone_topic_producer`."""
        return await self._actions.tombstone_topic_producer(topic, node)

    async def publish(self, node: str, topic: str, body: bytes) -> Outcome:
        """POST ``body`` to ``node``'s ``/pub?topic=`` (nsqd answers ``OK``)."""
        url = base_url(node) + "/pub"
        try:
            response = await self.model.info.client.post(url, params={"topic": topic}, content=body)
        except httpx.HTTPError as exc:
            return (UpstreamError(node, url, str(exc) or type(exc).__name__),)
        if response.status_code != 200:
            message = f"got response {response.status_code} {response.text!r}"
            return (UpstreamError(node, url, message, response.status_code),)
        return ()


@asynccontextmanager
async def open_model_backend(
    *,
    lookupd_http_addresses: Sequence[str] = (),
    nsqd_http_addresses: Sequence[str] = (),
    connect_timeout: float = 2.0,
    request_timeout: float = 5.0,
    admin_http_address: str | None = None,
) -> AsyncIterator[Backend]:
    """A :class:`ModelBackend` with its own HTTP client, closed on exit; its faults go
    through the admin service at ``admin_http_address`` when given."""
    async with open_cluster_model(
        lookupd_http_addresses=lookupd_http_addresses,
        nsqd_http_addresses=nsqd_http_addresses,
        connect_timeout=connect_timeout,
        request_timeout=request_timeout,
    ) as model:
        yield ModelBackend(model, admin_http_address=admin_http_address)
