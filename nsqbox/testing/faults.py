"""The test handle's faults: ``nsqbox.faults`` (docs/testing.md, "Testing under faults").

Each call reaches a server's own fault list (nsqd's
:class:`~nsqbox.nsqd.domain.faults.NodeFaults`, nsqlookupd's
:class:`~nsqbox.lookupd.faults.LookupdFaults`) on the servers' loop: in thread
mode through the box's loop thread, in trio mode directly (the test runs on that
loop; :class:`~.faults_trio.TrioFaults`). Subprocess and noproc modes go through
each server's ``/nsqbox/faults`` HTTP routes (:class:`~.faults_http.HTTPFaults`);
against a real nsqd or nsqlookupd, which have none, every call raises
:class:`FaultsUnsupported`. Lasting faults return an :class:`ActiveFault`, which
lifts them as a context manager's exit (``with``, or ``async with`` in async tests)
or by :meth:`ActiveFault.lift`; the handle
lifts whatever is left when the test ends. Restarting and crashing a node go
through the box, which owns the servers (noproc mode does not).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

from ..broker.faults import check_limits

if TYPE_CHECKING:
    from ..broker.faults import FaultList
    from .cluster import RunningCluster

__all__ = ["ActiveFault", "FaultInfo", "Faults", "FaultsUnsupported", "NodeControl"]

T = TypeVar("T")
#: Runs a function on the servers' loop and returns its result.
Runner = Callable[[Callable[[], Any]], Any]
#: A fault's parameters, as the server's method (or route) takes them; None: not given.
Params = dict[str, Any]

NSQD = "nsqd"
LOOKUPD = "lookupd"


class FaultsUnsupported(NotImplementedError):
    """Faults need nsqbox's servers (in this process, or with their ``/nsqbox/faults`` routes)."""


class NodeControl(Protocol):
    """What restarting and crashing need of a box (its nsqds go down and up)."""

    def stop_nsqd(self, node: int) -> None:
        """Shut nsqd ``node`` down cleanly."""
        ...

    def start_nsqd(self, node: int) -> None:
        """Start nsqd ``node`` again (same ports, same data)."""
        ...

    def crash_nsqd(self, node: int) -> None:
        """Stop nsqd ``node`` as a SIGKILL would."""
        ...


@dataclass(frozen=True)
class FaultInfo:
    """One lasting fault as listed by :meth:`Faults.active`."""

    #: Which server of its kind (``server``) holds it: nsqd ``node``, or nsqlookupd.
    node: int
    id: int
    kind: str
    topic: str | None
    error: str
    #: Uses left (publish commands, writes, connections; None: no limit).
    remaining: int | None
    #: When it began (wall clock, seconds since the epoch).
    since: float
    #: ``"nsqd"`` or ``"lookupd"``.
    server: str = NSQD
    channel: str | None = None
    user_agent: str | None = None
    client_id: str | None = None
    #: Latency: seconds per write, plus or minus up to ``jitter``.
    delay: float | None = None
    jitter: float | None = None
    #: When it ends (wall clock, seconds since the epoch; None: when lifted or used up).
    until: float | None = None


def fault_info(server: str, node: int, doc: Mapping[str, Any]) -> FaultInfo:
    """A :class:`FaultInfo` from a fault's document (``Fault.describe()``, or its JSON)."""
    return FaultInfo(
        node,
        int(doc["id"]),
        str(doc["kind"]),
        doc["topic"],
        str(doc["error"]),
        doc["remaining"],
        float(doc["since"]),
        server,
        doc.get("channel"),
        doc.get("user_agent"),
        doc.get("client_id"),
        doc.get("delay"),
        doc.get("jitter"),
        doc.get("until"),
    )


class ActiveFault:
    """A lasting fault in force: lift it, or use it as a context manager (``with`` or
    ``async with``: leaving the block lifts it)."""

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

    async def __aenter__(self) -> ActiveFault:
        """``async with``: the same as ``with``, for async tests (the fault is in
        force already; leaving the block lifts it)."""
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        # Lifting is a quick call (on the test's own loop in trio mode, a hop to the
        # box's loop thread or one local HTTP request otherwise), like entering a capture.
        self.lift()

    def __repr__(self) -> str:
        info = self.info
        return f"ActiveFault({info.kind}, {info.server}={info.node}, topic={info.topic!r})"


