"""Boxes reached only through NSQ's public TCP and HTTP APIs (subprocess and noproc).

HTTP goes through httpx (no proxies from the environment: the servers are local or named
explicitly), TCP through :mod:`.consumer`. Everything here is blocking and runs in the
caller's thread, so it works with any nsqd and nsqlookupd, nsqbox's or NSQ's.
"""

from __future__ import annotations

import base64
import json
import struct
import time
import uuid
from collections.abc import Collection
from typing import Any, TypeVar, Union

import httpcore  # noqa: F401  (see below)
import httpx
import msgspec

from .config import Address, BoxAddresses, Cleanup
from .consumer import ChannelTapThread
from .state import BoxStats, CapturedMessage

__all__ = ["CaptureUnavailable", "ChannelCapture", "HTTPTapCapture", "NSQHTTPError", "RemoteOps"]

#: Either kind of capture source.
TapCapture = Union["HTTPTapCapture", "ChannelCapture"]

D = TypeVar("D")

# httpx imports httpcore lazily and fills its table of httpcore's errors once. Importing httpcore
# with httpx keeps one copy of it when pytester's in-process runs unload what they imported, so
# a refused connection stays an httpx.ConnectError (else httpcore's own error escapes).

_UINT32 = struct.Struct(">I")


class NSQHTTPError(RuntimeError):
    """An HTTP API call failed (``status`` is 0 when the server could not be reached)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


def http(
    method: str,
    address: Address,
    path: str,
    params: dict[str, str] | None = None,
    body: bytes | None = None,
    *,
    timeout: float = 10.0,
) -> bytes:
    """One HTTP request; the response body, or NSQHTTPError."""
    url = str(httpx.URL(address.url + path, params=params or None))
    try:
        response = httpx.request(method, url, content=body, timeout=timeout, trust_env=False)
    except httpx.TransportError as exc:
        raise NSQHTTPError(f"{method} {url}: {exc}") from None
    if response.is_error:
        detail = response.content.decode(errors="replace").strip()
        raise NSQHTTPError(f"{method} {url}: {response.status_code} {detail}", response.status_code)
    return response.content


def http_json(address: Address, path: str, params: dict[str, str] | None = None) -> Any:
    """GET a JSON document."""
    return json.loads(http("GET", address, path, params))


def http_document(
    address: Address, path: str, kind: type[D], params: dict[str, str] | None = None
) -> D:
    """GET a JSON document of the shared schema (:mod:`nsqbox.wire.documents`)."""
    return msgspec.json.decode(http("GET", address, path, params), type=kind)


class RemoteOps:
    """The operations a handle needs, over the servers' public APIs."""

    def __init__(self, addresses: BoxAddresses, timeout: float = 10.0) -> None:
        self.addresses = addresses
        self.timeout = timeout

    # -- state -------------------------------------------------------------------
    def node_stats(self, node: int) -> BoxStats:
        """One nsqd's ``/stats``."""
        params = {"format": "json", "include_clients": "false", "include_mem": "false"}
        return BoxStats.from_stats_body(
            http("GET", self.addresses.nsqd_http[node], "/stats", params)
        )

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel (of one nsqd, or summed over all)."""
        nodes = range(len(self.addresses.nsqd_http)) if node is None else [node]
        return BoxStats.merge(self.node_stats(n) for n in nodes)

    def topics(self) -> set[str]:
        """Every topic on any nsqd of the box."""
        return set(self.stats().topics)

    def ping(self) -> None:
        """Check that every server answers; NSQHTTPError otherwise."""
        for address in (*self.addresses.nsqd_http, *self.addresses.lookupd_http):
            http("GET", address, "/ping", timeout=self.timeout)

    # -- publishing --------------------------------------------------------------
    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> None:
        """``/pub`` (``defer`` for DPUB) or a binary ``/mpub``."""
        address = self.addresses.nsqd_http[node]
        if len(bodies) == 1 or defer_ms:
            params = {"topic": topic}
            if defer_ms:
                params["defer"] = str(defer_ms)
            for body in bodies:
                http("POST", address, "/pub", params, body)
            return
        payload = b"".join(_UINT32.pack(len(b)) + b for b in bodies)
        http(
            "POST",
            address,
            "/mpub",
            {"topic": topic, "binary": "true"},
            _UINT32.pack(len(bodies)) + payload,
        )

    # -- between tests -----------------------------------------------------------
    def reset(self, cleanup: Cleanup, names: Collection[str] | None = None) -> None:
        """Delete (or empty) ``names`` (None: every topic) on every nsqd, then in nsqlookupd."""
        if cleanup is Cleanup.NONE:
            return
        for node, address in enumerate(self.addresses.nsqd_http):
            stats = self.node_stats(node)
            for topic in stats.topics.values():
                if names is not None and topic.name not in names:
                    continue
                if cleanup is Cleanup.DELETE:
                    # Channels first, so nsqlookupd gets no "unexpected UNREGISTER" (a
                    # topic's UNREGISTER while it still lists channels makes it warn).
                    for channel in topic.channels:
                        params = {"topic": topic.name, "channel": channel}
                        _ignore_404("POST", address, "/channel/delete", params)
                    _ignore_404("POST", address, "/topic/delete", {"topic": topic.name})
                    continue
                _ignore_404("POST", address, "/topic/empty", {"topic": topic.name})
                for channel in topic.channels:
                    params = {"topic": topic.name, "channel": channel}
                    _ignore_404("POST", address, "/channel/empty", params)
        if cleanup is Cleanup.DELETE:
            for address in self.addresses.lookupd_http:
                for topic_name in http_json(address, "/topics").get("topics") or []:
                    if names is None or topic_name in names:
                        _ignore_404("POST", address, "/topic/delete", {"topic": topic_name})

    # -- capture -----------------------------------------------------------------
    def open_capture(self, topic: str, timeout: float, mode: str = "tap") -> TapCapture:
        """Tap ``topic`` on every nsqd (nsqbox's ``/nsqbox/tap`` routes), or with
        ``mode="channel"`` subscribe an ephemeral channel (any nsqd)."""
        if mode == "channel":
            return ChannelCapture(self, topic, timeout)
        if mode != "tap":
            raise ValueError(f"capture mode must be 'tap' or 'channel', not {mode!r}")
        return HTTPTapCapture(self, topic)


class CaptureUnavailable(RuntimeError):
    """A capture that this nsqd cannot do the same way as nsqbox's (a real nsqd)."""


class HTTPTapCapture:
    """Capture through nsqbox's ``/nsqbox/tap`` routes: the same as the in-process tap.

    It records every publish inside each nsqd, consumes nothing and creates nothing,
    and sees a DPUB when it is published. Real nsqd has no such route: opening one
    there raises :class:`CaptureUnavailable`, which says what to do instead.

    The tap survives a restart and a crash of its nsqd (the node keeps it in its data
    path), so reading goes on where it was. When it cannot (the node is down when the
    capture ends, or came back without the tap: another data path), :attr:`lost` says
    the capture may lack messages, and a tap the node no longer knows is opened again.
    """

    mode = "tap"

    def __init__(self, ops: RemoteOps, topic: str) -> None:
        self.ops = ops
        self.topic = topic
        #: Messages published while the capture ran may be missing (see the class doc).
        self.lost = False
        self._taps: list[tuple[int, str]] = []
        self._got: list[list[CapturedMessage]] = []
        self._next: list[int] = []
        try:
            for node in range(len(ops.addresses.nsqd_http)):
                self._taps.append((node, self._open(node)))
                self._got.append([])
                self._next.append(0)
        except BaseException:
            self.close()
            raise

    def _open(self, node: int) -> str:
        address = self.ops.addresses.nsqd_http[node]
        try:
            opened = json.loads(http("POST", address, "/nsqbox/tap/open", {"topic": self.topic}))
        except NSQHTTPError as exc:
            if exc.status != 404:
                raise
            raise CaptureUnavailable(_no_tap(address, self.topic)) from None
        return str(opened["id"])

    def _take(self, index: int, path: str, method: str, *, ending: bool = False) -> None:
        node, tap_id = self._taps[index]
        got = self._got[index]
        address = self.ops.addresses.nsqd_http[node]
        params = {"id": tap_id, "from": str(self._next[index])}
        try:
            doc = json.loads(http(method, address, path, params))
        except NSQHTTPError as exc:
            if exc.status == 0:  # the node is down (a crash, a restart under way)
                self.lost = self.lost or ending  # what it recorded is out of reach
                return
            if exc.status != 404 or ending:
                self.lost = self.lost or exc.status == 404
                if exc.status == 404:
                    return
                raise
            # The node came back without our tap: open another, and say what may be missing.
            self.lost = True
            self._taps[index] = (node, self._open(node))
            self._next[index] = 0
            return
        self.lost = self.lost or bool(doc.get("lost"))
        if doc["next"] < self._next[index]:
            self.lost = True  # the node has fewer records than we read: it lost some
        self._next[index] = doc["next"]
        got.extend(
            CapturedMessage(
                base64.b64decode(m["body"]), m["id"], m["timestamp"], node, m["defer_ms"]
            )
            for m in doc["messages"]
        )

    def _sorted(self) -> list[CapturedMessage]:
        out = [m for got in self._got for m in got]
        if len(self._got) > 1:
            out.sort(key=lambda m: m.timestamp)
        return out

    def messages(self) -> list[CapturedMessage]:
        """What was published so far (a node that is down: what was read from it)."""
        for index in range(len(self._taps)):
            self._take(index, "/nsqbox/tap/read", "GET")
        return self._sorted()

    def close(self) -> list[CapturedMessage]:
        """Remove the taps; everything captured."""
        for index in range(len(self._taps)):
            self._take(index, "/nsqbox/tap/close", "POST", ending=True)
        self._taps = []
        return self._sorted()


def _no_tap(address: Address, topic: str) -> str:
    return (
        f"nsqbox: capture({topic!r}) needs nsqbox's /nsqbox/tap route, and the nsqd at "
        f"{address} has none (real NSQ?). Capturing through a channel instead would change "
        "what your consumers see (the channel takes messages a topic holds for later "
        "channels, and sees a DPUB only when its delay is over). Accept that with "
        f"capture({topic!r}, mode='channel'), or run nsqbox's servers (thread or subprocess "
        "mode)"
    )


def _ignore_404(method: str, address: Address, path: str, params: dict[str, str]) -> None:
    try:
        http(method, address, path, params)
    except NSQHTTPError as exc:
        if exc.status != 404:
            raise


class ChannelCapture:
    """Capture through the public API: an ephemeral channel per nsqd, consumed in a thread.

    The channel gets a copy of every message published to the topic after it
    subscribed, without taking anything from other channels. One difference from an
    in-process tap: when the topic had no channel yet, this channel becomes its
    first one, so messages published during the capture are no longer held for a
    channel created later (the in-process box taps the topic instead).
    """

    mode = "channel"
    #: Not tracked: an ephemeral channel goes with its nsqd (its messages too).
    lost = False

    def __init__(self, ops: RemoteOps, topic: str, timeout: float) -> None:
        self.ops = ops
        self.topic = topic
        self.timeout = timeout
        self.channel = f"nsqbox-capture-{uuid.uuid4().hex[:12]}#ephemeral"
        self._threads: list[ChannelTapThread] = []
        try:
            for node, address in enumerate(ops.addresses.nsqd_tcp):
                self._threads.append(ChannelTapThread(address, topic, self.channel, node, timeout))
        except BaseException:
            self._stop()
            raise

    def messages(self) -> list[CapturedMessage]:
        """What was received so far, by publish time."""
        out = [
            CapturedMessage(m.body, m.id.decode("ascii"), m.timestamp, t.node, None)
            for t in self._threads
            for m in t.snapshot()
        ]
        if len(self._threads) > 1:
            out.sort(key=lambda m: m.timestamp)
        return out

    def _pending(self) -> int:
        """Messages our channels got (per nsqd's stats) but the threads have not seen yet."""
        pending = 0
        for thread in self._threads:
            channel = self.ops.node_stats(thread.node).channel(self.topic, self.channel)
            if channel is not None:
                pending += max(0, channel.message_count - channel.deferred - thread.count)
        return pending

    def close(self) -> list[CapturedMessage]:
        """Wait (bounded) for every message our channels got that is not deferred; stop."""
        deadline = time.monotonic() + self.timeout
        try:
            delay = 0.001
            while self._pending() and time.monotonic() < deadline:
                time.sleep(delay)
                delay = min(delay * 2, 0.02)
        finally:
            self._stop()
        errors = [t.error for t in self._threads if t.error is not None]
        if errors:
            raise RuntimeError(f"capture of topic {self.topic!r} failed: {errors[0]}")
        return self.messages()

    def _stop(self) -> None:
        for thread in self._threads:
            thread.stop()
