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

With lookupds, a node that died is gone from their ``/nodes`` (as with real nsqadmin), so it
gets no series at all; but the box's own nodes (the admin service's
:class:`~.control.NodeControl`, under ``nsqbox up``) are known even when down: a controlled
nsqd that is not running is exported as ``nsqd_up 0``.

When no lookupd answers (or no nsqd, without lookupds) the scrape fails with the admin's
``502 UPSTREAM_ERROR``, so Prometheus marks the target down.
"""

from __future__ import annotations

import time
from functools import cached_property
from typing import TYPE_CHECKING

from ..http.messages import Response
from .clusterinfo import UpstreamError, gather
from .control import ClusterNodes
from .stats import Producer

if TYPE_CHECKING:  # the metrics code loads on the first scrape, not while the admin starts
    from ..metrics.scrape import Scraper
    from ..metrics.snapshot import NodeSnapshot

__all__ = ["ClusterExporter"]


class ClusterExporter(ClusterNodes):
    """Renders the cluster's metrics; raises ClusterError when no node list could be had.

    The box's nodes (``control``) that are down are exported as ``nsqd_up 0`` too.
    """

    @cached_property
    def scraper(self) -> Scraper:
        """What renders the families (one, with its registry, for the exporter's life)."""
        from ..metrics.scrape import Scraper

        return Scraper(node_label=True)

    async def snapshots(self) -> tuple[list[tuple[str, NodeSnapshot]], list[str]]:
        """The nsqds that answered, by node name, and the names of those that did not.

        A ``--nsqd-http-address`` node whose ``/info`` did not answer is named as given (its
        own name is not known); a controlled nsqd that is down, by its HTTP address.
        """
        from ..metrics.snapshot import NodeSnapshot, connections_in

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

        answered: list[tuple[str, NodeSnapshot]] = []
        for producer, result in zip(producers, await gather(producers, read), strict=True):
            if isinstance(result, UpstreamError):
                silent.append(producer.http_address)
            else:
                answered.append((producer.http_address, result))
        known = {name for name, _ in answered} | set(silent)
        for node in self.controlled():
            if node.role == "nsqd" and not node.running and node.http_address not in known:
                silent.append(node.http_address)
        return answered, silent

    async def render(self, accept: str | None) -> Response:
        """The answer to a scrape whose ``Accept`` header is ``accept``."""
        answered, unreachable = await self.snapshots()
        return await self.scraper.render(accept, answered, unreachable)
