"""The admin service's ``POST /api/snapshot``: one consistent cut of every nsqd of a box.

Not part of nsqadmin. In a box (``nsqbox up``) every nsqd runs on one event loop, so the box
can cut them all in one synchronous pass: nothing happens on any node between the first
node's cut and the last one's. The box's node control does it (:class:`SnapshotControl`);
each node's records wait in a spool in its data path, and ``nsqbox snapshot save`` fetches
them from the nodes (``GET /nsqbox/snapshot``, :mod:`nsqbox.snapshot.transfer`).

The answer is ``{"cuts": [{"node", "http_address", "id", "bytes", "topics", "channels",
"messages", "clock", "clock_offset", "saved_at_ns"}, ...]}`` in node order. Without a box
(``nsqbox admin`` over some cluster) it is ``501 NOT_IMPLEMENTED``: the cuts of separate
processes cannot be made one. ``403 FORBIDDEN`` for a user ``--admin-user`` does not list
(the cut holds every message body); off (``404``) under ``--auth-http-address``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, Protocol, runtime_checkable

from ...http.messages import HTTPError, Request
from ...http.router import Router

__all__ = ["SnapshotControl", "add_snapshot_routes"]

log = logging.getLogger("nsqbox.admin")


@runtime_checkable
class SnapshotControl(Protocol):
    """A box that can cut all its nsqds at once (the box's node control)."""

    def cut_snapshot(self) -> list[dict[str, Any]]:
        """Each running nsqd's cut, in node order, made in one synchronous pass."""
        ...


def add_snapshot_routes(
    router: Router, control: object, authorize: Callable[[Request], None]
) -> None:
    """Add ``POST /api/snapshot`` to the admin ``router`` (``control``: the box's, if any)."""

    async def cut(request: Request) -> dict[str, Any]:
        authorize(request)
        if not isinstance(control, SnapshotControl):
            raise HTTPError(501, "NOT_IMPLEMENTED: only a box (nsqbox up) cuts every node at once")
        try:
            cuts = control.cut_snapshot()
        except OSError as exc:
            raise HTTPError(500, f"SNAPSHOT_FAILED: {exc}") from None
        log.info("snapshot: cut %d nsqds", len(cuts))
        return {"cuts": cuts}

    router.add("POST", "/api/snapshot", cut, nsqbox_only=True)
