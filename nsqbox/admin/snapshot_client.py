"""A client of the admin service's ``/api/snapshot`` (what the TUI uses to save and to show
where the box was loaded from).

:class:`AdminSnapshots` asks an admin service (``nsqbox up``'s) to save a snapshot of the box in
its directory (``POST /api/snapshot?file=NAME``) and what it says of the box's last load
(``GET /api/snapshot``). It uses an ``httpx.AsyncClient`` the caller owns (trio or asyncio).
An answer other than 200 raises :class:`SnapshotClientError` with the admin service's status
and message; an admin service that cannot be reached raises it with status 0.
"""

from __future__ import annotations

from typing import Annotated, Any, Final

import httpx
import msgspec

from ..net.unreachable import unreachable_reason
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .clusterinfo import base_url

__all__ = ["AdminSnapshots", "LoadedFrom", "SavedSnapshot", "SnapshotClientError", "SnapshotInfo"]

_Count = Annotated[int, msgspec.Meta(ge=0, le=2**63 - 1)]
_Text = Annotated[str, msgspec.Meta(max_length=4096)]
_PATH: Final = "/api/snapshot"


class SnapshotClientError(Exception):
    """The admin service refused, or could not be reached (``status`` 0)."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class LoadedFrom(msgspec.Struct, frozen=True, kw_only=True):
    """The box's last load: from which file (its base name), when, and what it brought."""

    file: _Text = ""
    #: Real wall-clock time of the load, ns since the epoch.
    loaded_at_ns: _Count = 0
    #: Whether it replaced what the box held (else merged into it).
    replace: bool = False
    messages: _Count = 0
    nodes: _Count = 0


class SnapshotInfo(msgspec.Struct, frozen=True, kw_only=True):
    """``GET /api/snapshot``: the last load (None: none since the box started), and the
    directory saves go to."""

    loaded: LoadedFrom | None = None
    directory: _Text = ""


class SavedSnapshot(msgspec.Struct, frozen=True, kw_only=True):
    """``POST /api/snapshot?file=NAME``: what was saved, and where."""

    file: _Text
    directory: _Text = ""
    bytes: _Count = 0
    nodes: _Count = 0
    topics: _Count = 0
    channels: _Count = 0
    messages: _Count = 0


_info_decoder = msgspec.json.Decoder(SnapshotInfo)
_saved_decoder = msgspec.json.Decoder(SavedSnapshot)
_doc_decoder = msgspec.json.Decoder(dict[str, Any])


class AdminSnapshots:
    """The snapshots of the box whose admin service is at ``address`` (``host:port``).

    ``headers`` go with every request (the ``--acl-http-header`` user, for ``--admin-user``).
    """

    def __init__(
        self, client: httpx.AsyncClient, address: str, *, headers: dict[str, str] | None = None
    ) -> None:
        self.client = client
        self.address = address
        self.headers = dict(headers or {})

    async def _call(self, method: str, params: dict[str, str] | None = None) -> bytes:
        url = base_url(self.address) + _PATH
        try:
            response = await self.client.request(method, url, params=params, headers=self.headers)
        except httpx.HTTPError as exc:
            reason = unreachable_reason(exc)
            raise SnapshotClientError(
                0, f"cannot reach the admin service at {self.address}: {reason}"
            ) from exc
        if response.status_code != 200:
            try:
                message = decode_peer_json(response.content, _doc_decoder).get("message")
            except PeerJSONError:
                message = None
            if not isinstance(message, str) or not message:
                message = f"{response.status_code} {response.text.strip()[:200]!r}"
            raise SnapshotClientError(response.status_code, message)
        return response.content

    async def info(self) -> SnapshotInfo:
        """``GET /api/snapshot``."""
        body = await self._call("GET")
        try:
            return decode_peer_json(body, _info_decoder)
        except PeerJSONError as exc:
            raise SnapshotClientError(502, f"bad response from the admin service: {exc}") from None

    async def save(self, name: str) -> SavedSnapshot:
        """``POST /api/snapshot?file=NAME``: the box saves a snapshot as ``name``."""
        body = await self._call("POST", {"file": name})
        try:
            return decode_peer_json(body, _saved_decoder)
        except PeerJSONError as exc:
            raise SnapshotClientError(502, f"bad response from the admin service: {exc}") from None
