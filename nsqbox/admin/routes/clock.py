"""The admin service's ``/api/clock``: a box's broker time over nsqadmin's port (issue #24).

Not part of nsqadmin. ``nsqbox clock`` and applications under test in any language read and
move broker time through one address; the admin service finds the nodes (as for
``/api/faults``) and asks each one's ``/nsqbox/clock`` (:mod:`nsqbox.http.clock`).
The nodes of one box share one clock (each answers its ``id``), so moving time moves each
distinct clock once, through one of its nodes.

=======  =========================  ===================================================
method   route                      answer
=======  =========================  ===================================================
GET      /api/clock                 ``{clocks, nodes, message}``: each distinct clock
                                    (``id, mode, now, offset, nodes``); each node with its
                                    ``clock`` id (null without the routes: real NSQ)
POST     /api/clock/advance?by=1h   every manual clock moved ``by``: ``{clocks, fired,
                                    message}`` (each clock's answer, with ``fired``)
=======  =========================  ===================================================

Errors: ``400 MISSING_ARG_BY``/``INVALID_BY``; ``400 OFFSET_LIMIT`` when a clock would run
more than ten years ahead of real time in all (:data:`~nsqbox.broker.clock.MAX_OFFSET`);
``403 FORBIDDEN`` (``--admin-user``, to move time); ``409 CLOCK_NOT_MANUAL`` when no node
has a manual clock; ``502 UPSTREAM_ERROR: ...``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from ...broker.clock import MAX_OFFSET
from ...http.clock import CLOCK_PATH, span_arg
from ...http.messages import HTTPError, Request
from ...http.router import Router
from ...wire.peer_json import decode_peer_object, peer_count
from ..clusterinfo import UpstreamError, gather, warning
from ..faults import ClusterFaults

__all__ = ["ClusterClocks", "add_clock_routes"]

log = logging.getLogger("nsqbox.admin")

Doc = dict[str, Any]


class ClusterClocks:
    """The broker clocks of the nodes ``faults`` finds (its node discovery, its client)."""

    def __init__(self, faults: ClusterFaults) -> None:
        self.faults = faults

    async def listing(self) -> Doc:
        """Every known node's clock, grouped by clock id."""
        nodes, errors = await self.faults.nodes()
        info = self.faults.info

        async def fetch(address: str) -> Doc:
            doc: Doc = decode_peer_object(await info.get(address, CLOCK_PATH))
            return doc

        failed = list(errors)
        clocks: dict[str, Doc] = {}
        rows: list[Doc] = []
        answers = await gather([n.node for n in nodes], fetch)
        for node, answer in zip(nodes, answers, strict=True):
            row: Doc = {"node": node.node, "role": node.role, "clock": None, "error": ""}
            rows.append(row)
            if isinstance(answer, UpstreamError):
                if answer.status != 404:
                    row["error"] = str(answer)
                    failed.append(answer)
                continue
            row["clock"] = answer.get("id")
            clock = clocks.setdefault(str(answer.get("id")), {**answer, "nodes": []})
            clock["nodes"].append(node.node)
        return {"clocks": list(clocks.values()), "nodes": rows, "message": warning(failed)}

    async def advance(self, seconds: float) -> Doc:
        """Move every manual clock ``seconds`` ahead, each once through its first node."""
        listing = await self.listing()
        manual = [c for c in listing["clocks"] if c.get("mode") == "manual"]
        if not manual:
            raise HTTPError(409, "CLOCK_NOT_MANUAL")
        if any(_offset(c) + seconds > MAX_OFFSET for c in manual):
            raise HTTPError(400, "OFFSET_LIMIT")
        info = self.faults.info
        path = f"{CLOCK_PATH}/advance"

        async def advance(address: str) -> Doc:
            body = await info.request("POST", address, path, [("by", repr(seconds))])
            doc: Doc = decode_peer_object(body)
            return doc

        moved: list[Doc] = []
        failed: list[UpstreamError] = []
        for clock, answer in zip(
            manual, await gather([c["nodes"][0] for c in manual], advance), strict=True
        ):
            if isinstance(answer, UpstreamError):
                failed.append(answer)
            else:
                moved.append({**answer, "nodes": clock["nodes"]})
        if failed and not moved:
            raise HTTPError(502, f"UPSTREAM_ERROR: {failed[0]}")
        fired = sum(peer_count(doc.get("fired")) for doc in moved)
        return {"clocks": moved, "fired": fired, "message": warning(failed)}


def _offset(clock: Doc) -> float:
    """A clock document's offset (0 when a peer sent no number)."""
    offset = clock.get("offset")
    return float(offset) if isinstance(offset, int | float) else 0.0


def add_clock_routes(
    router: Router, clocks: ClusterClocks, authorize: Callable[[Request], None]
) -> None:
    """Add ``/api/clock`` to the admin ``router``; ``authorize`` raises 403 to move time."""

    async def listing(request: Request) -> Doc:
        return await clocks.listing()

    async def advance(request: Request) -> Doc:
        seconds = span_arg(request)
        authorize(request)
        doc = await clocks.advance(seconds)
        log.info("clock advanced %ss: %d fired", seconds, doc["fired"])
        return doc

    # nsqbox's own: off (404) with the box's --auth-http-address, as the nodes' routes are.
    router.add("GET", "/api/clock", listing, nsqbox_only=True)
    router.add("POST", "/api/clock/advance", advance, nsqbox_only=True)
