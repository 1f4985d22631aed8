"""The faults of a whole cluster, through each node's ``/nsqbox/faults`` routes (issue #18).

:class:`ClusterFaults` finds the nodes the admin service knows (the nsqds through lookupd or
``--nsqd-http-address``, the lookupds it is given, and the nodes of its
:class:`~.control.NodeControl`), lists their faults, and forwards an added or lifted fault to
one node. It knows no fault kind: ``add("latency", node, params)`` goes to that node's
``POST /nsqbox/faults/latency`` with the parameters as they are, so a kind a node learns needs
no change here. A node without the routes (real nsqd or nsqlookupd answers 404) is reported as
not supported; the others are listed as usual.

Both the admin service's ``/api/faults`` (:mod:`.fault_api`) and the TUI (which reads the
cluster itself) use it; it runs under trio and asyncio alike, as :class:`ClusterInfo` does.
Failures that are the caller's raise :class:`FaultError`, which carries the HTTP status and
NSQ-style message the admin service answers with.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any, Protocol

import msgspec

from ..wire.peer_json import PeerJSONError, decode_peer_json, peer_count
from .clusterinfo import ClusterError, UpstreamError, gather, warning
from .control import (
    ClusterNodes,
    ControlledNode,
    NodeAction,
    NodeControlError,
    find_node,
    run_node_action,
)

__all__ = [
    "DOWN",
    "FAULTS_PATH",
    "LOOKUPD",
    "NOT_SUPPORTED",
    "NSQD",
    "ClusterFaults",
    "ControlNode",
    "FaultError",
    "FaultListing",
    "FaultNode",
    "FaultSource",
    "down_error",
    "is_fault_kind",
]

#: nsqbox's fault routes on nsqd and nsqlookupd.
FAULTS_PATH = "/nsqbox/faults"
#: What a node without the fault routes is reported as.
NOT_SUPPORTED = "not supported by this node"
NSQD = "nsqd"
LOOKUPD = "nsqlookupd"

_KIND = re.compile(r"[a-z][a-z0-9_]{0,63}\Z")
_NO_ROUTES = (
    "{role} {node} has no {path} routes (a real NSQ node, or nsqbox's nsqd with "
    "--auth-http-address, which turns them off)"
)


#: How a controlled node that is down is reported (its ``error`` starts so).
DOWN = "down"


def down_error(node: ControlledNode) -> str:
    """``down (crashed)``: a controlled node that is not running, as the listing says."""
    return DOWN if node.state == DOWN else f"{DOWN} ({node.state})"


def _is_down(node: FaultNode) -> bool:
    return node.error == DOWN or node.error.startswith(f"{DOWN} (")


def _known(nodes: Sequence[FaultNode]) -> str:
    """The nodes one may name, for an error message."""
    return "known: " + (", ".join(f"{n.role} {n.node}" for n in nodes) or "none")


def _one_of(names: Sequence[str]) -> str:
    """MISSING_ARG_NODE's detail: ``name one of 2 nsqds with node=: a, b``."""
    listed = f": {', '.join(names)}" if names else ""
    return f"name one of {len(names)} nsqds with node={listed}"


def is_fault_kind(kind: str) -> bool:
    """Whether ``kind`` can name a fault: lower-case letters, digits and ``_``, 1-64."""
    return _KIND.match(kind) is not None


class FaultError(Exception):
    """A fault request refused: ``status`` and NSQ's ``{"message": message}`` to answer."""

    def __init__(self, status: int, code: str, detail: str = "") -> None:
        self.status = status
        self.message = f"{code}: {detail}" if detail else code
        super().__init__(self.message)


class FaultNode(msgspec.Struct, kw_only=True):
    """One node as the fault listing reports it."""

    #: Its HTTP address (``host:port``), the name every fault request uses.
    node: str
    #: ``nsqd`` or ``nsqlookupd``.
    role: str = NSQD
    hostname: str = ""
    #: False for a node without the fault routes (its ``error`` is :data:`NOT_SUPPORTED`).
    supported: bool = True
    #: How many lasting faults it has in force.
    faults: int = 0
    #: Why it listed nothing ("" when it answered).
    error: str = ""


