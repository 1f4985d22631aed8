"""The per-test handle: addresses, publish, stats, wait_for, capture, consume, snapshots.

:class:`NSQBox` is what the ``nsqbox`` fixture gives a test. Its methods block; each one that
waits has an async twin (``await_for``, ``aconsume``...) for asyncio and trio tests, which runs
the wait in a worker thread so the test's own loop (and the app under test on it) keeps running.
"""

from __future__ import annotations

import itertools
import secrets
from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Protocol

from ..wire.names import EPHEMERAL_SUFFIX, is_valid_topic_name
from .boxes import Box, xdist_worker
from .clock import ClockAccess
from .config import Address, AddressView, BoxAddresses, Cleanup, Mode, SeedPath
from .faults_http import Faults, faults_for
from .snapshot import SnapshotAccess
from .state import BoxStats, ChannelState, Expectation, TopicState, WaitTimeout
from .tap import Capture
from .waiting import Sleep, in_worker_thread, poll, refuse_in_async

Bodies = bytes | str | Iterable[bytes | str]

__all__ = ["BoxView", "Capture", "NSQBox", "NSQBoxFactory", "WaitTimeout"]

_SESSION_TOKEN = secrets.token_hex(2)
_NAMESPACES = itertools.count(1)


def new_namespace() -> str:
    """A namespace unique to one test: worker id, session token, sequence number."""
    worker, n = xdist_worker(), next(_NAMESPACES)
    return f"{worker}-{_SESSION_TOKEN}-{n}" if worker else f"{_SESSION_TOKEN}-{n}"


def normalize_bodies(bodies: Bodies) -> list[bytes]:
    """One body or several, as a list of bytes (str is UTF-8 encoded)."""
    items: Iterable[bytes | str] = [bodies] if isinstance(bodies, bytes | str) else bodies
    out = [b.encode() if isinstance(b, str) else bytes(b) for b in items]
    if not out:
        raise ValueError("nothing to publish")
    if not all(out):
        raise ValueError("nsqd refuses empty message bodies (E_BAD_MESSAGE)")
    return out


class BoxView(AddressView):
    """Addresses and names: what every handle (threaded, remote or trio-native) offers."""

    addresses: BoxAddresses
    namespace: str
    timeout: float

    # -- names -----------------------------------------------------------------------
    def name(self, base: str) -> str:
        """``base`` made unique to this test (the same for every call in the test).

        ``name("orders")`` is ``"orders.<ns>"``; ``#ephemeral`` stays at the end. Use
        it when tests share servers (noproc mode, especially under pytest-xdist).
        """
        stem, ephemeral, _ = base.partition(EPHEMERAL_SUFFIX)
        name = f"{stem}.{self.namespace}{ephemeral}"
        if not is_valid_topic_name(name):
            raise ValueError(f"{name!r} is not a valid topic or channel name (max 64 characters)")
        self._named(name)
        return name

    def _named(self, name: str) -> None:
        """A hook: the handle remembers the names it handed out."""

    @staticmethod
    def expectation(topic: str, channel: str | None, counts: dict[str, int | None]) -> Expectation:
        """An Expectation for the counts that were given."""
        return Expectation(topic, channel, {k: v for k, v in counts.items() if v is not None})


