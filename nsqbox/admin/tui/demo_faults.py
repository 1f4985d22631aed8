"""The demo cluster's faults (for the Faults view's screenshot and snapshot test).

:class:`DemoFaults` lists two faults on nsqd-a, and nsqd-b with none, under node control
where nsqd-c is down; it records what it is asked instead of doing it.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..control import NodeAction
from ..faults import LOOKUPD, NOT_SUPPORTED, ControlNode, FaultListing, FaultNode

__all__ = ["DemoFaults"]

#: DEMO_TIME (2026-01-01 12:34:56 UTC), kept here so this module needs nothing of demo.py.
_NOW = 1_767_270_896.0


class DemoFaults:
    """A :class:`~nsqbox.admin.faults.FaultSource` with fixed faults; records the calls."""

    def __init__(self) -> None:
        #: ``(method, args)`` of every change asked for.
        self.calls: list[tuple[str, tuple[object, ...]]] = []

    async def listing(self) -> FaultListing:
        """Two faults on nsqd-a; nsqd-c is down; the lookupd has no fault routes."""
        a, b, c = "10.0.0.1:4151", "10.0.0.2:4151", "10.0.0.3:4151"
        faults: list[dict[str, Any]] = [
            {"node": a, "role": "nsqd", "id": 1, "kind": "fail_publishes", "topic": "orders",
             "error": "fault injected: publish failed", "remaining": 2, "since": _NOW - 95},
            {"node": a, "role": "nsqd", "id": 2, "kind": "disk_full", "topic": None,
             "error": "write: no space left on device", "remaining": None, "since": _NOW - 12},
        ]  # fmt: skip
        nodes = [
            FaultNode(node=a, hostname="nsqd-a", faults=2),
            FaultNode(node=b, hostname="nsqd-b"),
            FaultNode(node="10.0.0.9:4161", role=LOOKUPD, supported=False, error=NOT_SUPPORTED),
        ]
        control = [
            ControlNode(index=0, role="nsqd", node=a, running=True),
            ControlNode(index=1, role="nsqd", node=b, running=True),
            ControlNode(index=2, role="nsqd", node=c, running=False),
        ]
        return FaultListing(faults=faults, nodes=nodes, control=control)

    async def add(
        self, kind: str, node: str | None, params: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """Recorded."""
        self.calls.append(("add", (kind, node, tuple(params))))
        return {"node": node, "role": "nsqd", "id": 3, "kind": kind}

    async def lift(self, node: str, fault_id: str) -> bool:
        """Recorded."""
        self.calls.append(("lift", (node, fault_id)))
        return True

    async def lift_all(self) -> tuple[int, str]:
        """Recorded."""
        self.calls.append(("lift_all", ()))
        return 2, ""

    async def node_action(self, action: NodeAction, node: str | None) -> dict[str, Any]:
        """Recorded."""
        self.calls.append(("node_action", (action.value, node)))
        return {"action": action.value, "node": node, "running": action is not NodeAction.CRASH}
