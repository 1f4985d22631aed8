"""Answering a scrape without holding up the event loop (no ``prometheus_client`` at import).

A scrape has two parts. Reading the state must happen on the event loop, all at once, so the
numbers agree with each other: the caller does it, into :class:`~.snapshot.NodeSnapshot`
values (nsqd in O(topics + channels), the admin after its HTTP requests). Turning snapshots
into text is the larger part (some 50 ms for 300 channels): :class:`Scraper` does it in a
worker thread, so the event loop keeps serving clients in the meantime (it gets the GIL back
every few milliseconds). The first scrape imports ``prometheus_client`` there too.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..http.messages import Response
from .snapshot import NodeSnapshot

if TYPE_CHECKING:
    from .exposition import Exposition

__all__ = ["Scraper"]

#: Held while a scraper sets itself up: two first scrapes at once (nsqd's and the admin's, in
#: one process) import ``prometheus_client`` one after the other.
_setting_up = threading.Lock()


class Scraper:
    """Renders scrapes of one ``/metrics`` route; the families are
    :class:`~nsqbox.metrics.families.MetricFamilies`, with a ``node`` label if ``node_label``.
    """

    def __init__(self, *, node_label: bool = False) -> None:
        self.node_label = node_label
        self._exposition: Exposition | None = None

    async def render(
        self,
        accept: str | None,
        nodes: Sequence[tuple[str, NodeSnapshot]],
        unreachable: Sequence[str] = (),
    ) -> Response:
        """The answer to a scrape whose ``Accept`` header is ``accept``.

        ``nodes`` are ``(node label, snapshot)`` (the label is ignored without the node label);
        ``unreachable`` names the nodes that did not answer (``nsqd_up`` 0).
        """
        from anyio import to_thread  # runs on trio (nsqd) and asyncio alike

        return await to_thread.run_sync(self._render, accept, nodes, unreachable)

    def _render(
        self,
        accept: str | None,
        nodes: Sequence[tuple[str, NodeSnapshot]],
        unreachable: Sequence[str],
    ) -> Response:
        with _setting_up:
            from .exposition import Exposition
            from .families import MetricFamilies

            if self._exposition is None:
                self._exposition = Exposition()
        families = MetricFamilies(node_label=self.node_label)
        for node, snapshot in nodes:
            families.add(snapshot, node)
        for node in unreachable:
            families.add_unreachable(node)
        return self._exposition.render(accept, families.collect())
