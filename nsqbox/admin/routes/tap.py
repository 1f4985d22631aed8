"""The test handle's capture over HTTP: ``/api/captures`` (issue #36).

Not part of nsqadmin. A capture records every message published to a topic on every
nsqd of the box (or ``node=``'s) while it is open, through each node's tap
(:mod:`nsqbox.nsqd.routes.tap`, ``/nsqbox/tap``): it creates no channel and takes nothing, sees a
DPUB when it is published, and survives a restart and a crash of a node (the node keeps
its taps in its data path).

=======  ==============================  ===============================================
method   route                           answer
=======  ==============================  ===============================================
POST     /api/captures?topic=T[&node=]   ``{id, topic, nodes}``: recording from now on
GET      /api/captures/:id?from=N        ``{messages, next, lost, overflow}``: the
                                         messages from the ``N``-th on (``id, body`` in
                                         base64, ``timestamp`` ns, ``defer_ms``, ``node``),
                                         ``next`` to pass as ``from`` next time
DELETE   /api/captures/:id?from=N        the same, and the capture ends
=======  ==============================  ===============================================

Messages are in the order they were read: each read takes what every node recorded since
the last one, by timestamp, so with one nsqd it is publish order. ``lost`` says messages
may be missing (a node came back without its tap, or was down when the capture ended);
``overflow`` that a tap hit its bounds. At most :data:`MAX_CAPTURES` captures are open
(``503 TOO_MANY_CAPTURES``); one nobody read for :data:`IDLE_TIMEOUT` seconds is dropped.
Errors: ``400 MISSING_ARG_TOPIC``, ``INVALID_TOPIC``, ``INVALID_FROM``; ``404
CAPTURE_NOT_FOUND``, ``NODE_NOT_FOUND``, ``NOT_SUPPORTED`` (a real nsqd: no tap);
``502 UPSTREAM_ERROR: ...``.
"""

from __future__ import annotations

import secrets
import time
from typing import Any

from ...go.syntax import parse_count
from ...http.messages import HTTPError, Request
from ...http.router import Router
from ...wire.names import is_valid_topic_name
from ...wire.peer_json import decode_peer_object
from ..box_nodes import BoxNodes
from ..clusterinfo import UpstreamError

__all__ = ["IDLE_TIMEOUT", "MAX_CAPTURES", "add_capture_routes"]

Doc = dict[str, Any]
#: The most captures open at once on one admin service.
MAX_CAPTURES = 64
#: Seconds a capture lives without being read (as a node's tap).
IDLE_TIMEOUT = 300.0
#: The most messages one capture keeps (as a node's tap).
MAX_MESSAGES = 1_000_000
_TAP = "/nsqbox/tap"


class _NodeTap:
    """One node's tap of a capture, and how far it was read."""

    def __init__(self, node: int, address: str, tap_id: str) -> None:
        self.node = node
        self.address = address
        self.tap_id = tap_id
        self.next = 0


class _Capture:
    """One open capture: a tap per nsqd, and what was read from them so far."""

    def __init__(self, topic: str, taps: list[_NodeTap]) -> None:
        self.topic = topic
        self.taps = taps
        self.messages: list[Doc] = []
        self.lost = False
        self.overflow = False
        self.touched = time.monotonic()


def _timestamp(message: Doc) -> int:
    stamp = message.get("timestamp")
    return stamp if isinstance(stamp, int) else 0


