"""The nsqds a box's handle routes act on, as the admin service finds them (issue #36).

The handle routes (:mod:`.routes.wait`, :mod:`.routes.tap`) act on every nsqd of the box,
or on one named by ``node=``: its index, as the box's node control numbers them (node 0
is ``nsqbox up``'s first nsqd), or its HTTP address, as ``/api/faults`` names nodes.
Without a node control (``nsqbox admin`` over some cluster) the nsqds are those lookupd
(or ``--nsqd-http-address``) lists, by address.
"""

from __future__ import annotations

import msgspec

from ..http.messages import HTTPError, Request
from ..wire.documents import InfoDocument
from ..wire.peer_json import PeerJSONError, decode_peer_json
from .clusterinfo import ClusterError, UpstreamError
from .faults import NSQD, ClusterFaults

__all__ = ["BoxNodes", "host_of"]

_info_decoder = msgspec.json.Decoder(InfoDocument)


def host_of(http_address: str) -> str:
    """The host part of ``host:port`` (``[::1]:4151`` gives ``::1``)."""
    host = http_address.rpartition(":")[0]
    return host[1:-1] if host.startswith("[") else host


class BoxNodes:
    """The nsqds ``faults`` knows (its discovery, its node control, its HTTP client)."""

    def __init__(self, faults: ClusterFaults) -> None:
        self.faults = faults

    async def nsqds(self) -> list[str]:
        """Every nsqd's HTTP address: the box's in node order (running or not), else
        the cluster's as lookupd lists them, by address."""
        controlled = [n for n in self.faults.controlled() if n.role == NSQD]
        if controlled:
            return [n.http_address for n in sorted(controlled, key=lambda n: n.index)]
        try:
            found = await self.faults.info.producers(self.faults.lookupds, self.faults.nsqds)
        except ClusterError:
            return []
        return sorted({p.http_address for p in found.value})

    async def chosen(self, request: Request) -> list[str]:
        """The nsqds the request names with ``node=`` (all without it); ``404
        NODE_NOT_FOUND`` for a node the box does not have."""
        nsqds = await self.nsqds()
        name = request.arg("node")
        if not name:
            return nsqds
        if name.isascii() and name.isdigit() and len(name) <= 6:
            index = int(name)
            if index < len(nsqds):
                return [nsqds[index]]
        elif name in nsqds:
            return [name]
        raise HTTPError(404, "NODE_NOT_FOUND")

    async def tcp_address(self, http_address: str) -> tuple[str, int]:
        """The nsqd's TCP address, from its ``/info`` (the host its HTTP address has)."""
        try:
            body = await self.faults.info.get(http_address, "/info")
            info = decode_peer_json(body, _info_decoder)
        except UpstreamError as exc:
            raise HTTPError(502, f"UPSTREAM_ERROR: {exc}") from None
        except PeerJSONError:
            raise HTTPError(502, f"UPSTREAM_ERROR: {http_address} sent no /info") from None
        if not 0 < info.tcp_port < 65536:
            raise HTTPError(502, f"UPSTREAM_ERROR: {http_address} has no TCP port")
        return host_of(http_address), info.tcp_port
