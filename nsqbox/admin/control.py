"""Node control for the admin service: restart, crash and start a box's nodes (issue #18).

The admin service cannot stop a node by itself: only the process that runs the servers can.
The box (``nsqbox up``) gives :func:`~nsqbox.admin.server.serve_admin` a :class:`NodeControl`;
standalone ``nsqbox admin``, or an admin service reading a real cluster, has none, and
``POST /api/faults/restart|crash|start`` answers ``501`` there (:mod:`.fault_api`).

A node is named by its index (as :meth:`NodeControl.nodes` lists it) or its HTTP address
(``host:port``, as nsqadmin names nodes); :func:`find_node` resolves either.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from .clusterinfo import ClusterInfo

__all__ = [
    "ClusterNodes",
    "ControlledNode",
    "NodeAction",
    "NodeControl",
    "NodeControlError",
    "find_node",
    "run_node_action",
]


class NodeAction(Enum):
    """What can be done to a node."""

    #: Clean shutdown, then start again on the same ports with the same data.
    RESTART = "restart"
    #: Stop without the clean-shutdown flush (what is in memory is lost, as with SIGKILL).
    CRASH = "crash"
    #: Start a node that was crashed (or stopped).
    START = "start"


@dataclass(frozen=True, slots=True)
class ControlledNode:
    """One node a :class:`NodeControl` can act on."""

    #: What :meth:`NodeControl.restart` and the others take.
    index: int
    #: ``"nsqd"`` or ``"nsqlookupd"``.
    role: str
    #: ``host:port`` of its HTTP API, as the admin service names nodes (nsqadmin's
    #: ``broadcast_address:http_port``; a lookupd's address as the admin service reaches it).
    http_address: str
    #: ``"running"``, or why it is not: ``"crashed"``, ``"stopped"``, or ``"down"`` (unknown).
    state: str = "running"

    @property
    def running(self) -> bool:
        """Whether it is serving now (False after a crash, until started)."""
        return self.state == "running"


class NodeControlError(Exception):
    """A node action that cannot be done now (start a running node, crash a stopped one...).

    The message says why; the admin service answers ``409`` with it.
    """


class NodeControl(Protocol):
    """Restart, crash and start the nodes of a box (what ``nsqbox up`` gives the admin service).

    The methods run on the admin service's trio loop and return once the action is done:
    ``restart`` and ``start`` when the node listens again, ``crash`` when it is down. They
    raise :class:`NodeControlError` for an action the node's state refuses, and LookupError
    for an index :meth:`nodes` does not list.
    """

    def nodes(self) -> Sequence[ControlledNode]:
        """Every node that can be controlled, running or not, in index order."""
        ...

    async def restart(self, index: int) -> None:
        """Shut the node down cleanly and start it again on the same ports and data."""
        ...

    async def crash(self, index: int) -> None:
        """Stop the node without the clean-shutdown flush; it stays down until started."""
        ...

    async def start(self, index: int) -> None:
        """Start a node that is down (after :meth:`crash`)."""
        ...


class ClusterNodes:
    """The nodes an admin component reads: those ``info`` finds through ``lookupds`` (or the
    ``nsqds`` given), and the box's own through ``control`` (None: no box), even when down."""

    def __init__(
        self,
        info: ClusterInfo,
        lookupds: Sequence[str] = (),
        nsqds: Sequence[str] = (),
        *,
        control: NodeControl | None = None,
    ) -> None:
        self.info = info
        self.lookupds = list(lookupds)
        self.nsqds = list(nsqds)
        self.control = control

    def controlled(self) -> Sequence[ControlledNode]:
        """The box's nodes, running or not (none without a control)."""
        return self.control.nodes() if self.control is not None else ()


def find_node(nodes: Sequence[ControlledNode], name: str) -> ControlledNode | None:
    """The node ``name`` means: an index (``"0"``) or an HTTP address; None when none."""
    if name.isascii() and name.isdigit():
        if len(name) > 6:  # no box has a million nodes (and int() refuses 4,300 digits)
            return None
        return next((n for n in nodes if n.index == int(name)), None)
    return next((n for n in nodes if n.http_address == name), None)


async def run_node_action(control: NodeControl, action: NodeAction, index: int) -> None:
    """Do ``action`` to node ``index`` through ``control``."""
    if action is NodeAction.RESTART:
        await control.restart(index)
    elif action is NodeAction.CRASH:
        await control.crash(index)
    else:
        await control.start(index)
