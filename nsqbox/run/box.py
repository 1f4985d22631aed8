"""The box: nsqlookupd, N nsqds and the admin service as one trio service (:func:`serve_box`).

One nursery holds every service. By default the box listens on 127.0.0.1 at NSQ's standard
ports — nsqd 4150 (TCP) and 4151 (HTTP), nsqlookupd 4160 and 4161, the admin service (nsqadmin's
``/api``) 4171 — keeps its data in ``./nsqbox-data`` and registers every nsqd with the box's
lookupd. With ``nsqd_count`` N, node ``i`` gets node id ``i`` (plus the template's node id), the
base ports plus ``100 * i`` (a port of 0 stays 0) and the data directory ``<data-path>/node<i>``
(node 0 uses ``<data-path>`` itself). :meth:`BoxOptions.use_ephemeral_ports` puts every listener
on port 0; :class:`BoxAddresses` reports the ports bound.

This module is the service only: the ``nsqbox up`` command (flags, config file, signals, the
banner) is :mod:`nsqbox.run.up`, and ``nsqbox up --tui`` is :mod:`nsqbox.run.up_tui`. It imports
neither trio nor the servers at the top, so reading :class:`BoxOptions` stays light.
"""

from __future__ import annotations

import contextvars
import copy
import functools
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from nsqbox.admin.options import AdminOptions
from nsqbox.lookupd.options import LookupdOptions
from nsqbox.net.addresses import format_address, split_host_port
from nsqbox.nsqd.domain.options import NSQDOptions

if TYPE_CHECKING:
    import trio

    from nsqbox.admin.control import ControlledNode
    from nsqbox.admin.server import AdminAddresses
    from nsqbox.broker.clock import BrokerClock
    from nsqbox.lookupd.server import LookupdAddresses
    from nsqbox.nsqd.domain.nsqd import NSQD
    from nsqbox.nsqd.runner import NodeRunner
    from nsqbox.nsqd.server import NSQDAddresses

__all__ = [
    "BOX_PREFIX",
    "LOG_PREFIXES",
    "UP_DATA_PATH",
    "BoxAddresses",
    "BoxControl",
    "BoxOptions",
    "NodeTag",
    "serve_box",
    "with_port",
]

#: Where ``nsqbox up`` keeps its data unless --data-path says otherwise.
UP_DATA_PATH = "./nsqbox-data"
#: Node ``i`` listens on the base ports plus ``NODE_PORT_STEP * i``. (10 would collide with
#: lookupd's 4160/4161 and the admin service's 4171 at the default ports.)
NODE_PORT_STEP = 100
MAX_NSQD_COUNT = 64

#: Log prefixes per service, as the real daemons print them.
LOG_PREFIXES = {"nsqbox.lookupd": "[nsqlookupd] ", "nsqbox.admin": "[nsqadmin] "}
#: The prefix of the box's own lines (a start that failed), which no one service wrote.
BOX_PREFIX = "[nsqbox] "


