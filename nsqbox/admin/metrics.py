"""The admin service's ``GET /metrics``: every nsqd it sees, for Prometheus (docs/metrics.md).

nsqbox's own addition. On each scrape the exporter asks for the cluster's nsqds as the rest of
the admin does (the lookupds' ``/nodes``, or the ``--nsqd-http-address`` nodes' ``/info``),
then every node's ``/stats?format=json`` concurrently, and exports the families of
:mod:`nsqbox.metrics.families` with a ``node`` label (the node's HTTP address, as the admin's
``/api/nodes`` names it), plus ``nsqd_up`` per node: 0 and no other series for a node that
did not answer (a ``--nsqd-http-address`` node whose ``/info`` fails is named by the address
given, as its own name is not known). It reads only nsqd's public HTTP API, so it exports a
real NSQ cluster too.

On nsqbox's own ``/metrics`` the connection count is the nsqd's open TCP connections; here it
is the connections ``/stats`` lists (consumers and producers), which leaves out connections
that have neither subscribed nor published yet. ``nsqd_mem_*`` come from ``/stats``'s
``memory`` (Go's runtime figures on real nsqd). The admin process's own ``process_*`` and
``python_*`` metrics come last.

When no lookupd answers (or no nsqd, without lookupds) the scrape fails with the admin's
``502 UPSTREAM_ERROR``, so Prometheus marks the target down.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..http.messages import Response
from ..metrics.snapshot import NodeSnapshot, connections_in
from .clusterinfo import ClusterInfo, UpstreamError, gather
from .stats import Producer

if TYPE_CHECKING:
    from ..metrics.exposition import Exposition

__all__ = ["ClusterExporter"]


class ClusterExporter:
    """Renders the cluster's metrics; raises ClusterError when no node list could be had."""

    def __init__(self, info: ClusterInfo, lookupds: Sequence[str], nsqds: Sequence[str]) -> None:
        self.info = info
        self.lookupds = list(lookupds)
        self.nsqds = list(nsqds)
        self._exposition: Exposition | None = None

    async def snapshots(self) -> tuple[list[tuple[str, NodeSnapshot | UpstreamError]], list[str]]:
        """Every nsqd's ``/stats`` (or why it gave none) by node name, and the silent nodes.

        The silent nodes are the ``--nsqd-http-address`` ones whose ``/info`` did not answer,
        named as given (their own names are not known).
        """
        found = await self.info.producers(self.lookupds, self.nsqds)
        # one entry per node name: a duplicate series would make Prometheus refuse the scrape
        producers = list({p.http_address: p for p in found.value}.values())
        silent = [] if self.lookupds else sorted({e.address for e in found.errors})

        async def read(producer: Producer) -> NodeSnapshot:
            stats = await self.info.node_stats_document(producer.http_address)
            return NodeSnapshot(
                stats=stats,
                hostname=producer.hostname,
                broadcast_address=producer.broadcast_address,
                tcp_port=producer.tcp_port,
                http_port=producer.http_port,
                connections=connections_in(stats),
                now=time.time(),
            )

        results = await gather(producers, read)
        return [(p.http_address, r) for p, r in zip(producers, results, strict=True)], silent

    async def render(self, accept: str | None) -> Response:
        """The answer to a scrape whose ``Accept`` header is ``accept``."""
        nodes, silent = await self.snapshots()
        from ..metrics.families import MetricFamilies

        if self._exposition is None:
            from ..metrics.exposition import Exposition

            self._exposition = Exposition()
        families = MetricFamilies(node_label=True)
        for node, snapshot in nodes:
            if isinstance(snapshot, UpstreamError):
                families.add_unreachable(node)
            else:
                families.add(snapshot, node)
        for address in silent:
            families.add_unreachable(address)
        return self._exposition.render(accept, families.collect())
