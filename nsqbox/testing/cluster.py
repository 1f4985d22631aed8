"""serve_cluster: nsqlookupds and nsqds in one trio task tree, every nsqd registered.

Everything binds 127.0.0.1 port 0 unless the spec's flags say otherwise, so any
number of clusters (and pytest-xdist workers) run side by side.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Sequence

import trio

from ..broker.clock import BrokerClock
from ..lookupd.options import LookupdOptions
from ..lookupd.server import LookupdAddresses, serve_lookupd
from ..nsqd.domain.nsqd import NSQD
from ..nsqd.domain.options import NSQDOptions
from ..nsqd.runner import REGISTER_TIMEOUT, NodeRunner, wait_registered
from ..nsqd.server import NSQDAddresses, serve_nsqd
from .config import Address, BoxAddresses, ClusterSpec, SpecError

__all__ = [
    "NodeStopped",
    "RunningCluster",
    "SpecError",
    "lookupd_options",
    "nsqd_options",
    "serve_cluster",
    "wait_registered",
]


class NodeStopped(RuntimeError):
    """An operation needs an nsqd that the test stopped (``stop_nsqd``)."""


class RunningCluster:
    """The servers of a started cluster (``nsqd`` and ``lookupd`` in start order).

    nsqds can be stopped, crashed and started again one by one (:meth:`stop_nsqd`,
    :meth:`crash_nsqd`, :meth:`start_nsqd`): a stop is nsqd's clean shutdown (messages
    persisted), a crash a SIGKILL's (what is on disk survives), a start binds the same
    ports and reopens the same data path. Use it on the cluster's loop.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        nsqd_opts: Sequence[NSQDOptions],
        lookupd: Sequence[LookupdAddresses],
        clock: BrokerClock | None = None,
    ) -> None:
        #: The broker clock every server of the cluster shares (docs/testing.md, "Testing time").
        self.clock = clock if clock is not None else BrokerClock(real=trio.current_time)
        serve = functools.partial(serve_nsqd, clock=self.clock)
        self.runners = [NodeRunner(nursery, opts, serve=serve) for opts in nsqd_opts]
        self.lookupd = tuple(lookupd)
        self.addresses = BoxAddresses(nsqd_tcp=(), nsqd_http=())
        #: Called with (index, NSQD) after a node started again.
        self.on_start: list[Callable[[int, NSQD], None]] = []

    @property
    def nsqd(self) -> list[NSQDAddresses | None]:
        """Each nsqd's addresses and live container, None while it is down."""
        return [runner.running for runner in self.runners]

    def started(self, nsqds: Sequence[NSQDAddresses]) -> None:
        """Record the first start's addresses (restarts bind the same ports)."""
        self.addresses = BoxAddresses(
            nsqd_tcp=tuple(Address.of(*n.tcp) for n in nsqds),
            nsqd_http=tuple(Address.of(*n.http) for n in nsqds if n.http is not None),
            lookupd_tcp=tuple(Address.of(*lk.tcp) for lk in self.lookupd),
            lookupd_http=tuple(Address.of(*lk.http) for lk in self.lookupd),
        )

    @property
    def nsqds(self) -> list[NSQD]:
        """The live NSQD containers (use them on the cluster's trio loop only)."""
        return [self.node(i) for i in range(len(self.runners))]

    def node(self, index: int) -> NSQD:
        """nsqd number ``index``; NodeStopped when a test stopped it."""
        nsqd = self.runners[index].nsqd
        if nsqd is None:
            state = self.runners[index].state
            raise NodeStopped(f"nsqd {index} is {state} (start it with start_nsqd({index}))")
        return nsqd

    def running(self) -> list[tuple[int, NSQD]]:
        """``(index, nsqd)`` of every nsqd that runs."""
        return [(i, r.nsqd) for i, r in enumerate(self.runners) if r.nsqd is not None]

    async def stop_nsqd(self, index: int) -> None:
        """Shut nsqd ``index`` down cleanly (it persists its messages); idempotent."""
        await self.runners[index].stop()

    async def crash_nsqd(self, index: int) -> None:
        """Stop nsqd ``index`` as a SIGKILL would (memory lost, disk kept); idempotent."""
        await self.runners[index].crash()

    async def start_nsqd(self, index: int) -> NSQD:
        """Start nsqd ``index`` again: same ports, same data; registered when this returns."""
        runner = self.runners[index]
        if runner.nsqd is not None:
            return runner.nsqd
        started = await runner.start()
        for callback in self.on_start:
            callback(index, started.nsqd)
        return started.nsqd


