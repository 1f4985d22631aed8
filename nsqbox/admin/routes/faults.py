"""The admin service's ``/api/faults``: nsqbox's faults on demand over nsqadmin's port (issue #18).

Not part of nsqadmin. Applications under test in any language, and ``nsqbox fault``, make the
cluster misbehave through one address; the admin service finds the nodes and forwards to each
node's ``/nsqbox/faults`` routes (:class:`~.faults.ClusterFaults`).

=======  ================================  ========================================================
method   route                             answer
=======  ================================  ========================================================
GET      /api/faults                       ``{faults, nodes, control, message}``: every lasting
                                           fault with its ``node`` and ``role``; every node with
                                           ``supported`` (false for real NSQ) and ``error``
POST     /api/faults/:kind?node=&...       the fault ``kind`` on ``node`` (its HTTP address;
                                           default: the only nsqd), with the other parameters
                                           passed on: the node's answer plus ``node``, ``role``
POST     /api/faults/restart?node=         restart, crash or start a node (an index or HTTP
POST     /api/faults/crash?node=           address) through the box's node control;
POST     /api/faults/start?node=           ``{action, index, role, node, running, message}``
DELETE   /api/faults/:node/:id             lift one fault: ``{lifted: true|false, node, message}``
DELETE   /api/faults/:id?node=             the same
DELETE   /api/faults                       lift every fault everywhere: ``{lifted: N, message}``
=======  ================================  ========================================================

Errors are NSQ's ``{"message": ...}``: ``400 INVALID_KIND``, ``INVALID_ID``,
``MISSING_ARG_NODE``, and the node's own 400 (``INVALID_COUNT``...); ``403 FORBIDDEN``
(``--admin-user``, for every change); ``404 NODE_NOT_FOUND`` (only known nodes are asked: the
admin service is no proxy), ``404 NOT_SUPPORTED: ...`` (a node without fault routes),
``404 UNKNOWN_FAULT: ...``; ``409 NODE_CONTROL_FAILED: ...``; ``501 NOT_IMPLEMENTED: ...``
(node control without the box); ``502 UPSTREAM_ERROR: ...``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable

import msgspec

from ...http.messages import HTTPError, Request
from ...http.router import Router
from ..control import NodeAction
from ..faults import ClusterFaults, FaultError

__all__ = ["add_fault_routes"]

log = logging.getLogger("nsqbox.admin")

Doc = dict[str, object]
Handler = Callable[[Request], Awaitable[object]]


def _refusing(handler: Callable[[Request], Awaitable[Doc]]) -> Handler:
    """``handler`` with its FaultError answered as NSQ's JSON error."""

    async def handle(request: Request) -> object:
        try:
            return await handler(request)
        except FaultError as exc:
            if exc.status == 502:
                log.error("faults: %s", exc.message)
            raise HTTPError(exc.status, exc.message) from None

    return handle


def _passed_on(request: Request) -> list[tuple[str, str]]:
    """The query parameters for the node: every one but ``node``, in order."""
    return [(k, v) for k, values in request.args().items() if k != "node" for v in values]


def add_fault_routes(
    router: Router, faults: ClusterFaults, authorize: Callable[[Request], None]
) -> None:
    """Add ``/api/faults`` to the admin ``router``; ``authorize`` raises 403 for changes
    the request may not make."""

    async def listing(request: Request) -> Doc:
        found = await faults.listing()
        if found.message:
            log.warning("%s", found.message)
        doc: Doc = msgspec.to_builtins(found)
        return doc

    async def add(request: Request) -> Doc:
        authorize(request)
        kind = request.params["fault"]
        doc = await faults.add(kind, request.arg("node"), _passed_on(request))
        log.info("fault %s on %s: %s", kind, doc["node"], doc)
        return {**doc, "message": ""}

    def node_action(action: NodeAction) -> Handler:
        async def act(request: Request) -> Doc:
            authorize(request)
            done = await faults.node_action(action, request.arg("node"))
            log.info("%s node %s", action.value, done["node"])
            return {**done, "message": ""}

        return _refusing(act)

    async def lift(request: Request) -> Doc:
        authorize(request)
        node = request.params.get("node") or request.arg("node") or ""
        fault_id = request.params["fault"]
        lifted = await faults.lift(node, fault_id)
        return {"lifted": lifted, "node": node, "message": ""}

    async def lift_all(request: Request) -> Doc:
        authorize(request)
        lifted, message = await faults.lift_all()
        if message:
            log.warning("%s", message)
        return {"lifted": lifted, "message": message}

    # nsqbox's own: off (404) with the box's --auth-http-address, as the nodes' routes are.
    router.add("GET", "/api/faults", _refusing(listing), nsqbox_only=True)
    router.add("DELETE", "/api/faults", _refusing(lift_all), nsqbox_only=True)
    for action in NodeAction:
        router.add("POST", f"/api/faults/{action.value}", node_action(action), nsqbox_only=True)
    router.add("POST", "/api/faults/:fault", _refusing(add), nsqbox_only=True)
    router.add("DELETE", "/api/faults/:fault", _refusing(lift), nsqbox_only=True)
    router.add("DELETE", "/api/faults/:node/:fault", _refusing(lift), nsqbox_only=True)
