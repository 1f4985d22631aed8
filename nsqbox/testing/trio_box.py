"""Trio-native boxes: the servers run in the test's own nursery, on the test's own loop.

For pytest-trio users (``nsqbox_trio`` and ``nsqbox_trio_factory``). Everything is on one
thread, so the handle reads server state directly; waits are ``await``-ed and poll on
the loop; ``consume`` runs a blocking consumer in a worker thread while the servers
keep serving.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import trio

from ..lookupd.core import NSQLookupd
from ..nsqd.domain.nsqd import NSQD
from .boxes import TapCapture
from .clock import TrioClock
from .cluster import RunningCluster, serve_cluster
from .config import Address, ClusterSpec
from .consumer import consume_bodies
from .discovery import all_listed, producers_message
from .faults_trio import TrioFaults
from .handle import Bodies, BoxView, new_namespace, normalize_bodies
from .server_ops import ClusterOps
from .snapshot import TrioSnapshotAccess
from .state import BoxStats, ChannelState, Expectation, TopicState, WaitTimeout
from .tap import Capture

__all__ = ["TrioBoxFactory", "TrioNSQBox", "open_trio_box"]


async def poll_on_loop(check: Callable[[], bool], limit: float) -> bool:
    """Call ``check`` between short sleeps until it holds (True) or ``limit`` seconds pass."""
    delay = 0.0005
    with trio.move_on_after(limit):
        while not check():
            await trio.sleep(delay)
            delay = min(delay * 2, 0.02)
        return True
    return False


class TrioNSQBox(TrioSnapshotAccess, BoxView):
    """A cluster started in a trio nursery, and the test's handle on it.

    It lives as long as the nursery (pytest-trio's ``nursery`` fixture: the test), with
    its data in a temporary directory, so there is nothing to clean up between tests.
    """

    def __init__(
        self,
        cluster: RunningCluster,
        *,
        timeout: float = 10.0,
        scope: trio.CancelScope | None = None,
        stopped: trio.Event | None = None,
    ) -> None:
        self.cluster = cluster
        self.ops = ClusterOps(cluster)
        self.addresses = cluster.addresses
        self.timeout = timeout
        self.namespace = new_namespace()
        self._scope = scope
        self._stopped = stopped
        self._faults = TrioFaults(self.ops)
        #: The box's broker time (docs/testing.md, "Testing time"); ``advance`` is awaited.
        self.clock = TrioClock(lambda: cluster.clock)

    async def aclose(self) -> None:
        """Stop the servers (they persist their data) and wait until they have."""
        if self._scope is not None and self._stopped is not None:
            self._scope.cancel()
            await self._stopped.wait()

    @property
    def faults(self) -> TrioFaults:
        """Make the servers misbehave on purpose (docs/testing.md, "Testing under faults")."""
        return self._faults

    @property
    def nsqds(self) -> list[NSQD]:
        """The live NSQD containers, for white-box assertions (new ones after a restart)."""
        return self.ops.nsqds

    @property
    def lookupds(self) -> list[NSQLookupd]:
        """The live nsqlookupd states."""
        return self.ops.lookupds

    def __repr__(self) -> str:
        return f"TrioNSQBox(nsqd={self.nsqd_tcp_address})"

    async def publish(
        self, topic: str, bodies: Bodies, *, defer_ms: int = 0, node: int = 0
    ) -> None:
        """Publish one body or several; returns once nsqlookupd knows a new topic."""
        if self.ops.publish(topic, normalize_bodies(bodies), defer_ms, node) and self.ops.lookupds:
            await self.ops.settle()

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel now (one nsqd's, or summed over all)."""
        return self.ops.stats(node)

    async def wait_for(
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
        timeout: float | None = None,  # noqa: ASYNC109 (see NSQBox.await_for)
        node: int | None = None,
    ) -> TopicState | ChannelState:
        """Like :meth:`NSQBox.wait_for <nsqbox.testing.NSQBox.wait_for>`, awaited."""

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
        expect: Expectation = self.expectation(topic, channel, counts)
        limit = self.timeout if timeout is None else timeout
        if not await poll_on_loop(lambda: expect.met(self.stats(node)), limit):
            raise WaitTimeout(expect.timeout_message(limit, self.stats(node)))
        state = expect.state(self.stats(node))
        assert state is not None
        return state

    async def wait_until(
        self,
        predicate: Callable[[BoxStats], bool],
        what: str = "a condition",
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see NSQBox.await_for)
        node: int | None = None,
    ) -> BoxStats:
        """Wait until ``predicate(stats)`` holds; the stats that satisfied it."""

        __tracebackhide__ = True  # failures point at the test's line
        limit = self.timeout if timeout is None else timeout
        if not await poll_on_loop(lambda: predicate(self.stats(node)), limit):
            raise WaitTimeout(f"nsqbox: timed out after {limit:g}s waiting for {what}")
        return self.stats(node)

    async def consume(
        self,
        topic: str,
        channel: str,
        n: int = 1,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see NSQBox.await_for)
        node: int = 0,
    ) -> list[bytes]:
        """Take ``n`` messages from ``channel`` (a real consumer, in a worker thread).

        As :meth:`NSQBox.consume <nsqbox.testing.NSQBox.consume>`: ``timeout`` counts
        from SUB's OK, subscribing has the handle's timeout of its own.
        """

        __tracebackhide__ = True  # failures point at the test's line
        limit = self.timeout if timeout is None else timeout
        address = self.addresses.nsqd_tcp[node]
        return await trio.to_thread.run_sync(
            lambda: consume_bodies(address, topic, channel, n, limit, self.timeout),
            abandon_on_cancel=True,
        )

    async def wait_for_producers(
        self,
        topic: str,
        nodes: int | None = None,
        *,
        timeout: float | None = None,  # noqa: ASYNC109 (see NSQBox.await_for)
    ) -> list[Address]:
        """Like :meth:`NSQBox.wait_for_producers <nsqbox.testing.NSQBox.wait_for_producers>`."""

        __tracebackhide__ = True  # failures point at the test's line
        if not self.ops.lookupds:
            raise RuntimeError("nsqbox: this box has no nsqlookupd to wait for")
        if nodes is None:
            held = sum(topic in n.topics for _, n in self.cluster.running())
            nodes = max(1, held)

        def listed(lookupd: NSQLookupd) -> list[Address]:
            found = lookupd.lookup(topic)
            producers = found[1] if found is not None else []
            return sorted(Address.of(p.broadcast_address, p.tcp_port) for p in producers)

        limit = self.timeout if timeout is None else timeout
        wanted = nodes
        if not await poll_on_loop(lambda: all_listed(self.ops.lookupds, wanted, listed)[0], limit):
            seen = all_listed(self.ops.lookupds, wanted, listed)[1]
            raise WaitTimeout(producers_message(topic, wanted, limit)(seen))
        return listed(self.ops.lookupds[-1])

    async def stop_nsqd(self, node: int = 0) -> None:
        """Shut nsqd ``node`` down cleanly (see :meth:`NSQBox.stop_nsqd`)."""
        await self.ops.stop_nsqd(node)

    async def start_nsqd(self, node: int = 0) -> None:
        """Start a stopped nsqd again: same ports and data path; registered on return."""
        await self.ops.start_nsqd(node)

    async def restart_nsqd(self, node: int = 0) -> None:
        """:meth:`stop_nsqd` then :meth:`start_nsqd`."""
        await self.stop_nsqd(node)
        await self.start_nsqd(node)

    def capture(self, topic: str) -> Capture:
        """Record every message published to ``topic`` while the ``with`` block runs."""
        ops = self.ops
        return Capture(
            topic,
            lambda: TapCapture(lambda fn: fn(), ops, topic),
            self.timeout,
            poll_in_loop=poll_on_loop,
        )