def _parse_error(who: str, args: Sequence[str], exc: Exception) -> SpecError:
    detail = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return SpecError(f"bad {who} flags {list(args)}: {detail}")


def _valid(options: NSQDOptions) -> bool:
    try:
        options.validate()
    except ValueError:
        return False
    return True


def _parsed_nsqd_args(spec: ClusterSpec, base: NSQDOptions) -> NSQDOptions:
    """``spec``'s nsqd flags over ``base``, as nsqd parses and checks them."""
    from ..go.flags import FlagError, HelpRequested
    from ..nsqd.config import ConfigError, parse_nsqd_args

    try:
        command = parse_nsqd_args(list(spec.nsqd_args), defaults=base)
    except (FlagError, HelpRequested, ConfigError) as exc:
        raise _parse_error("nsqd", spec.nsqd_args, exc) from None
    if command.args:
        raise SpecError(f"bad nsqd flags {list(spec.nsqd_args)}: unexpected {command.args[0]!r}")
    return command.options


def nsqd_options(
    spec: ClusterSpec, index: int, data_path: str, lookupd_tcp: Sequence[str] = ()
) -> NSQDOptions:
    """The options of the cluster's ``index``-th nsqd (flags first, then option fields).

    Defaults differ from nsqd's where a test box wants them to: loopback port 0,
    ``--node-id`` = index + 1 (distinct message ids across nodes), the given data path.
    Without flags nothing is parsed (nor the flag machinery loaded): nsqd's checks of a
    parsed command line pass on these defaults, and a node id they refuse is parsed to get
    their message.
    """
    base = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        https_address="",
        node_id=index + 1,
        data_path=data_path,
    )
    options = base if not spec.nsqd_args and _valid(base) else _parsed_nsqd_args(spec, base)
    for key, value in spec.nsqd_options.items():
        if key not in NSQDOptions.__dataclass_fields__:
            raise SpecError(
                f"unknown nsqd option {key!r} (see nsqbox.nsqd.domain.options.NSQDOptions)"
            )
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
    if not spec.lookupd_args:
        return base  # what parsing no flags gives (nsqlookupd checks nothing more)
    from ..go.flags import FlagError, HelpRequested
    from ..lookupd.config import ConfigError, parse_lookupd_args

    try:
        command = parse_lookupd_args(list(spec.lookupd_args), defaults=base)
    except (FlagError, HelpRequested, ConfigError) as exc:
        raise _parse_error("nsqlookupd", spec.lookupd_args, exc) from None
    if command.args:
        raise SpecError(
            f"bad nsqlookupd flags {list(spec.lookupd_args)}: unexpected {command.args[0]!r}"
        )
    return command.options


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
    clock = BrokerClock.of_mode(spec.clock, real=trio.current_time)
    async with trio.open_nursery() as nursery:
        lookupds: list[LookupdAddresses] = [
            await nursery.start(functools.partial(serve_lookupd, opts, clock=clock))
            for opts in lookupd_opts
        ]
        registry = [str(Address.of(*lk.tcp)) for lk in lookupds]
        for opts in nsqd_opts:
            opts.lookupd_tcp_addresses = [*registry, *opts.lookupd_tcp_addresses]
        # Each nsqd runs in a cancel scope of its own, so a test can stop one node.
        cluster = RunningCluster(nursery, nsqd_opts, lookupds, clock)
        nsqds = [await runner.start(register=False) for runner in cluster.runners]
        cluster.started(nsqds)
        with trio.fail_after(REGISTER_TIMEOUT):
            await wait_registered([n.nsqd for n in nsqds])
        task_status.started(cluster)
        await trio.sleep_forever()  # the nursery stays open for restarts, every node down or not