class Faults:
    """Make the box's servers misbehave on purpose (``nsqbox.faults``).

    ``run`` executes a function on the servers' loop; ``cluster`` gives the running
    cluster (on that loop); ``control`` stops, crashes and starts nodes. Without
    them (``mode`` names why) the calls that need them raise
    :class:`FaultsUnsupported`.
    """

    def __init__(
        self,
        run: Runner | None,
        cluster: Callable[[], RunningCluster] | None,
        *,
        control: NodeControl | None = None,
        mode: str = "",
    ) -> None:
        self._run = run
        self._cluster = cluster
        self._control = control
        self._mode = mode

    @property
    def supported(self) -> bool:
        """Whether this mode reaches its servers (thread and trio modes do; over HTTP,
        whether the nsqds have the ``/nsqbox/faults`` routes)."""
        return self._run is not None and self._cluster is not None

    def _unsupported(self, what: str = "faults") -> FaultsUnsupported:
        where = f"in {self._mode} mode" if self._mode else "here"
        return FaultsUnsupported(
            f"{what} not supported {where}: they need nsqbox's servers, run by the box "
            "(thread, trio or subprocess mode; noproc mode against nsqbox's servers has "
            "every fault but restarts and crashes)"
        )

    def _call(self, fn: Callable[[RunningCluster], T]) -> T:
        run, cluster = self._run, self._cluster
        if run is None or cluster is None:
            raise self._unsupported()
        result: T = run(lambda: fn(cluster()))
        return result

    # -- what the modes do differently (HTTPFaults goes through the routes) -----------
    def _add(self, server: str, node: int, kind: str, params: Params) -> ActiveFault:
        """Start a lasting fault of ``kind`` on a server; it, in force."""
        given = {k: v for k, v in params.items() if v is not None}

        def add(cluster: RunningCluster) -> FaultInfo:
            fault = getattr(_fault_list(cluster, server, node), kind)(**given)
            return fault_info(server, node, fault.describe())

        return ActiveFault(self, self._call(add))

    def _act(self, node: int, kind: str, params: Params) -> int:
        """A one-shot nsqd fault; its count."""
        given = {k: v for k, v in params.items() if v is not None}
        count: int = self._call(lambda c: getattr(c.node(node).faults, kind)(**given))
        return count

    def _listing(self) -> list[FaultInfo]:
        def listing(cluster: RunningCluster) -> list[FaultInfo]:
            return [
                fault_info(server, index, fault.describe())
                for server, index, faults in _fault_lists(cluster)
                for fault in faults.active()
            ]

        return self._call(listing)

    def _lift(self, fault: FaultInfo) -> bool:
        def lift(cluster: RunningCluster) -> bool:
            server = _fault_list_if_up(cluster, fault.server, fault.node)
            return server is not None and server.lift(fault.id)

        return self._call(lift)

    def _lift_all(self) -> int:
        return self._call(lambda c: sum(faults.lift_all() for _, _, faults in _fault_lists(c)))

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
        check_limits(count, duration)
        params = {"topic": topic, "count": count, "duration": duration, "error": error}
        return self._add(NSQD, node, "fail_publishes", params)

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
        check_limits(None, duration)
        params = {"topic": topic, "duration": duration, "error": error}
        return self._add(NSQD, node, "disk_full", params)

    def latency(
        self,
        delay: float,
        *,
        jitter: float = 0.0,
        topic: str | None = None,
        channel: str | None = None,
        user_agent: str | None = None,
        client_id: str | None = None,
        count: int | None = None,
        duration: float | None = None,
        node: int = 0,
    ) -> ActiveFault:
        """Every write nsqd makes to a matching client (responses, message deliveries,
        heartbeats) waits ``delay`` seconds, plus or minus up to ``jitter``: the next
        ``count`` writes, or for ``duration`` seconds, or until lifted. A client matches
        when it is subscribed to ``topic`` (and ``channel``), its user agent contains
        ``user_agent`` and its IDENTIFY ``client_id`` is ``client_id`` (each if given)."""
        check_limits(count, duration)
        if not 0 <= jitter <= delay:
            raise ValueError("delay must be at least 0, and jitter between 0 and delay")
        params = {
            "delay": delay,
            "jitter": jitter,
            "topic": topic,
            "channel": channel,
            "user_agent": user_agent,
            "client_id": client_id,
            "count": count,
            "duration": duration,
        }
        return self._add(NSQD, node, "latency", params)

    def stall(
        self,
        *,
        topic: str | None = None,
        channel: str | None = None,
        user_agent: str | None = None,
        client_id: str | None = None,
        count: int | None = None,
        duration: float | None = None,
        node: int = 0,
    ) -> ActiveFault:
        """nsqd sends nothing more to matching clients (matched as by :meth:`latency`),
        not even heartbeats, so their read timeouts fire; until lifted or ``duration``
        seconds are up. With ``count``, only the first ``count`` connections it catches."""
        check_limits(count, duration)
        params = {
            "topic": topic,
            "channel": channel,
            "user_agent": user_agent,
            "client_id": client_id,
            "count": count,
            "duration": duration,
        }
        return self._add(NSQD, node, "stall", params)

    def hide_producers(
        self, topic: str | None = None, *, duration: float | None = None, lookupd: int = 0
    ) -> ActiveFault:
        """nsqlookupd's ``/lookup`` answers that ``topic`` (every topic without one) has
        no producers, until lifted or ``duration`` seconds are up."""
        check_limits(None, duration)
        return self._add(LOOKUPD, lookupd, "hide_producers", {"topic": topic, "duration": duration})

    def lookupd_down(self, *, duration: float | None = None, lookupd: int = 0) -> ActiveFault:
        """nsqlookupd's HTTP API stops answering (requests hang) until lifted or
        ``duration`` seconds are up; nsqds stay registered with it."""
        check_limits(None, duration)
        return self._add(LOOKUPD, lookupd, "lookupd_down", {"duration": duration})

    def active(self) -> list[FaultInfo]:
        """Every lasting fault in force, on every nsqd and nsqlookupd."""
        return self._listing()

    def lift(self, fault: FaultInfo) -> bool:
        """End one fault; False when it had already ended."""
        return self._lift(fault)

    def lift_all(self) -> int:
        """End every lasting fault on every server; how many there were."""
        return self._lift_all()

    # -- one-shot faults -----------------------------------------------------------
    def time_out_in_flight(
        self, topic: str | None = None, channel: str | None = None, *, node: int = 0
    ) -> int:
        """Time out the in-flight messages of ``topic``/``channel`` (all by default)
        now, as msg-timeout would: each is requeued and redelivered with
        attempts + 1. Returns how many there were."""
        return self._act(node, "time_out_in_flight", {"topic": topic, "channel": channel})

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
        params = {"topic": topic, "channel": channel, "user_agent": user_agent, "reset": reset}
        return self._act(node, "drop_connections", params)

    # -- nodes going down ------------------------------------------------------------
    def _nodes(self) -> NodeControl:
        if self._control is None:
            raise self._unsupported("restarts and crashes are")
        return self._control

    def restart(self, node: int = 0) -> None:
        """Shut nsqd ``node`` down cleanly (everything persisted) and start it again on
        the same ports with the same data; returns once it is registered again."""
        control = self._nodes()
        control.stop_nsqd(node)
        control.start_nsqd(node)

    def crash(self, node: int = 0, *, restart: bool = False) -> None:
        """Stop nsqd ``node`` as a SIGKILL would: memory queues, in-flight and deferred
        messages are lost; what is on disk survives. It stays down until :meth:`start`
        (or ``restart=True``, or the end of the test)."""
        control = self._nodes()
        control.crash_nsqd(node)
        if restart:
            control.start_nsqd(node)

    def start(self, node: int = 0) -> None:
        """Start a crashed (or stopped) nsqd again: same ports, same data path."""
        self._nodes().start_nsqd(node)


def _fault_list(cluster: RunningCluster, server: str, index: int) -> FaultList:
    if server == LOOKUPD:
        return cluster.lookupd[index].lookupd.faults
    return cluster.node(index).faults


def _fault_list_if_up(cluster: RunningCluster, server: str, index: int) -> FaultList | None:
    if server == NSQD and cluster.runners[index].nsqd is None:
        return None  # a node that is down has no faults (a restart starts with none)
    return _fault_list(cluster, server, index)


def _fault_lists(cluster: RunningCluster) -> list[tuple[str, int, FaultList]]:
    """Every running server's fault list: nsqds, then nsqlookupds."""
    lists: list[tuple[str, int, FaultList]] = [
        (NSQD, index, nsqd.faults) for index, nsqd in cluster.running()
    ]
    lists += [(LOOKUPD, index, lk.lookupd.faults) for index, lk in enumerate(cluster.lookupd)]
    return lists