class Captures:
    """The open captures of one admin service, over the nsqds ``nodes`` finds."""

    def __init__(self, nodes: BoxNodes) -> None:
        self.nodes = nodes
        self.open: dict[str, _Capture] = {}

    def _expire(self) -> None:
        now = time.monotonic()
        for capture_id, capture in list(self.open.items()):
            if now - capture.touched > IDLE_TIMEOUT:
                del self.open[capture_id]  # the nodes drop their taps the same way

    async def _open_tap(self, address: str, topic: str) -> str:
        info = self.nodes.faults.info
        try:
            doc = decode_peer_object(await info.post(address, f"{_TAP}/open", {"topic": topic}))
        except UpstreamError as exc:
            if exc.status == 404:
                raise HTTPError(404, f"NOT_SUPPORTED: {address} has no tap (real nsqd?)") from None
            raise HTTPError(502, f"UPSTREAM_ERROR: {exc}") from None
        tap_id = doc.get("id")
        if not isinstance(tap_id, str):
            raise HTTPError(502, f"UPSTREAM_ERROR: {address} opened no tap")
        return tap_id

    async def start(self, request: Request) -> Doc:
        """Open a capture of ``topic`` on the chosen nsqds."""
        topic = request.arg("topic")
        if not topic:
            raise HTTPError(400, "MISSING_ARG_TOPIC")
        if not is_valid_topic_name(topic):
            raise HTTPError(400, "INVALID_TOPIC")
        self._expire()
        if len(self.open) >= MAX_CAPTURES:
            raise HTTPError(503, "TOO_MANY_CAPTURES")
        every = await self.nodes.nsqds()
        chosen = await self.nodes.chosen(request)
        taps: list[_NodeTap] = []
        try:
            for address in chosen:
                taps.append(_NodeTap(every.index(address), address, ""))
                taps[-1].tap_id = await self._open_tap(address, topic)
        except BaseException:
            await self._close_taps([t for t in taps if t.tap_id])
            raise
        capture_id = secrets.token_hex(8)
        self.open[capture_id] = _Capture(topic, taps)
        return {"id": capture_id, "topic": topic, "nodes": [t.address for t in taps]}

    def _get(self, capture_id: str) -> _Capture:
        self._expire()
        capture = self.open.get(capture_id)
        if capture is None:
            raise HTTPError(404, "CAPTURE_NOT_FOUND")
        capture.touched = time.monotonic()
        return capture

    async def _take(self, capture: _Capture, tap: _NodeTap, *, ending: bool) -> list[Doc]:
        info = self.nodes.faults.info
        path = f"{_TAP}/close" if ending else f"{_TAP}/read"
        params = {"id": tap.tap_id, "from": str(tap.next)}
        try:
            body = await info.request("POST" if ending else "GET", tap.address, path, params)
        except UpstreamError as exc:
            if exc.status == 404 and not ending:  # the node came back without our tap
                capture.lost = True
                tap.tap_id, tap.next = await self._open_tap(tap.address, capture.topic), 0
            elif exc.status is None or exc.status == 404:
                capture.lost = capture.lost or ending  # down at the end: out of reach
            else:
                raise HTTPError(502, f"UPSTREAM_ERROR: {exc}") from None
            return []
        doc = decode_peer_object(body)
        capture.lost = capture.lost or doc.get("lost") is True
        capture.overflow = capture.overflow or doc.get("overflow") is True
        following = doc.get("next")
        if isinstance(following, int) and not isinstance(following, bool):
            capture.lost = capture.lost or following < tap.next
            tap.next = following
        messages = doc.get("messages")
        out: list[Doc] = []
        for m in messages if isinstance(messages, list) else []:
            if isinstance(m, dict):
                out.append({**m, "node": tap.node})
        return out

    async def _read(self, capture: _Capture, *, ending: bool) -> None:
        batch: list[Doc] = []
        for tap in capture.taps:
            batch += await self._take(capture, tap, ending=ending)
        batch.sort(key=_timestamp)
        room = MAX_MESSAGES - len(capture.messages)
        if len(batch) > room:
            batch, capture.overflow = batch[:room], True
        capture.messages += batch

    async def _close_taps(self, taps: list[_NodeTap]) -> None:
        for tap in taps:
            try:
                await self.nodes.faults.info.post(tap.address, f"{_TAP}/close", {"id": tap.tap_id})
            except UpstreamError:
                continue

    async def read(self, request: Request, *, ending: bool = False) -> Doc:
        """The messages from ``from`` on; ``ending``: and close the capture."""
        raw = request.arg("from") or "0"
        try:
            start = parse_count(raw)
        except ValueError:
            raise HTTPError(400, "INVALID_FROM") from None
        capture_id = request.params["id"]
        capture = self._get(capture_id)
        if ending:
            del self.open[capture_id]
        await self._read(capture, ending=ending)
        return {
            "messages": capture.messages[start:],
            "next": len(capture.messages),
            "lost": capture.lost,
            "overflow": capture.overflow,
        }


def add_capture_routes(router: Router, captures: Captures) -> None:
    """Add ``/api/captures`` to the admin ``router``."""

    async def start(request: Request) -> Doc:
        return await captures.start(request)

    async def read(request: Request) -> Doc:
        return await captures.read(request)

    async def close(request: Request) -> Doc:
        return await captures.read(request, ending=True)

    # nsqbox's own: off (404) with the box's --auth-http-address, as the nodes' routes are.
    router.add("POST", "/api/captures", start, nsqbox_only=True)
    router.add("GET", "/api/captures/:id", read, nsqbox_only=True, log=False)
    router.add("DELETE", "/api/captures/:id", close, nsqbox_only=True)
