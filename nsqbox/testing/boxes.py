"""The session-level boxes: in a thread of this process, or someone else's servers.

A box owns (or points at) a cluster and offers the few operations the per-test
handle builds on. :class:`ThreadBox` reaches its servers' objects directly (on their
loop); :class:`NoProcBox` (and the subprocess box) only through TCP and HTTP.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Collection
from typing import Any, Protocol, TypeVar

from .config import AddressView, BoxAddresses, BoxStartError, Cleanup, ClusterSpec, Mode, SpecError
from .state import BoxStats, CapturedMessage, CaptureSource

T = TypeVar("T")

__all__ = [
    "Box",
    "CaptureSource",
    "NoProcBox",
    "TapCapture",
    "ThreadBox",
    "start_box",
    "xdist_worker",
]


#: Why a noproc box cannot stop or start nodes.
NOT_OURS = (
    "nsqbox: noproc mode uses servers someone else runs, so it cannot stop or start them; "
    "use nsqbox_factory (thread or subprocess mode) for restart tests"
)


def xdist_worker() -> str:
    """This pytest-xdist worker's id (``gw0``...), or ``""`` outside xdist."""
    return os.environ.get("PYTEST_XDIST_WORKER", "")


class Box(Protocol):
    """What the per-test handle needs from a box."""

    mode: Mode
    addresses: BoxAddresses

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel (of one nsqd, or summed over all)."""
        ...

    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> None:
        """Publish ``bodies`` to ``topic`` on nsqd number ``node``."""
        ...

    def open_capture(self, topic: str, timeout: float, mode: str = "tap") -> CaptureSource:
        """Start capturing what is published to ``topic`` (``mode``: "tap" or "channel")."""
        ...

    def begin_test(self) -> object:
        """Note what exists before a test (handed back to :meth:`end_test`)."""
        ...

    def end_test(
        self, mark: object, cleanup: Cleanup, owned: Collection[str], namespace: str
    ) -> None:
        """Clean up after a test; ``owned`` are topics the test's handle named or published."""
        ...

    def stop(self) -> None:
        """Stop the servers the box runs (nothing for noproc)."""
        ...

    def stop_nsqd(self, node: int) -> None:
        """Shut nsqd ``node`` down cleanly (its messages persist)."""
        ...

    def start_nsqd(self, node: int) -> None:
        """Start a stopped nsqd again: same ports, same data path; registered on return."""
        ...

    def crash_nsqd(self, node: int) -> None:
        """Stop nsqd ``node`` as a SIGKILL would (what is on disk survives)."""
        ...


class TapCapture:
    """Capture by tapping the topic inside the server: every publish, nothing consumed.

    ``run(fn)`` runs ``fn()`` on the cluster's loop (``LoopThread.call``, or a plain
    call in a trio-native box).
    """

    mode = "tap"
    #: Never: the tap records in this process as the node publishes, and follows the
    #: node through restarts and crashes (ClusterOps attaches it to the new nsqd).
    lost = False

    def __init__(self, run: Callable[[Callable[[], Any]], Any], ops: Any, topic: str) -> None:
        self._run = run
        self._ops = ops
        self._tap = run(lambda: ops.open_tap(topic))

    def messages(self) -> list[CapturedMessage]:
        """What was captured so far."""
        result: list[CapturedMessage] = self._run(lambda: self._ops.read_tap(self._tap))
        return result

    def close(self) -> list[CapturedMessage]:
        """Remove the tap; everything captured."""
        result: list[CapturedMessage] = self._run(lambda: self._ops.close_tap(self._tap))
        return result