@dataclass(slots=True)
class BoxOptions:
    """Everything ``nsqbox up`` runs. ``nsqd`` is node 0's options; the others derive from it."""

    nsqd: NSQDOptions = field(
        default_factory=lambda: NSQDOptions(data_path=UP_DATA_PATH, log_level="warn", node_id=0)
    )
    nsqd_count: int = 1
    lookupd_tcp_address: str = "127.0.0.1:4160"
    lookupd_http_address: str = "127.0.0.1:4161"
    admin_http_address: str = "127.0.0.1:4171"
    #: The box's broker clock, ``real`` or ``manual`` (``nsqbox clock advance`` moves it).
    clock: str = "real"
    #: A snapshot to load once the nsqds run, before the box is ready (``--load``).
    load_path: str = ""
    #: A seed (TOML) to apply once the nsqds run, after ``load_path`` (``--seed``).
    seed_path: str = ""
    #: Where the admin service saves a snapshot a request names (``POST /api/snapshot?file=``,
    #: the TUI's save); empty: the working directory the box started in.
    snapshot_dir: str = ""

    def use_ephemeral_ports(self) -> None:
        """Put every listener on port 0 (the OS picks free ports)."""
        self.nsqd.tcp_address = with_port(self.nsqd.tcp_address, 0)
        if self.nsqd.http_address:
            self.nsqd.http_address = with_port(self.nsqd.http_address, 0)
        self.nsqd.https_address = with_port(self.nsqd.https_address, 0)
        self.lookupd_tcp_address = with_port(self.lookupd_tcp_address, 0)
        self.lookupd_http_address = with_port(self.lookupd_http_address, 0)
        self.admin_http_address = with_port(self.admin_http_address, 0)

    def validate(self) -> None:
        """Raise ValueError for a box that cannot start (bad count, ids or clashing ports)."""
        if self.clock not in ("real", "manual"):
            raise ValueError(f"--clock must be real or manual, not {self.clock!r}")
        if not 1 <= self.nsqd_count <= MAX_NSQD_COUNT:
            raise ValueError(f"--nsqd-count must be [1,{MAX_NSQD_COUNT}]")
        if self.nsqd.node_id + self.nsqd_count > 1024:
            raise ValueError("--node-id plus --nsqd-count must stay below 1024")
        seen: dict[tuple[str, int], str] = {}
        addresses = [
            ("nsqlookupd TCP", self.lookupd_tcp_address),
            ("nsqlookupd HTTP", self.lookupd_http_address),
            ("admin HTTP", self.admin_http_address),
        ]
        for i in range(self.nsqd_count):
            node = self.node_options(i, [])
            addresses.append((f"nsqd {i} TCP", node.tcp_address))
            if node.http_address:
                addresses.append((f"nsqd {i} HTTP", node.http_address))
            if node.tls_cert:
                addresses.append((f"nsqd {i} HTTPS", node.https_address))
        for name, address in addresses:
            host, port = split_host_port(address)
            if port == 0:
                continue
            other = seen.setdefault((host, port), name)
            if other != name:
                raise ValueError(f"{name} and {other} both want {address}")

    def data_path(self, index: int) -> str:
        """Node ``index``'s data directory."""
        base = self.nsqd.data_path or "."
        return base if index == 0 else os.path.join(base, f"node{index}")

    def node_options(self, index: int, lookupd_tcp_addresses: Sequence[str]) -> NSQDOptions:
        """Node ``index``'s options; it registers with ``lookupd_tcp_addresses`` too."""
        options = copy.deepcopy(self.nsqd)
        step = NODE_PORT_STEP * index
        options.node_id = self.nsqd.node_id + index
        options.tcp_address = _shift_port(options.tcp_address, step)
        if options.http_address:
            options.http_address = _shift_port(options.http_address, step)
        options.https_address = _shift_port(options.https_address, step)
        if options.broadcast_tcp_port:
            options.broadcast_tcp_port += step
        if options.broadcast_http_port:
            options.broadcast_http_port += step
        options.data_path = self.data_path(index)
        options.lookupd_tcp_addresses = [*lookupd_tcp_addresses, *options.lookupd_tcp_addresses]
        return options

    def lookupd_options(self) -> LookupdOptions:
        """The box's nsqlookupd options."""
        return LookupdOptions(
            log_level=self.nsqd.log_level,
            tcp_address=self.lookupd_tcp_address,
            http_address=self.lookupd_http_address,
            # the box's Host allowlist, and its auth turning nsqbox's routes off, everywhere
            allowed_hosts=list(self.nsqd.allowed_hosts),
            auth_http_addresses=list(self.nsqd.auth_http_addresses),
            box_broadcast_address=self.nsqd.broadcast_address,
        )

    def admin_options(self, lookupd_http_address: str) -> AdminOptions:
        """The admin service's options: it reads the cluster through the box's lookupd."""
        return AdminOptions(
            log_level=self.nsqd.log_level,
            http_address=self.admin_http_address,
            lookupd_http_addresses=[lookupd_http_address],
            http_client_connect_timeout=self.nsqd.http_client_connect_timeout,
            http_client_request_timeout=self.nsqd.http_client_request_timeout,
            allowed_hosts=list(self.nsqd.allowed_hosts),
            auth_http_addresses=list(self.nsqd.auth_http_addresses),
            box_broadcast_address=self.nsqd.broadcast_address,
        )