async def open_trio_box(
    nursery: trio.Nursery,
    spec: ClusterSpec,
    data_root: str,
    *,
    wait_timeout: float = 10.0,
    start_timeout: float = 10.0,
) -> TrioNSQBox:
    """Start ``spec``'s servers in ``nursery``; the handle once they are up and registered.

    ``wait_timeout`` is the handle's default for its waits. The servers stop when the
    nursery is cancelled, or earlier with :meth:`TrioNSQBox.aclose`.
    """
    with trio.fail_after(start_timeout):
        cluster, scope, stopped = await nursery.start(_serve_stoppable, spec, data_root)
    return TrioNSQBox(cluster, timeout=wait_timeout, scope=scope, stopped=stopped)


async def _serve_stoppable(
    spec: ClusterSpec,
    data_root: str,
    *,
    task_status: trio.TaskStatus[tuple[RunningCluster, trio.CancelScope, trio.Event]],
) -> None:
    """serve_cluster in a cancel scope of its own, reporting the scope and a stopped event."""
    scope = trio.CancelScope()
    stopped = trio.Event()

    class Started:
        def started(self, cluster: RunningCluster) -> None:
            task_status.started((cluster, scope, stopped))

    try:
        with scope:
            # no nursery of our own: a start-up error reaches the caller as itself
            await serve_cluster(spec, data_root, task_status=Started())  # type: ignore[arg-type]
    finally:
        stopped.set()


class TrioBoxFactory(Protocol):
    """The ``nsqbox_trio_factory`` fixture's signature."""

    def __call__(
        self,
        *,
        nsqd: int = 1,
        lookupd: int = 1,
        nsqd_args: str | Sequence[str] = (),
        lookupd_args: str | Sequence[str] = (),
        clock: str = "real",
        **nsqd_options: Any,
    ) -> Awaitable[TrioNSQBox]:
        """Start a box in the test's nursery; its handle."""
        ...