class ThreadBox(AddressView):
    """nsqd(s) and nsqlookupd(s) on their own trio loop in a daemon thread of this process."""

    mode = Mode.THREAD

    def __init__(self, spec: ClusterSpec, data_root: str, *, start_timeout: float = 10.0) -> None:
        """Start the cluster (bound and registered when this returns)."""
        from .portal import LoopThread  # the server stack loads only when a box starts

        self.spec = spec
        self.data_root = data_root
        self._loop: LoopThread[Any] = LoopThread("nsqbox")
        try:
            self.cluster, self.ops = self._loop.start(
                _serve, spec, data_root, timeout=start_timeout
            )
        except (OSError, TimeoutError) as exc:  # a port in use, a data path not writable...
            raise BoxStartError(f"the servers did not start: {exc}") from exc
        self.addresses: BoxAddresses = self.cluster.addresses

    def call(self, fn: Callable[[], T]) -> T:
        """Run ``fn()`` on the servers' loop (the safe way to touch server objects)."""
        return self._loop.call(fn)

    def call_async(self, fn: Callable[[], Awaitable[T]]) -> T:
        """Run ``await fn()`` on the servers' loop; its result."""
        return self._loop.call_async(fn)

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel (of one nsqd, or summed over all)."""
        stats: BoxStats = self._loop.call(lambda: self.ops.stats(node))
        return stats

    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> None:
        """Publish on the server; when that created the topic, wait for its registration."""
        ops = self.ops

        async def publish() -> None:
            if ops.publish(topic, bodies, defer_ms, node) and ops.lookupds:
                await ops.settle()

        self._loop.call_async(publish)

    def open_capture(self, topic: str, timeout: float, mode: str = "tap") -> CaptureSource:
        """Tap ``topic`` inside the server(s) (or subscribe a channel: ``mode="channel"``)."""
        if mode != "tap":
            from .remote import RemoteOps

            return RemoteOps(self.addresses, timeout).open_capture(topic, timeout, mode)
        return TapCapture(self._loop.call, self.ops, topic)

    def begin_test(self) -> object:
        """Nothing to note: everything on this box belongs to the tests."""
        return None

    def end_test(
        self, mark: object, cleanup: Cleanup, owned: Collection[str], namespace: str
    ) -> None:
        """Start stopped nsqds; delete or empty every topic; forget them in nsqlookupd."""
        self._loop.call_async(lambda: self.ops.reset(cleanup))

    def stop(self) -> None:
        """Shut the servers down and join the thread."""
        self._loop.stop()

    def stop_nsqd(self, node: int) -> None:
        """Shut nsqd ``node`` down cleanly (its messages persist)."""
        self._loop.call_async(lambda: self.ops.stop_nsqd(node))

    def start_nsqd(self, node: int) -> None:
        """Start a stopped nsqd again: same ports, same data path; registered on return."""
        self._loop.call_async(lambda: self.ops.start_nsqd(node))

    def crash_nsqd(self, node: int) -> None:
        """Stop nsqd ``node`` as a SIGKILL would (what is on disk survives)."""
        self._loop.call_async(lambda: self.ops.crash_nsqd(node))

    def __repr__(self) -> str:
        return f"ThreadBox(nsqd={list(self.addresses.nsqd_tcp)})"


async def _serve(spec: ClusterSpec, data_root: str, *, task_status: Any) -> None:
    """serve_cluster, reporting the cluster and its ClusterOps (built on the loop)."""
    from .cluster import serve_cluster
    from .server_ops import ClusterOps

    class WithOps:
        def started(self, cluster: Any = None) -> None:
            task_status.started((cluster, ClusterOps(cluster)))

    # No nursery of our own: a start-up error reaches start() as itself, not in a group.
    await serve_cluster(spec, data_root, task_status=WithOps())


class NoProcBox(AddressView):
    """Servers someone else runs; only their TCP and HTTP APIs are used.

    Cleanup touches only topics that appeared during the test. Under pytest-xdist,
    where other workers use the same servers at the same time, it narrows that to the
    topics the test's handle named (``nsqbox.name()``) or published to.
    """

    mode = Mode.NOPROC

    def __init__(self, addresses: BoxAddresses, *, timeout: float = 10.0) -> None:
        """Point at ``addresses``; NSQHTTPError when a server does not answer ``/ping``."""
        from .remote import RemoteOps

        self.addresses = addresses
        self.ops = RemoteOps(addresses, timeout)
        self.ops.ping()

    def stats(self, node: int | None = None) -> BoxStats:
        """Every topic and channel, from ``/stats``."""
        return self.ops.stats(node)

    def publish(self, topic: str, bodies: list[bytes], defer_ms: int = 0, node: int = 0) -> None:
        """Publish over HTTP."""
        self.ops.publish(topic, bodies, defer_ms, node)

    def open_capture(self, topic: str, timeout: float, mode: str = "tap") -> CaptureSource:
        """Tap through nsqbox's ``/nsqbox/tap`` route; CaptureUnavailable on real nsqd
        unless ``mode="channel"`` (an ephemeral channel)."""
        return self.ops.open_capture(topic, timeout, mode)

    def begin_test(self) -> object:
        """The topics that exist before the test."""
        return self.ops.topics()

    def end_test(
        self, mark: object, cleanup: Cleanup, owned: Collection[str], namespace: str
    ) -> None:
        """Delete (or empty) the topics the test created."""
        if cleanup is Cleanup.NONE:
            return
        before = mark if isinstance(mark, set) else set()
        created = self.ops.topics() - before
        if xdist_worker():
            created = {t for t in created if t in owned or namespace in t}
        if created:
            self.ops.reset(cleanup, created)

    def stop(self) -> None:
        """Nothing: the servers are not ours."""

    def stop_nsqd(self, node: int) -> None:
        """Refused: the servers are not ours."""
        raise NotImplementedError(NOT_OURS)

    def start_nsqd(self, node: int) -> None:
        """Refused: the servers are not ours."""
        raise NotImplementedError(NOT_OURS)

    def crash_nsqd(self, node: int) -> None:
        """Refused: the servers are not ours."""
        raise NotImplementedError(NOT_OURS)

    def __repr__(self) -> str:
        return f"NoProcBox(nsqd={list(self.addresses.nsqd_tcp)})"


def start_box(
    spec: ClusterSpec,
    data_root: str,
    *,
    mode: Mode = Mode.THREAD,
    python: str = "",
    start_timeout: float = 10.0,
    timeout: float = 10.0,
) -> Box:
    """Start ``spec``'s servers in a thread of this process or as child processes."""
    if mode is Mode.SUBPROCESS:
        import sys

        from .subprocess_box import SubprocessBox

        return SubprocessBox(
            spec,
            data_root,
            python=python or sys.executable,
            start_timeout=start_timeout,
            timeout=timeout,
        )
    if mode is Mode.NOPROC:
        raise SpecError("noproc boxes are not started: use NoProcBox(addresses)")
    return ThreadBox(spec, data_root, start_timeout=start_timeout)