def with_port(address: str, port: int) -> str:
    """``address`` with its port replaced by ``port``."""
    host, _ = split_host_port(address)
    return format_address((host, port))


def _shift_port(address: str, step: int) -> str:
    host, port = split_host_port(address)
    return format_address((host, port + step if port else 0))


def _reachable(address: tuple[str, int]) -> str:
    """``host:port`` another local process can dial (a wildcard bind is reached on loopback)."""
    host, port = address
    if host in ("0.0.0.0", ""):
        host = "127.0.0.1"
    elif host == "::":
        host = "::1"
    return format_address((host, port))


@dataclass(frozen=True)
class BoxAddresses:
    """What serve_box reports once every service listens."""

    lookupd: LookupdAddresses
    #: The first start's (a restarted node keeps its ports; its NSQD is control.nsqd(i)).
    nsqds: tuple[NSQDAddresses, ...]
    admin: AdminAddresses
    data_paths: tuple[str, ...]
    #: Stop, crash and start the nsqds (None when the box was not made by serve_box).
    control: BoxControl | None = None
    #: The broker clock every node of the box shares (None when not made by serve_box).
    clock: BrokerClock | None = None
    #: What the box was started from (``--load``, ``--seed``), a line each for the banner.
    started_from: tuple[str, ...] = ()

    def ready(self) -> dict[str, Any]:
        """The ``--ready-json`` object: every address as ``host:port`` (node 0's unsuffixed)."""
        tcp = [format_address(n.tcp) for n in self.nsqds]
        http = [format_address(n.http) if n.http else None for n in self.nsqds]
        return {
            "nsqd_tcp_address": tcp[0],
            "nsqd_http_address": http[0],
            "nsqd_tcp_addresses": tcp,
            "nsqd_http_addresses": http,
            "lookupd_tcp_address": format_address(self.lookupd.tcp),
            "lookupd_http_address": format_address(self.lookupd.http),
            "admin_http_address": format_address(self.admin.http),
            "data_path": os.path.abspath(self.data_paths[0]),
        }

    def banner(self, label: str = "nsqbox up") -> str:
        """The lines printed at start: every service and address."""
        lines = []
        for i, node in enumerate(self.nsqds):
            name = "nsqd" if len(self.nsqds) == 1 else f"nsqd {i}"
            http = format_address(node.http) if node.http else "off"
            where = os.path.abspath(self.data_paths[i])
            lines.append(f"{name}: TCP {format_address(node.tcp)}, HTTP {http}; data in {where}")
        lookupd = self.lookupd
        lines.append(
            f"nsqlookupd: TCP {format_address(lookupd.tcp)}, HTTP {format_address(lookupd.http)}"
        )
        lines.append(f"admin: HTTP {format_address(self.admin.http)} (nsqadmin's /api)")
        if self.clock is not None and self.clock.mode == "manual":
            lines.append("broker clock: manual, standing still until `nsqbox clock advance 1h`")
        lines += self.started_from
        lines.append("running; Ctrl-C stops")
        return "".join(f"{label}: {line}\n" for line in lines)


#: Which node the current task serves, for log lines (trio tasks inherit it from their parent).
node_index: contextvars.ContextVar[int] = contextvars.ContextVar("nsqbox_node")


