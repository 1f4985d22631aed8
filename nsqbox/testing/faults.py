"""The test handle's faults: ``nsqbox.faults`` (docs/testing.md, "Testing under faults").

Each call reaches the nsqd's own :class:`~nsqbox.nsqd.faults.NodeFaults` on the
servers' loop: in thread mode through the box's loop thread, in trio mode
directly (the test runs on that loop). Subprocess and noproc modes go through
each nsqd's ``/nsqbox/faults`` HTTP routes (:class:`~.http_faults.HTTPFaults`);
against a real nsqd, which has none, every call raises :class:`FaultsUnsupported`.
Lasting faults return an :class:`ActiveFault`, which lifts them as a context
manager's exit or by :meth:`ActiveFault.lift`; the handle lifts whatever is left
when the test ends.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from ..nsqd.faults import Fault
    from ..nsqd.nsqd import NSQD

__all__ = ["ActiveFault", "FaultInfo", "Faults", "FaultsUnsupported"]

T = TypeVar("T")
#: Runs a function on the servers' loop and returns its result.
Runner = Callable[[Callable[[], Any]], Any]


class FaultsUnsupported(NotImplementedError):
    """Faults need nsqbox's nsqd (in this process, or with its ``/nsqbox/faults`` routes)."""


@dataclass(frozen=True)
class FaultInfo:
    """One lasting fault as listed by :meth:`Faults.active`."""

    node: int
    id: int
    kind: str
    topic: str | None
    error: str
    #: Publish commands it still fails (None: until lifted or its time ends).
    remaining: int | None
    #: When it began (wall clock, seconds since the epoch).
    since: float


def _info(node: int, fault: Fault) -> FaultInfo:
    return FaultInfo(
        node, fault.id, fault.kind, fault.topic, fault.error, fault.remaining, fault.since
    )


class ActiveFault:
    """A lasting fault in force: lift it, or use it as a context manager."""

    def __init__(self, faults: Faults, info: FaultInfo) -> None:
        self._faults = faults
        self.info = info

    def lift(self) -> bool:
        """End the fault; False when it had already ended (count reached, time up)."""
        return self._faults.lift(self.info)

    def __enter__(self) -> ActiveFault:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.lift()

    def __repr__(self) -> str:
        return f"ActiveFault({self.info.kind}, node={self.info.node}, topic={self.info.topic!r})"


class Faults:
    """Make the box's nsqds misbehave on purpose (``nsqbox.faults``).

    ``run`` executes a function on the servers' loop; ``nodes`` lists the live
    NSQDs (on that loop). Without them (``mode`` names why) every call raises
    :class:`FaultsUnsupported`.
    """

    def __init__(
        self,
        run: Runner | None,
        nodes: Callable[[], list[NSQD]] | None,
        *,
        mode: str = "",
    ) -> None:
        self._run = run
        self._nodes = nodes
        self._mode = mode

    @property
    def supported(self) -> bool:
        """Whether this mode reaches its servers (thread and trio modes do; over HTTP,
        whether the nsqds have the ``/nsqbox/faults`` routes)."""
        return self._run is not None and self._nodes is not None

    def _call(self, fn: Callable[[list[NSQD]], T]) -> T:
        run, nodes = self._run, self._nodes
        if run is None or nodes is None:
            raise FaultsUnsupported(
                f"faults are not supported in {self._mode} mode: they need nsqbox's nsqd "
                "(thread, trio or subprocess mode, or noproc mode against nsqbox's servers)"
            )
        result: T = run(lambda: fn(nodes()))
        return result

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
        """PUB, MPUB and DPUB to ``topic`` (or any) fail: the next ``count`` commands,
        or all for ``duration`` seconds, or all until lifted.

        Clients see ``E_PUB_FAILED PUB failed <error>`` (fatal: nsqd closes the
        connection; ``E_MPUB_FAILED``, ``E_DPUB_FAILED`` likewise) and HTTP
        ``/pub``/``/mpub`` answer ``503 EXITING``, exactly as nsqd answers a failed put.
        """

        def add(nsqds: list[NSQD]) -> FaultInfo:
            faults = nsqds[node].faults
            kwargs = {} if error is None else {"error": error}
            fault = faults.fail_publishes(topic, count=count, duration=duration, **kwargs)
            return _info(node, fault)

        return ActiveFault(self, self._call(add))

    def disk_full(
        self,
        topic: str | None = None,
        *,
        duration: float | None = None,
        error: str | None = None,
        node: int = 0,
    ) -> ActiveFault:
        """The disk is full: publishes fail (as :meth:`fail_publishes`) with ``error``
        (``write: no space left on device`` by default) and ``/ping`` answers
        ``500 NOK - <error>``, until lifted or ``duration`` seconds are up."""

        def add(nsqds: list[NSQD]) -> FaultInfo:
            faults = nsqds[node].faults
            kwargs = {} if error is None else {"error": error}
            return _info(node, faults.disk_full(topic, duration=duration, **kwargs))

        return ActiveFault(self, self._call(add))

    def active(self) -> list[FaultInfo]:
        """Every lasting fault in force, on every node."""

        def listing(nsqds: list[NSQD]) -> list[FaultInfo]:
            return [
                _info(index, fault)
                for index, nsqd in enumerate(nsqds)
                for fault in nsqd.faults.active()
            ]

        return self._call(listing)

    def lift(self, fault: FaultInfo) -> bool:
        """End one fault; False when it had already ended."""
        return self._call(lambda nsqds: nsqds[fault.node].faults.lift(fault.id))

    def lift_all(self) -> int:
        """End every lasting fault on every node; how many there were."""
        return self._call(lambda nsqds: sum(nsqd.faults.lift_all() for nsqd in nsqds))

    # -- one-shot faults -----------------------------------------------------------
    def time_out_in_flight(
        self, topic: str | None = None, channel: str | None = None, *, node: int = 0
    ) -> int:
        """Time out the in-flight messages of ``topic``/``channel`` (all by default)
        now, as msg-timeout would: each is requeued and redelivered with
        attempts + 1. Returns how many there were."""
        return self._call(lambda nsqds: nsqds[node].faults.time_out_in_flight(topic, channel))

    def drop_connections(
        self,
        topic: str | None = None,
        channel: str | None = None,
        *,
        user_agent: str | None = None,
        reset: bool = False,
        node: int = 0,
    ) -> int:
        """Close client connections: all, or those subscribed to ``topic``/``channel``,
        or whose user agent contains ``user_agent``. A clean close, or an RST with
        ``reset=True``. Returns how many were dropped."""
        return self._call(
            lambda nsqds: nsqds[node].faults.drop_connections(
                topic, channel, user_agent=user_agent, reset=reset
            )
        )