class ControlNode(msgspec.Struct, kw_only=True):
    """A node the admin service can restart, crash and start (see :mod:`.control`)."""

    index: int
    role: str
    node: str
    running: bool


class FaultListing(msgspec.Struct, kw_only=True):
    """``GET /api/faults``: every lasting fault in force, and what each node answered.

    Each fault is its node's document (``id``, ``kind``, ``since`` and the kind's own
    fields, e.g. ``topic``, ``remaining``) plus ``node`` and ``role``. ``control`` lists
    the nodes that can be restarted (None without node control); ``message`` is nsqadmin's
    ``WARNING: ...`` for the nodes that failed, or "".
    """

    faults: list[dict[str, Any]] = []
    nodes: list[FaultNode] = []
    control: list[ControlNode] | None = None
    message: str = ""


class _FaultsDoc(msgspec.Struct):
    faults: list[dict[str, Any]] = []


class _ErrorDoc(msgspec.Struct):
    message: str = ""


_faults_decoder = msgspec.json.Decoder(_FaultsDoc)
_doc_decoder = msgspec.json.Decoder(dict[str, Any])
_error_decoder = msgspec.json.Decoder(_ErrorDoc)


def _decode(node: str, path: str, body: bytes, decoder: msgspec.json.Decoder[Any]) -> Any:
    try:
        return decode_peer_json(body, decoder)
    except PeerJSONError as exc:
        raise UpstreamError(node, path, f"bad response - {exc}") from exc


def _error_code(exc: UpstreamError) -> str:
    try:
        return decode_peer_json(exc.body, _error_decoder).message
    except PeerJSONError:
        return ""


def _tagged(node: FaultNode, doc: dict[str, Any]) -> dict[str, Any]:
    """A node's fault document with the node's ``node`` and ``role`` first (and theirs)."""
    tagged: dict[str, Any] = {"node": node.node, "role": node.role}
    tagged.update(doc)
    tagged.update(node=node.node, role=node.role)
    return tagged