class NodeTag(logging.Filter):
    """Tags nsqd log lines with the node they come from when a box runs several."""

    def filter(self, record: logging.LogRecord) -> bool:
        index = node_index.get(None)
        if index is not None and record.name.startswith("nsqbox.nsqd"):
            record.msg = f"node {index}: {record.msg}"
        return True


async def _serve_node(
    index: int,
    clock: BrokerClock,
    options: NSQDOptions,
    *,
    task_status: trio.TaskStatus[NSQDAddresses],
) -> None:
    from nsqbox.nsqd.server import serve_nsqd

    node_index.set(index)
    await serve_nsqd(options, clock=clock, task_status=task_status)


class BoxControl:
    """Per-node control of a running box's nsqds (use it on the box's trio loop).

    ``serve_box`` makes one and reports it as :attr:`BoxAddresses.control`. Each
    node keeps its ports (its first start's) and its data path across restarts.
    Every method returns once the node is down, or up again, listening and
    registered with the box's nsqlookupd; each raises IndexError for a node the box
    does not have.
    """

    def __init__(self, runners: Sequence[NodeRunner]) -> None:
        self._runners = tuple(runners)

    def __len__(self) -> int:
        return len(self._runners)

    def _runner(self, index: int) -> NodeRunner:
        if not 0 <= index < len(self._runners):
            raise IndexError(f"no nsqd {index}: the box has {len(self._runners)} (from 0)")
        return self._runners[index]

    def state(self, index: int) -> str:
        """``"running"``, ``"stopped"`` (a clean stop) or ``"crashed"``."""
        return self._runner(index).state

    def states(self) -> list[str]:
        """Every node's :meth:`state`, by index."""
        return [runner.state for runner in self._runners]

    def nsqd(self, index: int) -> NSQD | None:
        """Node ``index``'s live NSQD, None while it is down."""
        return self._runner(index).nsqd

    async def stop(self, index: int) -> None:
        """Shut node ``index`` down cleanly, as SIGTERM would: everything persisted."""
        await self._runner(index).stop()

    async def crash(self, index: int, *, restart: bool = False) -> None:
        """Stop node ``index`` as SIGKILL would: its memory queues, in-flight and
        deferred messages are lost, what is on disk survives; with ``restart``, start
        it again at once."""
        await self._runner(index).crash()
        if restart:
            await self.start(index)

    async def start(self, index: int) -> None:
        """Start node ``index`` again (nothing when it runs)."""
        await self._runner(index).start()

    async def restart(self, index: int) -> None:
        """:meth:`stop` then :meth:`start`: a clean restart."""
        await self.stop(index)
        await self.start(index)


def _node_name(options: NSQDOptions, node: NSQDAddresses) -> str:
    """An nsqd's ``host:port`` as lookupd lists it (and so as the admin service names it)."""
    port = options.broadcast_http_port or (node.http[1] if node.http else 0)
    return format_address((options.effective_broadcast_address(), port))