class NSQBox(ClockAccess, SnapshotAccess, BoxView):
    """A test's handle on a box (the ``nsqbox`` fixture).

    It cleans up after the test (see the ``nsqbox_cleanup`` option) when closed.
    """

    def __init__(
        self,
        box: Box,
        *,
        timeout: float = 10.0,
        cleanup: Cleanup = Cleanup.DELETE,
        namespace: str | None = None,
    ) -> None:
        self.box = box
        self.addresses = box.addresses
        self.timeout = timeout
        self.cleanup = cleanup
        self.namespace = namespace or new_namespace()
        self._owned: set[str] = set()
        self._captures: list[Capture] = []
        self._mark = box.begin_test()
        self._closed = False
        self._faults: Faults | None = None

    @property
    def mode(self) -> Mode:
        """Where the servers run (thread, subprocess or noproc)."""
        return self.box.mode

    @property
    def faults(self) -> Faults:
        """Make the servers misbehave on purpose (docs/testing.md, "Testing under faults")."""
        if self._faults is None:
            self._faults = faults_for(self.box, self.mode.value)
        return self._faults

    def _named(self, name: str) -> None:
        self._owned.add(name)

    def close(self) -> None:
        """End open captures, lift faults and clean up (idempotent)."""
        if self._closed:
            return
        self._closed = True
        for capture in self._captures:
            capture.stop()
        try:
            self.box.end_test(self._mark, self.cleanup, self._owned, self.namespace)
        finally:
            # after end_test: it starts stopped nsqds again
            if self._faults is not None and self._faults.supported:
                self._faults.lift_all()

    def __enter__(self) -> NSQBox:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NSQBox({self.mode.value}, nsqd={self.nsqd_tcp_address})"

    # -- publish and stats ---------------------------------------------------------
    def publish(self, topic: str, bodies: Bodies, *, defer_ms: int = 0, node: int = 0) -> None:
        """Publish one body or several (MPUB) to ``topic``; ``defer_ms`` makes it a DPUB.

        Returns once nsqd has the messages; when this created the topic, also once
        nsqlookupd knows it (in-process boxes), so discovery finds it at once.
        """
        __tracebackhide__ = True  # failures point at the test's line
        self._owned.add(topic)
        self.box.publish(topic, normalize_bodies(bodies), defer_ms, node)

    async def apublish(
        self, topic: str, bodies: Bodies, *, defer_ms: int = 0, node: int = 0
    ) -> None:
        """:meth:`publish` from async code."""
        await in_worker_thread(lambda: self.publish(topic, bodies, defer_ms=defer_ms, node=node))

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel now (one nsqd's, or summed over all)."""
        return self.box.stats(node)

    async def astats(self, node: int | None = None) -> BoxStats:
        """:meth:`stats` from async code."""
        return await in_worker_thread(lambda: self.stats(node))

    # -- waiting -------------------------------------------------------------------
    def wait_for(
        self,
        topic: str,
        channel: str | None = None,
        *,
        depth: int | None = None,
        in_flight: int | None = None,
        deferred: int | None = None,
        message_count: int | None = None,
        requeue_count: int | None = None,
        timeout_count: int | None = None,
        clients: int | None = None,
        timeout: float | None = None,
        node: int | None = None,
        sleep: Sleep | None = None,
    ) -> TopicState | ChannelState:
        """Wait until the topic (or its channel) exists with every given count; its state.

        ``wait_for("orders", "billing", clients=1)`` waits for a consumer to
        subscribe, ``wait_for("orders", "billing", depth=0, in_flight=0)`` for it to
        finish. Raises :class:`WaitTimeout` (an AssertionError saying what it last
        saw) after ``timeout`` seconds (the ``nsqbox_timeout`` option by default).
        ``sleep`` is called between polls (``gevent.sleep`` keeps gevent running).
        """
        __tracebackhide__ = True  # failures point at the test's line
        if sleep is None:
            refuse_in_async("wait_for", "nsqbox.await_for")
        counts = {
            "depth": depth,
            "in_flight": in_flight,
            "deferred": deferred,
            "message_count": message_count,
            "requeue_count": requeue_count,
            "timeout_count": timeout_count,
            "clients": clients,
        }
        return self._wait(self.expectation(topic, channel, counts), timeout, node, sleep)

    async def await_for(
        self,
        topic: str,
        channel: str | None = None,
        *,
        depth: int | None = None,
        in_flight: int | None = None,
        deferred: int | None = None,
        message_count: int | None = None,
        requeue_count: int | None = None,
        timeout_count: int | None = None,
        clients: int | None = None,
        # The same keyword as the blocking twin: on timeout the error says what was last
        # seen, which a caller's cancel scope could not.
        timeout: float | None = None,  # noqa: ASYNC109
        node: int | None = None,
    ) -> TopicState | ChannelState:
        """:meth:`wait_for` from async code (asyncio or trio)."""

        __tracebackhide__ = True  # failures point at the test's line
        counts = {
            "depth": depth,
            "in_flight": in_flight,
            "deferred": deferred,
            "message_count": message_count,
            "requeue_count": requeue_count,
            "timeout_count": timeout_count,
            "clients": clients,
        }
        expectation = self.expectation(topic, channel, counts)
        return await in_worker_thread(lambda: self._wait(expectation, timeout, node, None))

    def _wait(
        self, expect: Expectation, timeout: float | None, node: int | None, sleep: Sleep | None
    ) -> TopicState | ChannelState:

        __tracebackhide__ = True  # failures point at the test's line
        limit = self.timeout if timeout is None else timeout
        stats = poll(
            lambda: (expect.met(s := self.stats(node)), s),
            limit,
            lambda s: expect.timeout_message(limit, s),
            sleep,
        )
        state = expect.state(stats)
        assert state is not None
        return state

    def wait_until(
        self,
        predicate: Callable[[BoxStats], bool],
        what: str = "a condition",
        *,
        timeout: float | None = None,
        node: int | None = None,
        sleep: Sleep | None = None,
    ) -> BoxStats:
        """Wait until ``predicate(stats)`` holds; the stats that satisfied it."""

        __tracebackhide__ = True  # failures point at the test's line
        if sleep is None:
            refuse_in_async("wait_until", "nsqbox.await_until")
        return self._until(predicate, what, timeout, node, sleep)

    async def await_until(
        self,
        predicate: Callable[[BoxStats], bool],
        what: str = "a condition",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see await_for)
        node: int | None = None,
    ) -> BoxStats:
        """:meth:`wait_until` from async code."""

        __tracebackhide__ = True  # failures point at the test's line
        return await in_worker_thread(lambda: self._until(predicate, what, timeout, node, None))

    def _until(
        self,
        predicate: Callable[[BoxStats], bool],
        what: str,
        timeout: float | None,
        node: int | None,
        sleep: Sleep | None,
    ) -> BoxStats:

        __tracebackhide__ = True  # failures point at the test's line
        limit = self.timeout if timeout is None else timeout
        return poll(
            lambda: (predicate(s := self.stats(node)), s),
            limit,
            lambda s: (
                f"nsqbox: timed out after {limit:g}s waiting for {what}; topics: {_summary(s)}"
            ),
            sleep,
        )

    # -- discovery and nodes --------------------------------------------------------
    def wait_for_producers(
        self,
        topic: str,
        nodes: int | None = None,
        *,
        timeout: float | None = None,
        sleep: Sleep | None = None,
    ) -> list[Address]:
        """Wait until every nsqlookupd lists ``nodes`` producers of ``topic``; their addresses.

        ``nodes`` defaults to the nsqds of the box that have the topic now (at least
        one). Call it after the app created a topic on an nsqd itself and before a
        consumer that discovers through nsqlookupd starts, so it finds every node.
        """
        __tracebackhide__ = True  # failures point at the test's line
        if sleep is None:
            refuse_in_async("wait_for_producers", "nsqbox.await_for_producers")
        return self._producers(topic, nodes, timeout, sleep)

    async def await_for_producers(
        self,
        topic: str,
        nodes: int | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see await_for)
    ) -> list[Address]:
        """:meth:`wait_for_producers` from async code."""

        __tracebackhide__ = True  # failures point at the test's line
        return await in_worker_thread(lambda: self._producers(topic, nodes, timeout, None))

    def _producers(
        self, topic: str, nodes: int | None, timeout: float | None, sleep: Sleep | None
    ) -> list[Address]:

        __tracebackhide__ = True  # failures point at the test's line
        from .discovery import all_listed, lookup_producers, producers_message

        if not self.addresses.lookupd_http:
            raise RuntimeError("nsqbox: this box has no nsqlookupd to wait for")
        if nodes is None:
            count = len(self.addresses.nsqd_tcp)
            nodes = max(1, sum(topic in self.stats(i).topics for i in range(count)))
        limit = self.timeout if timeout is None else timeout
        lookupds = self.addresses.lookupd_http
        seen = poll(
            lambda: all_listed(lookupds, nodes, lambda lk: lookup_producers(lk, topic)),
            limit,
            producers_message(topic, nodes, limit),
            sleep,
        )
        return seen[str(lookupds[-1])]

    def stop_nsqd(self, node: int = 0) -> None:
        """Shut nsqd ``node`` down cleanly, as SIGTERM would (its messages persist).

        Its clients are disconnected and nsqlookupd drops it. It stays down until
        :meth:`start_nsqd` or the end of the test (the next test gets it back).
        """
        self.box.stop_nsqd(node)

    def start_nsqd(self, node: int = 0) -> None:
        """Start a stopped nsqd again: the same ports and data path (what it persisted).

        Returns once it listens and is registered with every nsqlookupd.
        """
        self.box.start_nsqd(node)

    def restart_nsqd(self, node: int = 0) -> None:
        """:meth:`stop_nsqd` then :meth:`start_nsqd`: a clean restart of one node."""
        self.stop_nsqd(node)
        self.start_nsqd(node)

    # -- consume and capture -------------------------------------------------------
    def consume(
        self,
        topic: str,
        channel: str,
        n: int = 1,
        *,
        timeout: float | None = None,
        node: int = 0,
        sleep: Sleep | None = None,
    ) -> list[bytes]:
        """Subscribe to ``channel``, take ``n`` messages (finishing them); their bodies.

        ``timeout`` (the handle's by default) counts from SUB's OK: connecting and
        subscribing have the handle's timeout of their own, so ``n=0`` or a tiny
        ``timeout`` still creates the channel. Raises :class:`WaitTimeout` (listing what
        did arrive) when fewer arrive within ``timeout`` seconds, or SUB is not acknowledged.
        """
        __tracebackhide__ = True  # failures point at the test's line
        if sleep is None:
            refuse_in_async("consume", "nsqbox.aconsume")
        return self._consume(topic, channel, n, timeout, node, sleep)

    async def aconsume(
        self,
        topic: str,
        channel: str,
        n: int = 1,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see await_for)
        node: int = 0,
    ) -> list[bytes]:
        """:meth:`consume` from async code."""
        __tracebackhide__ = True  # failures point at the test's line
        return await in_worker_thread(lambda: self._consume(topic, channel, n, timeout, node, None))

    def _consume(
        self,
        topic: str,
        channel: str,
        count: int,
        timeout: float | None,
        node: int,
        sleep: Sleep | None,
    ) -> list[bytes]:
        __tracebackhide__ = True  # failures point at the test's line
        self._owned.add(topic)
        limit = self.timeout if timeout is None else timeout
        address = self.addresses.nsqd_tcp[node]
        from .consumer import consume_bodies

        return consume_bodies(address, topic, channel, count, limit, self.timeout, sleep)

    def capture(self, topic: str, *, mode: str = "tap") -> Capture:
        """Record every message published to ``topic`` while the ``with`` block runs.

        What the app's consumers see does not change: the capture taps the topic
        inside nsqd (in-process, or through nsqbox's ``/nsqbox/tap`` HTTP route), sees
        DPUBs when they are published and creates nothing. Real nsqd (noproc mode)
        has no tap: there it raises CaptureUnavailable unless ``mode="channel"``,
        which subscribes an ephemeral channel instead (see docs/testing.md).
        """
        self._owned.add(topic)
        capture = Capture(
            topic, lambda: self.box.open_capture(topic, self.timeout, mode), self.timeout
        )
        self._captures.append(capture)
        return capture


def _summary(stats: BoxStats) -> str:
    parts = []
    for t in stats.topics.values():
        channels = ", ".join(
            f"{c.name}(depth={c.depth}, in_flight={c.in_flight}, clients={c.clients})"
            for c in t.channels.values()
        )
        parts.append(f"{t.name}(depth={t.depth}, messages={t.message_count}; {channels})")
    return "; ".join(parts) or "none"


class NSQBoxFactory(Protocol):
    """The ``nsqbox_factory`` fixture's signature."""

    def __call__(
        self,
        *,
        nsqd: int = 1,
        lookupd: int = 1,
        nsqd_args: str | Sequence[str] = (),
        lookupd_args: str | Sequence[str] = (),
        mode: Mode | str | None = None,
        clock: str = "real",
        seed: SeedPath | None = None,
        **nsqd_options: Any,
    ) -> NSQBox:
        """Start a box (stopped after the test; ``clock="manual"``: time moves on demand)."""
