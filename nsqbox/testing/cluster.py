"""serve_cluster: nsqlookupds and nsqds in one trio task tree, every nsqd registered.

Everything binds 127.0.0.1 port 0 unless the spec's flags say otherwise, so any
number of clusters (and pytest-xdist workers) run side by side.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable, Sequence

import trio

from ..goflags import FlagError, HelpRequested
from ..lookupd.options import LookupdOptions, parse_lookupd_args
from ..lookupd.server import LookupdAddresses, serve_lookupd
from ..nsqd.config import ConfigError, parse_nsqd_args
from ..nsqd.lookup import lookup_service
from ..nsqd.nsqd import NSQD
from ..nsqd.options import NSQDOptions
from ..nsqd.server import NSQDAddresses, serve_nsqd
from .config import Address, BoxAddresses, ClusterSpec, SpecError

__all__ = [
    "NodeStopped",
    "RunningCluster",
    "SpecError",
    "lookupd_options",
    "nsqd_options",
    "serve_cluster",
]

#: How long start-up waits for every nsqd to be registered with every nsqlookupd.
REGISTER_TIMEOUT = 10.0


class NodeStopped(RuntimeError):
    """An operation needs an nsqd that the test stopped (``stop_nsqd``)."""


class RunningCluster:
    """The servers of a started cluster (``nsqd`` and ``lookupd`` in start order).

    nsqds can be stopped and started again one by one (:meth:`stop_nsqd`,
    :meth:`start_nsqd`): a stop is nsqd's clean shutdown (messages persisted), a start
    binds the same ports and reopens the same data path. Use it on the cluster's loop.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        nsqd_opts: Sequence[NSQDOptions],
        lookupd: Sequence[LookupdAddresses],
    ) -> None:
        self._nursery = nursery
        self._opts = list(nsqd_opts)
        self.lookupd = tuple(lookupd)
        self.nsqd: list[NSQDAddresses | None] = [None] * len(self._opts)
        self._scopes: list[trio.CancelScope | None] = [None] * len(self._opts)
        self._stopped: list[trio.Event | None] = [None] * len(self._opts)
        self.addresses = BoxAddresses(nsqd_tcp=(), nsqd_http=())
        #: Called with (index, NSQD) after a node started again.
        self.on_start: list[Callable[[int, NSQD], None]] = []

    def started(self, nsqds: Sequence[NSQDAddresses]) -> None:
        """Record the first start: addresses, and what restarts bind (the same ports)."""
        self.nsqd = list(nsqds)
        self._opts = [
            dataclasses.replace(
                opts,
                tcp_address=str(Address.of(*n.tcp)),
                http_address=str(Address.of(*n.http)) if n.http is not None else "",
                https_address=str(Address.of(*n.https)) if n.https is not None else "",
                broadcast_tcp_port=n.nsqd.options.broadcast_tcp_port,
                broadcast_http_port=n.nsqd.options.broadcast_http_port,
            )
            for opts, n in zip(self._opts, nsqds, strict=True)
        ]
        self.addresses = BoxAddresses(
            nsqd_tcp=tuple(Address.of(*n.tcp) for n in nsqds),
            nsqd_http=tuple(Address.of(*n.http) for n in nsqds if n.http is not None),
            lookupd_tcp=tuple(Address.of(*lk.tcp) for lk in self.lookupd),
            lookupd_http=tuple(Address.of(*lk.http) for lk in self.lookupd),
        )

    @property
    def nsqds(self) -> list[NSQD]:
        """The live NSQD containers (use them on the cluster's trio loop only)."""
        return [self.node(i) for i in range(len(self.nsqd))]

    def node(self, index: int) -> NSQD:
        """nsqd number ``index``; NodeStopped when a test stopped it."""
        running = self.nsqd[index]
        if running is None:
            raise NodeStopped(f"nsqd {index} is stopped (start it with start_nsqd({index}))")
        return running.nsqd

    def running(self) -> list[tuple[int, NSQD]]:
        """``(index, nsqd)`` of every nsqd that runs."""
        return [(i, n.nsqd) for i, n in enumerate(self.nsqd) if n is not None]

    async def run_nsqd(
        self, index: int, *, task_status: trio.TaskStatus[NSQDAddresses] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Serve nsqd ``index`` until :meth:`stop_nsqd` (or the cluster) cancels it."""
        scope = trio.CancelScope()
        stopped = trio.Event()
        self._scopes[index], self._stopped[index] = scope, stopped
        try:
            with scope:
                await serve_nsqd(dataclasses.replace(self._opts[index]), task_status=task_status)
        finally:
            stopped.set()

    async def stop_nsqd(self, index: int) -> None:
        """Shut nsqd ``index`` down cleanly (it persists its messages); idempotent."""
        scope, stopped = self._scopes[index], self._stopped[index]
        self.nsqd[index] = None
        if scope is not None and stopped is not None:
            scope.cancel()
            await stopped.wait()
        self._scopes[index] = self._stopped[index] = None

    async def start_nsqd(self, index: int) -> NSQD:
        """Start nsqd ``index`` again: same ports, same data; registered when this returns."""
        running = self.nsqd[index]
        if running is not None:
            return running.nsqd
        started: NSQDAddresses = await self._nursery.start(self.run_nsqd, index)
        self.nsqd[index] = started
        with trio.fail_after(REGISTER_TIMEOUT):
            await wait_registered([started.nsqd])
        for callback in self.on_start:
            callback(index, started.nsqd)
        return started.nsqd


def _parse_error(who: str, args: Sequence[str], exc: Exception) -> SpecError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SpecError(f"bad {who} flags {list(args)}: {detail}")


def nsqd_options(
    spec: ClusterSpec, index: int, data_path: str, lookupd_tcp: Sequence[str] = ()
) -> NSQDOptions:
    """The options of the cluster's ``index``-th nsqd (flags first, then option fields).

    Defaults differ from nsqd's where a test box wants them to: loopback port 0,
    ``--node-id`` = index + 1 (distinct message ids across nodes), the given data path.
    """
    base = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        https_address="",
        node_id=index + 1,
        data_path=data_path,
    )
    try:
        command = parse_nsqd_args(list(spec.nsqd_args), defaults=base)
    except (FlagError, HelpRequested, ConfigError) as exc:
        raise _parse_error("nsqd", spec.nsqd_args, exc) from None
    if command.args:
        raise SpecError(f"bad nsqd flags {list(spec.nsqd_args)}: unexpected {command.args[0]!r}")
    options = command.options
    for key, value in spec.nsqd_options.items():
        if key not in NSQDOptions.__dataclass_fields__:
            raise SpecError(f"unknown nsqd option {key!r} (see nsqbox.nsqd.options.NSQDOptions)")
        setattr(options, key, value)
    options.lookupd_tcp_addresses = [*lookupd_tcp, *options.lookupd_tcp_addresses]
    try:
        options.validate()
    except ValueError as exc:
        raise SpecError(str(exc)) from None
    return options


def lookupd_options(spec: ClusterSpec) -> LookupdOptions:
    """The options of the cluster's nsqlookupds (loopback port 0, then the spec's flags)."""
    base = LookupdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
    try:
        command = parse_lookupd_args(list(spec.lookupd_args), defaults=base)
    except (FlagError, HelpRequested, ConfigError) as exc:
        raise _parse_error("nsqlookupd", spec.lookupd_args, exc) from None
    if command.args:
        raise SpecError(
            f"bad nsqlookupd flags {list(spec.lookupd_args)}: unexpected {command.args[0]!r}"
        )
    return command.options


async def wait_registered(nsqds: Sequence[NSQD]) -> None:
    """Wait until each nsqd's lookupd connections have acknowledged everything sent so far."""
    for nsqd in nsqds:
        service = lookup_service(nsqd)
        if service is not None:
            await service.wait_synced()


