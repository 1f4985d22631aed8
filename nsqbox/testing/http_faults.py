"""``nsqbox.faults`` over HTTP: subprocess mode, and noproc mode against nsqbox's nsqd.

Each call goes to the nsqd's ``/nsqbox/faults`` routes
(:mod:`nsqbox.nsqd.fault_routes`), so it does what the same call does in thread
mode. A real nsqd has no such route: it answers 404, and the call raises
:class:`~.faults.FaultsUnsupported` saying faults need nsqbox's nsqd. Bad
arguments the server refuses (400) raise ValueError, as in thread mode.
"""

from __future__ import annotations

import json
from typing import Any

from .config import Address, BoxAddresses
from .faults import ActiveFault, FaultInfo, Faults, FaultsUnsupported
from .remote import NSQHTTPError, http

__all__ = ["Faults", "HTTPFaults", "faults_for"]

_ROUTES = "/nsqbox/faults"


def _no_routes(address: Address) -> str:
    return (
        f"faults need nsqbox's nsqd: the nsqd at {address} answered 404 to {_ROUTES} "
        "(a real NSQ nsqd, or nsqbox's with --auth-http-address, which turns the routes off)"
    )


def _info(node: int, doc: dict[str, Any]) -> FaultInfo:
    return FaultInfo(
        node,
        int(doc["id"]),
        str(doc["kind"]),
        doc["topic"],
        str(doc["error"]),
        doc["remaining"],
        float(doc["since"]),
    )


class HTTPFaults(Faults):
    """:class:`~.faults.Faults` through each nsqd's ``/nsqbox/faults`` routes."""

    def __init__(self, addresses: BoxAddresses, *, timeout: float = 10.0, mode: str = "") -> None:
        super().__init__(None, None, mode=mode)
        self._addresses = addresses
        self._timeout = timeout
        self._reachable: bool | None = None

    @property
    def supported(self) -> bool:
        """Whether the box's nsqds have the routes (asked once, of the first nsqd)."""
        if self._reachable is None:
            try:
                self._request("GET", 0, _ROUTES)
                self._reachable = True
            except FaultsUnsupported:
                self._reachable = False
        return self._reachable

    def _request(
        self, method: str, node: int, path: str, params: dict[str, str] | None = None
    ) -> Any:
        address = self._addresses.nsqd_http[node]
        try:
            body = http(method, address, path, params, timeout=self._timeout)
        except NSQHTTPError as exc:
            if exc.status == 404:
                raise FaultsUnsupported(_no_routes(address)) from None
            if exc.status == 400:
                raise ValueError(str(exc)) from None
            raise
        return json.loads(body)

    def _add(self, kind: str, node: int, params: dict[str, str | None]) -> ActiveFault:
        sent = {key: value for key, value in params.items() if value is not None}
        doc = self._request("POST", node, f"{_ROUTES}/{kind}", sent)
        return ActiveFault(self, _info(node, doc))

    # -- lasting faults ------------------------------------------------------------
    def fail_publishes(
        self,
        topic: str | None = None,
        *,
        count: int | None = None,
        duration: float | None = None,
        error: str | None = None,
        node: int = 0,
    ) -> ActiveFault:
        """As :meth:`.Faults.fail_publishes`, through ``POST /nsqbox/faults/fail_publishes``."""
        if count is not None and count < 1:
            raise ValueError("count must be at least 1")
        if duration is not None and duration <= 0:
            raise ValueError("duration must be positive")
        params = {
            "topic": topic,
            "count": None if count is None else str(count),
            "duration": None if duration is None else repr(float(duration)),
            "error": error,
        }
        return self._add("fail_publishes", node, params)

    def disk_full(
        self,
        topic: str | None = None,
        *,
        duration: float | None = None,
        error: str | None = None,
        node: int = 0,
    ) -> ActiveFault:
        """As :meth:`.Faults.disk_full`, through ``POST /nsqbox/faults/disk_full``."""
        if duration is not None and duration <= 0:
            raise ValueError("duration must be positive")
        params = {
            "topic": topic,
            "duration": None if duration is None else repr(float(duration)),
            "error": error,
        }
        return self._add("disk_full", node, params)

    def active(self) -> list[FaultInfo]:
        """Every lasting fault in force, on every node (``GET /nsqbox/faults``)."""
        return [
            _info(node, doc)
            for node in range(len(self._addresses.nsqd_http))
            for doc in self._request("GET", node, _ROUTES)["faults"]
        ]

    def lift(self, fault: FaultInfo) -> bool:
        """End one fault (``DELETE /nsqbox/faults/:id``); False when it had already ended."""
        return bool(self._request("DELETE", fault.node, f"{_ROUTES}/{fault.id}")["lifted"])

    def lift_all(self) -> int:
        """End every lasting fault on every node (``DELETE /nsqbox/faults``); how many."""
        nodes = range(len(self._addresses.nsqd_http))
        return sum(int(self._request("DELETE", node, _ROUTES)["lifted"]) for node in nodes)

    # -- one-shot faults -----------------------------------------------------------
    def time_out_in_flight(
        self, topic: str | None = None, channel: str | None = None, *, node: int = 0
    ) -> int:
        """As :meth:`.Faults.time_out_in_flight`, through its POST route."""
        params = {k: v for k, v in (("topic", topic), ("channel", channel)) if v is not None}
        return int(self._request("POST", node, f"{_ROUTES}/time_out_in_flight", params)["count"])

    def drop_connections(
        self,
        topic: str | None = None,
        channel: str | None = None,
        *,
        user_agent: str | None = None,
        reset: bool = False,
        node: int = 0,
    ) -> int:
        """As :meth:`.Faults.drop_connections`, through its POST route."""
        params = {"reset": "true" if reset else "false"}
        for key, value in (("topic", topic), ("channel", channel), ("user_agent", user_agent)):
            if value is not None:
                params[key] = value
        return int(self._request("POST", node, f"{_ROUTES}/drop_connections", params)["count"])


def faults_for(box: object, mode: str) -> Faults:
    """The faults of a box of the sync handle: thread mode reaches its servers on
    their loop, the others (subprocess, noproc) through the nsqds' HTTP routes."""
    from .boxes import ThreadBox
    from .config import BoxAddresses

    if isinstance(box, ThreadBox):
        return Faults(box.call, lambda: list(box.ops.nsqds))
    addresses = getattr(box, "addresses", None)
    if isinstance(addresses, BoxAddresses):
        timeout = getattr(getattr(box, "ops", None), "timeout", 10.0)
        return HTTPFaults(addresses, timeout=float(timeout), mode=mode)
    return Faults(None, None, mode=mode)