class AdminNodeControl:
    """The box's nsqds as the admin service's ``NodeControl``: ``/api/faults/restart``,
    ``crash`` and ``start``, ``nsqbox fault restart`` and the TUI's node actions; and its
    ``SnapshotControl`` (``/api/snapshot``: cut, save into ``save_dir``, the last load)."""

    def __init__(self, control: BoxControl, names: Sequence[str], save_dir: str = ".") -> None:
        self._control = control
        self._names = tuple(names)
        #: Where ``POST /api/snapshot?file=NAME`` saves (the box's working directory).
        self.save_dir = os.path.abspath(save_dir)

    def nodes(self) -> list[ControlledNode]:
        """Every nsqd of the box, running or not."""
        from nsqbox.admin.control import ControlledNode

        states = self._control.states()
        return [
            ControlledNode(index, "nsqd", name, states[index])
            for index, name in enumerate(self._names)
        ]

    def _require(self, index: int, running: bool, action: str) -> None:
        from nsqbox.admin.control import NodeControlError

        state = self._control.state(index)
        if (state == "running") != running:
            raise NodeControlError(f"nsqd {index} is {state}: nothing to {action}")

    async def restart(self, index: int) -> None:
        """A clean stop and a start (a node that is down is started)."""
        await self._control.restart(index)

    async def crash(self, index: int) -> None:
        """Stop as SIGKILL would; refused for a node that is not running."""
        self._require(index, True, "crash")
        await self._control.crash(index)

    async def start(self, index: int) -> None:
        """Start a node that is down; refused for a running one."""
        self._require(index, False, "start")
        await self._control.start(index)

    def cut_snapshot(self) -> list[dict[str, Any]]:
        """Every nsqd's snapshot cut, in one synchronous pass (``POST /api/snapshot``)."""
        from nsqbox.run.snapshot import cut_box

        return cut_box(self._control, self._names)

    async def save_snapshot(self, name: str) -> dict[str, Any]:
        """Save every nsqd's cut as the snapshot ``name`` in :attr:`save_dir`."""
        from nsqbox.run.snapshot import save_box

        return await save_box(self._control, self.save_dir, name)

    def snapshot_info(self) -> dict[str, Any]:
        """``{"loaded": the box's last load or None, "directory": save_dir}``."""
        from nsqbox.run.snapshot import loaded_box

        return {"loaded": loaded_box(self._control), "directory": self.save_dir}


async def serve_box(
    options: BoxOptions,
    *,
    task_status: trio.TaskStatus[BoxAddresses],
) -> None:
    """Run lookupd, the nsqds and the admin service until cancelled (``nursery.start`` it).

    Creates the data directories, then reports every bound address through ``task_status``
    once all of them listen (with the :class:`BoxControl` of the nsqds). Raises ValueError
    for options that cannot work (see :meth:`BoxOptions.validate`), OSError when a
    directory or a port is not available.
    """
    import trio

    from nsqbox.admin.server import serve_admin
    from nsqbox.broker.clock import BrokerClock
    from nsqbox.lookupd.server import serve_lookupd
    from nsqbox.nsqd.runner import NodeRunner

    options.validate()
    paths = tuple(options.data_path(i) for i in range(options.nsqd_count))
    for path in paths:
        await trio.Path(path).mkdir(parents=True, exist_ok=True)
    clock = BrokerClock.of_mode(options.clock, real=trio.current_time)  # shared by every node
    async with trio.open_nursery() as nursery:
        lookupd: LookupdAddresses = await nursery.start(
            functools.partial(serve_lookupd, options.lookupd_options(), clock=clock)
        )
        registry = [_reachable(lookupd.tcp)]
        runners = [
            NodeRunner(
                nursery,
                options.node_options(index, registry),
                serve=functools.partial(_serve_node, index, clock),
            )
            for index in range(options.nsqd_count)
        ]
        nsqds = [await runner.start(register=False) for runner in runners]
        control = BoxControl(runners)
        started_from: list[str] = []
        if options.load_path:
            from nsqbox.run.snapshot import load_box

            count = await load_box(options.load_path, control, clock)
            started_from.append(f"loaded {options.load_path}: {count} messages")
        if options.seed_path:
            from nsqbox.run.snapshot import seed_box

            count = await seed_box(options.seed_path, control, clock, paths[0])
            started_from.append(f"seeded from {options.seed_path}: {count} messages")
        names = [
            _node_name(runner.options, node) for runner, node in zip(runners, nsqds, strict=True)
        ]
        admin_options = options.admin_options(_reachable(lookupd.http))
        node_control = AdminNodeControl(control, names, options.snapshot_dir or os.getcwd())
        serve = functools.partial(serve_admin, control=node_control)
        admin: AdminAddresses = await nursery.start(serve, admin_options)
        task_status.started(
            BoxAddresses(lookupd, tuple(nsqds), admin, paths, control, clock, tuple(started_from))
        )