async def serve_cluster(
    spec: ClusterSpec,
    data_root: str,
    *,
    task_status: trio.TaskStatus[RunningCluster] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run ``spec``'s servers until cancelled; each nsqd keeps its data in ``data_root/nsqdN``.

    Reports a :class:`RunningCluster` once every server listens and every nsqd is
    registered with every nsqlookupd.
    """
    # Parse everything before binding anything: a typo fails fast, with nothing to undo.
    lookupd_opts = [lookupd_options(spec) for _ in range(spec.lookupd)]
    paths = [os.path.join(data_root, f"nsqd{i}") for i in range(spec.nsqd)]
    for path in paths:
        os.makedirs(path, exist_ok=True)
    nsqd_opts = [nsqd_options(spec, i, path) for i, path in enumerate(paths)]
    async with trio.open_nursery() as nursery:
        lookupds: list[LookupdAddresses] = [
            await nursery.start(serve_lookupd, opts) for opts in lookupd_opts
        ]
        registry = [str(Address.of(*lk.tcp)) for lk in lookupds]
        for opts in nsqd_opts:
            opts.lookupd_tcp_addresses = [*registry, *opts.lookupd_tcp_addresses]
        # Each nsqd runs in a cancel scope of its own, so a test can stop one node.
        cluster = RunningCluster(nursery, nsqd_opts, lookupds)
        nsqds: list[NSQDAddresses] = []
        for index in range(len(nsqd_opts)):
            nsqds.append(await nursery.start(cluster.run_nsqd, index))
        cluster.started(nsqds)
        with trio.fail_after(REGISTER_TIMEOUT):
            await wait_registered([n.nsqd for n in nsqds])
        task_status.started(cluster)
