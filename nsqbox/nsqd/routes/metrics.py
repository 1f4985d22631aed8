"""nsqbox's ``GET /metrics``: this nsqd's numbers for Prometheus (docs/metrics.md).

Not part of NSQ (real nsqd answers ``404`` there; nsq#732 has asked for it since 2016). The
route answers in Prometheus' text format, or OpenMetrics when ``Accept`` asks for it, with
the families of :mod:`nsqbox.metrics.families` for this node (without a ``node`` label:
Prometheus adds ``instance``) and the process's own ``process_*`` and ``python_*`` metrics.

Collecting happens on scrape: a scrape reads the state ``/stats`` reads (topics, channels,
their counters and queues), in O(topics + channels), and the message path does nothing for
it; the text is written in a worker thread (:mod:`nsqbox.metrics.scrape`).
``prometheus_client`` is imported by the first scrape, so an nsqd nobody scrapes does not
load it.

Unlike the ``/nsqbox/tap``, ``/nsqbox/peek`` and ``/nsqbox/faults`` routes, this one stays
with ``--auth-http-address``: it reveals no message and changes nothing, and nsqd's own
``/stats`` (the same numbers) is readable without a secret too; nsqd's auth covers the TCP
protocol only. Scrapes are not logged (Prometheus asks every few seconds).
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from ...http import Request, Response, Router
from ..domain.stats import get_stats, stats_document

if TYPE_CHECKING:  # the metrics code loads on the first scrape, not while nsqd starts
    from ...metrics.scrape import Scraper
    from ...metrics.snapshot import NodeSnapshot
    from ..domain.nsqd import NSQD

__all__ = ["add_metrics_route", "node_snapshot"]


def node_snapshot(nsqd: NSQD) -> NodeSnapshot:
    """``nsqd`` now, as ``/stats?format=json&include_clients=false`` and ``/info`` see it."""
    from ...metrics.snapshot import NodeSnapshot

    stats = stats_document(nsqd, get_stats(nsqd, include_clients=False), None)
    return NodeSnapshot(
        stats=stats,
        hostname=nsqd.hostname,
        broadcast_address=nsqd.options.effective_broadcast_address(),
        tcp_port=nsqd.tcp_port,
        http_port=nsqd.http_port,
        connections=len(nsqd.clients),
        now=time.time(),
    )


def add_metrics_route(router: Router, nsqd: NSQD) -> None:
    """Add ``GET /metrics`` for ``nsqd`` to its HTTP router."""
    made: list[Scraper] = []  # one, made on the first scrape

    async def metrics(request: Request) -> Response:
        if not made:
            from ...metrics.scrape import Scraper

            made.append(Scraper())
        # the state, read here at once; the text is written in a worker thread
        return await made[0].render(request.header("Accept"), [("", node_snapshot(nsqd))])

    router.add("GET", "/metrics", metrics, log=False)
