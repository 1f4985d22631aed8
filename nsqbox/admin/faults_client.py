"""A client of the admin service's ``/api/faults`` (what ``nsqbox fault`` and the TUI use).

:class:`AdminFaults` is a :class:`~.faults.FaultSource` that asks an admin service (``nsqbox
up``'s, or ``nsqbox admin``) instead of the nodes themselves, so it can also restart, crash and
start the box's nodes. It uses an ``httpx.AsyncClient`` the caller owns (trio or asyncio).
An answer other than 200 raises :class:`~.faults.FaultError` with the admin service's status
and message; an admin service that cannot be reached raises it with status 0.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx
import msgspec

from ..net.unreachable import unreachable_reason
from ..wire.peer_json import PeerJSONError, decode_peer_json, peer_count
from .clusterinfo import base_url
from .control import NodeAction
from .faults import FaultError, FaultListing

__all__ = ["AdminFaults"]

#: The 404s the admin service's /api/faults itself answers (any other: a route it lacks).
_OURS = frozenset({"NODE_NOT_FOUND", "NOT_SUPPORTED", "UNKNOWN_FAULT"})
_NOT_ADMIN = (
    "has no /api/faults: not an nsqbox admin service (nsqbox up serves one on port 4171, "
    "nsqbox admin on its --http-address), or one run with --auth-http-address, which turns "
    "nsqbox's own routes off"
)

_listing_decoder = msgspec.json.Decoder(FaultListing)
_doc_decoder = msgspec.json.Decoder(dict[str, Any])


class AdminFaults:
    """The faults of the cluster the admin service at ``address`` (``host:port``) reads.

    ``headers`` go with every request (the ``--acl-http-header`` user, for ``--admin-user``).
    """

    def __init__(
        self, client: httpx.AsyncClient, address: str, *, headers: dict[str, str] | None = None
    ) -> None:
        self.client = client
        self.address = address
        self.headers = dict(headers or {})

    async def _call(self, method: str, path: str, params: Sequence[tuple[str, str]] = ()) -> bytes:
        url = base_url(self.address) + path
        try:
            response = await self.client.request(
                method, url, params=list(params), headers=self.headers
            )
        except httpx.HTTPError as exc:
            reason = unreachable_reason(exc)
            raise FaultError(
                0, f"cannot reach the admin service at {self.address}", reason
            ) from exc
        if response.status_code != 200:
            try:
                message = decode_peer_json(response.content, _doc_decoder).get("message")
            except PeerJSONError:
                message = None
            if not isinstance(message, str) or not message:
                message = f"{response.status_code} {response.text.strip()!r}"
            if response.status_code in (404, 405) and message.partition(":")[0] not in _OURS:
                message += f" - {self.address} {_NOT_ADMIN}"
            raise FaultError(response.status_code, message)
        return response.content

    async def _doc(
        self, method: str, path: str, params: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        body = await self._call(method, path, params)
        try:
            doc: dict[str, Any] = decode_peer_json(body, _doc_decoder)
        except PeerJSONError as exc:
            raise FaultError(502, "bad response from the admin service", str(exc)) from None
        return doc

    async def listing(self) -> FaultListing:
        """``GET /api/faults``."""
        body = await self._call("GET", "/api/faults")
        try:
            return decode_peer_json(body, _listing_decoder)
        except PeerJSONError as exc:
            raise FaultError(502, "bad response from the admin service", str(exc)) from None

    async def add(
        self, kind: str, node: str | None, params: Sequence[tuple[str, str]] = ()
    ) -> dict[str, Any]:
        """``POST /api/faults/<kind>?node=&...``."""
        sent = [("node", node), *params] if node else list(params)
        return await self._doc("POST", f"/api/faults/{kind}", sent)

    async def lift(self, node: str, fault_id: str) -> bool:
        """``DELETE /api/faults/<id>?node=``."""
        sent = [("node", node)] if node else []
        return bool((await self._doc("DELETE", f"/api/faults/{fault_id}", sent)).get("lifted"))

    async def lift_all(self) -> tuple[int, str]:
        """``DELETE /api/faults``."""
        doc = await self._doc("DELETE", "/api/faults")
        return peer_count(doc.get("lifted")), str(doc.get("message", ""))

    async def node_action(self, action: NodeAction, node: str | None) -> dict[str, Any]:
        """``POST /api/faults/restart|crash|start?node=``."""
        sent = [("node", node)] if node else []
        return await self._doc("POST", f"/api/faults/{action.value}", sent)