class FaultSource(Protocol):
    """Faults of a cluster, as the TUI and ``nsqbox fault`` use them: :class:`ClusterFaults`
    (straight to the nodes) and :class:`~.faults_client.AdminFaults` (through the admin
    service's ``/api/faults``). Refusals raise :class:`FaultError`."""

    async def listing(self) -> FaultListing:
        """Every lasting fault in force, and each node's answer."""
        ...

    async def add(
        self, kind: str, node: str | None, params: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """Start fault ``kind`` on ``node`` (None: the only nsqd); the node's answer."""
        ...

    async def lift(self, node: str, fault_id: str) -> bool:
        """End one fault; False when it had already ended."""
        ...

    async def lift_all(self) -> tuple[int, str]:
        """End every fault; how many, and a warning naming the nodes that failed."""
        ...

    async def node_action(self, action: NodeAction, node: str | None) -> dict[str, Any]:
        """Restart, crash or start a node (``501 NOT_IMPLEMENTED`` without node control)."""
        ...


class ClusterFaults(ClusterNodes):
    """The faults of the nodes ``lookupds``/``nsqds`` find, read and changed through ``info``.

    ``control`` (the box's) adds its nodes to the known ones and makes
    :meth:`node_action` possible.
    """

    # -- nodes --------------------------------------------------------------------------------

    async def nodes(self) -> tuple[list[FaultNode], tuple[UpstreamError, ...]]:
        """Every known node (nsqds, then lookupds, then controlled nodes not found so far).

        The errors are those of the lookupds (or nsqds) that could not be asked; a cluster
        whose lookupd is down still lists the lookupd and the controlled nodes.
        """
        found: dict[str, FaultNode] = {}
        try:
            producers = await self.info.producers(self.lookupds, self.nsqds)
            errors = producers.errors
            for p in producers.value:
                node = FaultNode(node=p.http_address, hostname=p.hostname)
                found.setdefault(p.http_address, node)
        except ClusterError as exc:
            errors = exc.errors
        for address in self.lookupds:
            found.setdefault(address, FaultNode(node=address, role=LOOKUPD))
        for controlled in self.controlled():
            node = found.setdefault(
                controlled.http_address,
                FaultNode(node=controlled.http_address, role=controlled.role),
            )
            if not controlled.running:  # lookupd forgot it as it went: the control knows
                node.error = down_error(controlled)
        return list(found.values()), errors

    async def _node(self, name: str | None) -> FaultNode:
        """The known node ``name`` means: its HTTP address, or an index of the node control;
        the only nsqd when None. FaultError when there is no such node."""
        nodes, _ = await self.nodes()
        if not name:
            nsqds = [n for n in nodes if n.role == NSQD]
            if len(nsqds) == 1:
                return nsqds[0]
            raise FaultError(400, "MISSING_ARG_NODE", _one_of([n.node for n in nsqds]))
        controlled = find_node(self.controlled(), name)
        if controlled is not None:
            if not controlled.running:
                raise FaultError(
                    409,
                    "NODE_DOWN",
                    f"{controlled.role} {controlled.index} is {down_error(controlled)}: "
                    f"start it first (nsqbox fault start --node {controlled.index})",
                )
            name = controlled.http_address
        node = next((n for n in nodes if n.node == name), None)
        if node is None:
            raise FaultError(404, "NODE_NOT_FOUND", _known(nodes))
        return node

    def _control_nodes(self) -> list[ControlNode] | None:
        if self.control is None:
            return None
        return [
            ControlNode(index=n.index, role=n.role, node=n.http_address, running=n.running)
            for n in self.control.nodes()
        ]

    # -- reading ------------------------------------------------------------------------------

    async def listing(self) -> FaultListing:
        """Every known node's lasting faults (``GET /nsqbox/faults`` on each, at once)."""
        nodes, errors = await self.nodes()

        async def fetch(node: FaultNode) -> _FaultsDoc:
            body = await self.info.get(node.node, FAULTS_PATH)
            decoded: _FaultsDoc = _decode(node.node, FAULTS_PATH, body, _faults_decoder)
            return decoded

        failed = list(errors)
        faults: list[dict[str, Any]] = []
        up = [n for n in nodes if not _is_down(n)]
        for node, answer in zip(up, await gather(up, fetch), strict=True):
            if isinstance(answer, UpstreamError):
                if answer.status == 404:
                    node.supported, node.error = False, NOT_SUPPORTED
                else:
                    node.error = str(answer)
                    failed.append(answer)
                continue
            node.faults = len(answer.faults)
            faults.extend(_tagged(node, doc) for doc in answer.faults)
        return FaultListing(
            faults=faults, nodes=nodes, control=self._control_nodes(), message=warning(failed)
        )

    # -- changing -----------------------------------------------------------------------------

    async def add(
        self, kind: str, node: str | None, params: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """Start fault ``kind`` on ``node`` with ``params`` (passed on as they are).

        The answer is the node's (the new fault, or a one-shot fault's ``count``) plus
        ``node`` and ``role``. FaultError: ``400 INVALID_KIND``, the node's 400 and 409,
        ``404 NODE_NOT_FOUND``, ``404 NOT_SUPPORTED``, ``404 UNKNOWN_FAULT``, 502.
        """
        if not is_fault_kind(kind):
            raise FaultError(400, "INVALID_KIND")
        target = await self._node(node)
        path = f"{FAULTS_PATH}/{kind}"
        try:
            body = await self.info.request("POST", target.node, path, params)
            doc: dict[str, Any] = _decode(target.node, path, body, _doc_decoder)
        except UpstreamError as exc:
            raise await self._refused(target, exc, kind) from None
        return _tagged(target, doc)

    async def lift(self, node: str, fault_id: str) -> bool:
        """End fault ``fault_id`` of ``node``; False when it had already ended."""
        if not (fault_id.isascii() and fault_id.isdigit()) or len(fault_id) > 18:
            raise FaultError(400, "INVALID_ID")
        target = await self._node(node or None)
        path = f"{FAULTS_PATH}/{int(fault_id)}"
        try:
            body = await self.info.request("DELETE", target.node, path)
            doc: dict[str, Any] = _decode(target.node, path, body, _doc_decoder)
        except UpstreamError as exc:
            raise await self._refused(target, exc, None) from None
        return bool(doc.get("lifted"))

    async def lift_all(self) -> tuple[int, str]:
        """End every lasting fault on every node that has the routes; how many, and the
        ``WARNING: ...`` for the nodes that failed ("" when none did)."""
        nodes, errors = await self.nodes()

        async def lift(node: FaultNode) -> int:
            body = await self.info.request("DELETE", node.node, FAULTS_PATH)
            doc: dict[str, Any] = _decode(node.node, FAULTS_PATH, body, _doc_decoder)
            return peer_count(doc.get("lifted"))

        lifted = 0
        failed = list(errors)
        for answer in await gather([n for n in nodes if not _is_down(n)], lift):
            if isinstance(answer, UpstreamError):
                if answer.status != 404:
                    failed.append(answer)
            else:
                lifted += answer
        return lifted, warning(failed)

    async def _refused(self, node: FaultNode, exc: UpstreamError, kind: str | None) -> FaultError:
        """What to answer for a node's refusal of a fault request."""
        if exc.status == 400:
            return FaultError(400, _error_code(exc) or "INVALID_REQUEST")
        if exc.status == 409:  # TOO_MANY_FAULTS: the node's own limit
            return FaultError(409, _error_code(exc) or "CONFLICT")
        if exc.status in (404, 405):
            routes = kind is not None
            if routes:  # an unknown kind, or no fault routes at all?
                try:
                    await self.info.get(node.node, FAULTS_PATH)
                except UpstreamError:
                    routes = False
            if routes:
                return FaultError(404, "UNKNOWN_FAULT", f"{node.role} {node.node} has no {kind!r}")
            detail = _NO_ROUTES.format(role=node.role, node=node.node, path=FAULTS_PATH)
            return FaultError(404, "NOT_SUPPORTED", detail)
        return FaultError(502, "UPSTREAM_ERROR", str(exc))

    # -- node control -------------------------------------------------------------------------

    async def node_action(self, action: NodeAction, node: str | None) -> dict[str, Any]:
        """Restart, crash or start ``node`` (an index or HTTP address) through the control.

        None: the only nsqd. FaultError: ``501 NOT_IMPLEMENTED`` without node control,
        ``400 MISSING_ARG_NODE`` (no ``node``, and not exactly one nsqd),
        ``404 NODE_NOT_FOUND``, ``409 NODE_CONTROL_FAILED`` when the node's state refuses.
        """
        control = self.control
        if control is None:
            raise FaultError(
                501,
                "NOT_IMPLEMENTED",
                f"{action.value} needs nsqbox up: this admin service does not run the "
                "cluster's servers (nsqbox admin alone, or a real NSQ cluster)",
            )
        controlled = control.nodes()
        if not node:
            nsqds = [n for n in controlled if n.role == NSQD]
            if len(nsqds) != 1:
                names = [f"{n.index} ({n.http_address})" for n in nsqds]
                raise FaultError(400, "MISSING_ARG_NODE", _one_of(names))
            node = str(nsqds[0].index)
        target = find_node(controlled, node)
        if target is None:
            known = ", ".join(f"{n.index} ({n.http_address})" for n in controlled)
            raise FaultError(404, "NODE_NOT_FOUND", f"known: {known or 'none'}")
        try:
            await run_node_action(control, action, target.index)
        except NodeControlError as exc:
            raise FaultError(409, "NODE_CONTROL_FAILED", str(exc)) from None
        except LookupError:
            raise FaultError(404, "NODE_NOT_FOUND") from None
        after = find_node(control.nodes(), str(target.index)) or target
        return {
            "action": action.value,
            "index": after.index,
            "role": after.role,
            "node": after.http_address,
            "running": after.running,
        }
