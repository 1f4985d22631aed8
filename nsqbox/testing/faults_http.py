"""``nsqbox.faults`` over HTTP: subprocess mode, and noproc mode against nsqbox's servers.

Each call goes to the nsqd's or nsqlookupd's ``/nsqbox/faults`` routes
(:mod:`nsqbox.nsqd.routes.faults`, :mod:`nsqbox.lookupd.routes.faults`), so it does
what the same call does in thread mode. A real nsqd or nsqlookupd has no such
route: it answers 404, and the call raises :class:`~.faults.FaultsUnsupported`
saying faults need nsqbox's servers (listing and lifting skip an nsqlookupd
without them). Restarts and crashes go through the subprocess box (noproc mode
cannot do them). Bad arguments the server refuses (400) raise ValueError, as in
thread mode.
"""

from __future__ import annotations

import json
from typing import Any

from .config import Address, BoxAddresses
from .faults import (
    LOOKUPD,
    NSQD,
    ActiveFault,
    FaultInfo,
    Faults,
    FaultsUnsupported,
    NodeControl,
    Params,
    fault_info,
)
from .remote import NSQHTTPError, http

__all__ = ["Faults", "HTTPFaults", "faults_for"]

_ROUTES = "/nsqbox/faults"


def _no_routes(server: str, address: Address) -> str:
    return (
        f"faults need nsqbox's {server}: the {server} at {address} answered 404 to {_ROUTES} "
        "(a real NSQ server, or nsqbox's nsqd with --auth-http-address, which turns the "
        "routes off)"
    )


def _query(params: Params) -> dict[str, str]:
    """Parameters as the routes take them (None: not sent)."""
    out: dict[str, str] = {}
    for key, value in params.items():
        if value is None:
            continue
        if isinstance(value, bool):
            out[key] = "true" if value else "false"
        elif isinstance(value, float):
            out[key] = repr(value)
        else:
            out[key] = str(value)
    return out


class HTTPFaults(Faults):
    """:class:`~.faults.Faults` through each server's ``/nsqbox/faults`` routes."""

    def __init__(
        self,
        addresses: BoxAddresses,
        *,
        timeout: float = 10.0,
        mode: str = "",
        control: NodeControl | None = None,
    ) -> None:
        super().__init__(None, None, control=control, mode=mode)
        self._addresses = addresses
        self._timeout = timeout
        self._reachable: bool | None = None

    @property
    def supported(self) -> bool:
        """Whether the box's nsqds have the routes (asked once, of the first nsqd)."""
        if self._reachable is None:
            try:
                self._request("GET", NSQD, 0, _ROUTES)
                self._reachable = True
            except FaultsUnsupported:
                self._reachable = False
        return self._reachable

    def _request(
        self, method: str, server: str, node: int, path: str, params: Params | None = None
    ) -> Any:
        addresses = self._addresses
        address = (addresses.lookupd_http if server == LOOKUPD else addresses.nsqd_http)[node]
        try:
            body = http(method, address, path, _query(params or {}), timeout=self._timeout)
        except NSQHTTPError as exc:
            if exc.status == 404:
                raise FaultsUnsupported(_no_routes(server, address)) from None
            if exc.status == 400:
                raise ValueError(str(exc)) from None
            raise
        return json.loads(body)

    def _each(self, method: str, path: str) -> list[tuple[str, int, Any]]:
        """``method path`` on every server: nsqds, then the nsqlookupds that have the routes."""
        addresses = self._addresses
        answers = [
            (NSQD, i, self._request(method, NSQD, i, path)) for i in range(len(addresses.nsqd_http))
        ]
        for i in range(len(addresses.lookupd_http)):
            try:
                answers.append((LOOKUPD, i, self._request(method, LOOKUPD, i, path)))
            except FaultsUnsupported:
                continue  # a real nsqlookupd beside nsqbox's nsqds: it has no faults
        return answers

    def _add(self, server: str, node: int, kind: str, params: Params) -> ActiveFault:
        doc = self._request("POST", server, node, f"{_ROUTES}/{kind}", params)
        return ActiveFault(self, fault_info(server, node, doc))

    def _act(self, node: int, kind: str, params: Params) -> int:
        return int(self._request("POST", NSQD, node, f"{_ROUTES}/{kind}", params)["count"])

    def _listing(self) -> list[FaultInfo]:
        return [
            fault_info(server, node, doc)
            for server, node, answer in self._each("GET", _ROUTES)
            for doc in answer["faults"]
        ]

    def _lift(self, fault: FaultInfo) -> bool:
        path = f"{_ROUTES}/{fault.id}"
        return bool(self._request("DELETE", fault.server, fault.node, path)["lifted"])

    def _lift_all(self) -> int:
        return sum(int(answer["lifted"]) for _, _, answer in self._each("DELETE", _ROUTES))


def faults_for(box: object, mode: str) -> Faults:
    """The faults of a box of the sync handle: thread mode reaches its servers on
    their loop, the others (subprocess, noproc) through the nsqds' HTTP routes."""
    from .boxes import ThreadBox
    from .config import BoxAddresses
    from .subprocess_box import SubprocessBox

    if isinstance(box, ThreadBox):
        return Faults(box.call, lambda: box.cluster, control=box)
    addresses = getattr(box, "addresses", None)
    if isinstance(addresses, BoxAddresses):
        timeout = getattr(getattr(box, "ops", None), "timeout", 10.0)
        control = box if isinstance(box, SubprocessBox) else None
        return HTTPFaults(addresses, timeout=float(timeout), mode=mode, control=control)
    return Faults(None, None, mode=mode)
