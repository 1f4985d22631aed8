"""The Faults view: the faults in force on every node, and the keys that start and lift them.

Two tables: the active faults (node, id, kind, scope, what is left, since when, the kind's
other fields) and the nodes (role, how many faults, or "not supported" for real NSQ; running
or down when the box's node control is at hand). The view reads the backend's
:class:`~nsqbox.admin.faults.FaultSource` after every refresh: straight from the nodes'
``/nsqbox/faults`` routes, or through the admin service's ``/api/faults`` (``nsqbox up
--tui``), which can also restart, crash and start the box's nodes.

``a`` starts a fault (:class:`~.fault_form.AddFaultScreen`), ``ctrl+d`` lifts the selected one,
``X`` lifts them all; ``R``, ``K`` and ``S`` restart, crash and start the node selected in the
Nodes table. Each asks first; ``--read-only`` hides them all.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ...broker.faults import left_text
from ..control import NodeAction
from ..faults import FaultError, FaultListing, FaultSource
from . import format as fmt
from .fault_form import AddFaultScreen, FaultRequest
from .operations import OperableScreen
from .safe import safe_text
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from .backend import Backend, Outcome

__all__ = ["FaultsScreen"]

FAULT_COLUMNS = (
    Column("node", "Node"),
    Column("id", "ID"),
    Column("kind", "Kind"),
    Column("scope", "Scope"),
    Column("left", "Left"),
    Column("since", "Since"),
    Column("details", "Details"),
)
NODE_COLUMNS = (
    Column("node", "Node"),
    Column("role", "Role"),
    Column("hostname", "Hostname"),
    Column("faults", "Faults"),
    Column("state", "State"),
)
#: The fields that say where a fault applies (the Scope column).
SCOPE_KEYS = ("topic", "channel", "client", "user_agent")
#: The fields with a column of their own; the others go to Details.
_SHOWN = frozenset(
    {"node", "role", "id", "kind", "since", "remaining", "until", "left", *SCOPE_KEYS}
)
#: The note when the TUI has no node control (it reads the nodes, not an admin service's).
NO_CONTROL = (
    "restart, crash and start need nsqbox up's admin service: "
    "nsqbox up --tui/--web, or --admin-http-address"
)
#: Actions that change the cluster, hidden by ``--read-only``.
FAULT_ACTIONS = frozenset({"add_fault", "lift", "lift_all", "node"})

_NODE_MESSAGES = {
    NodeAction.RESTART: (
        "It shuts down cleanly and starts again on the same ports with the same data. Its "
        "clients are disconnected (they reconnect); its faults end.",
        False,
    ),
    NodeAction.CRASH: (
        "It stops at once, without the clean-shutdown flush: messages in memory and in "
        "flight are lost, as with SIGKILL (what is on disk survives). It stays down until "
        "started (S).",
        True,
    ),
    NodeAction.START: ("It starts again on its ports, with its data.", False),
}


def _with_faults(
    fn: Callable[[FaultSource], Awaitable[object]],
) -> Callable[[Backend], Awaitable[Outcome]]:
    """An action (for :meth:`AdminHost.perform`) that calls ``fn`` with the backend's faults."""

    async def call(backend: Backend) -> Outcome:
        if backend.faults is None:
            raise FaultError(501, "NOT_IMPLEMENTED", "this cluster has no faults to start")
        await fn(backend.faults)
        return ()

    return call


def scope_text(fault: dict[str, Any]) -> str:
    """``topic=orders channel=billing``, or ``*`` for every one."""
    parts = [f"{key}={fault[key]}" for key in SCOPE_KEYS if fault.get(key) not in (None, "")]
    return " ".join(parts) or "*"


class FaultsScreen(OperableScreen):
    """Faults in force on every node, and the nodes; start, lift, restart, crash, start."""

    crumbs = "faults"
    DEFAULT_CSS = """
    FaultsScreen #faults-note {
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("a", "add_fault", "Add fault"),
        Binding("ctrl+d", "lift", "Lift"),
        Binding("X", "lift_all", "Lift all"),
        Binding("R", "node('restart')", "Restart node"),
        Binding("K", "node('crash')", "Crash node"),
        Binding("S", "node('start')", "Start node"),
    ]

    def __init__(self) -> None:
        super().__init__()
        #: The latest listing (None until read, or when there are no faults to read).
        self.listing: FaultListing | None = None
        #: Why the listing could not be read (None when it was).
        self.problem: str | None = None
        #: Listings read so far (for tests and the tour).
        self.loads = 0
        self._faults: dict[str, dict[str, Any]] = {}

    def compose_body(self) -> ComposeResult:
        """The faults table, then the nodes table and a line for warnings."""
        yield Static("Active faults", classes="section")
        yield StatsTable(id="faults")
        yield Static("Nodes", classes="section")
        yield StatsTable(id="fault-nodes")
        yield Static(id="faults-note")

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Read the faults again (each refresh, and after each action) while on screen."""
        if self.is_current:
            self._load()

    def on_screen_resume(self) -> None:
        """Back on screen: read the faults at once."""
        if self.host.snapshot is not None:
            self._load()

    @work(exclusive=True, group="faults", exit_on_error=False)
    async def _load(self) -> None:
        backend = self.host.backend
        source = backend.faults if backend is not None else None
        if source is None:
            self.listing, self.problem = None, "this cluster has no faults to list"
        else:
            try:
                self.listing, self.problem = await source.listing(), None
            except Exception as exc:  # FaultError, or the admin service went away
                self.problem = str(exc) or type(exc).__name__
        self.loads += 1
        self._draw()

    def _draw(self) -> None:
        listing = self.listing or FaultListing()
        tz = self.host.tz
        self._faults = {}
        rows = []
        for fault in listing.faults:
            key = f"{fault['node']}/{fault.get('id')}"
            self._faults[key] = fault
            scope = scope_text(fault)
            if not self.matches(fault["node"], str(fault.get("kind", "")), scope):
                continue
            since = fault.get("since")
            details = [f"{k}={v}" for k, v in fault.items() if k not in _SHOWN and v is not None]
            cells = (
                fault["node"],
                Text(str(fault.get("id", "")), justify="right"),
                Text(str(fault.get("kind", "")), style="bold yellow"),
                scope,
                self._left(fault),
                fmt.wall_clock(since, tz) if isinstance(since, int | float) else fmt.NONE,
                " ".join(details),
            )
            rows.append(Row(key, cells))
        self.query_one("#faults", StatsTable).show(FAULT_COLUMNS, rows)
        self.query_one("#fault-nodes", StatsTable).show(NODE_COLUMNS, self._node_rows(listing))
        note = Text()
        if self.problem is not None:
            note.append(f"✗ {self.problem}", "bold red")
        elif listing.control is None:
            note.append(NO_CONTROL, "dim")
        if listing.message:
            note.append(("\n" if note else "") + listing.message, "yellow")
        self.query_one("#faults-note", Static).update(safe_text(note))
        self.refresh_bindings()

    def _left(self, fault: dict[str, Any]) -> str:
        """``12s (until 15:40:02)``, ``1 command``, ``2 connections``, ``until lifted``."""
        left, until = left_text(fault), fault.get("until")
        if isinstance(until, int | float):
            return f"{left} (until {fmt.wall_clock(until, self.host.tz)})"
        return left

    def _node_rows(self, listing: FaultListing) -> list[Row]:
        """Every node listed or under control; its faults, and whether it runs."""
        control = {c.node: c for c in listing.control or ()}
        cells: list[tuple[str, str, str, Text]] = []
        for node in listing.nodes:
            if not node.supported:
                faults = Text(node.error, style="dim")
            elif node.error:
                faults = Text(f"✗ {node.error}", style="bold red")
            else:
                faults = fmt.number(node.faults)
            cells.append((node.node, node.role, node.hostname, faults))
        listed = {node.node for node in listing.nodes}
        cells += [
            (c.node, c.role, "", Text(fmt.NONE)) for c in control.values() if c.node not in listed
        ]
        rows = []
        for name, role, hostname, faults in cells:
            if not self.matches(name, role, hostname):
                continue
            up = control.get(name)
            state: Text | str = fmt.NONE if up is None else "running"
            if up is not None and not up.running:
                state = Text("DOWN", style="bold red")
            rows.append(Row(name, (name, role, hostname, faults, state)))
        return rows

    # -- selection ----------------------------------------------------------------------------

    def selected_fault(self) -> dict[str, Any] | None:
        """The fault under the cursor in the faults table."""
        key = self.query_one("#faults", StatsTable).selected_key
        return self._faults.get(key) if key is not None else None

    def selected_node(self) -> str | None:
        """The node under the cursor in the Nodes table, if node control lists it."""
        key = self.query_one("#fault-nodes", StatsTable).selected_key
        control = self.listing.control if self.listing is not None else None
        if key is None or not control or all(c.node != key for c in control):
            return None
        return key

    def binding_state(self) -> object:
        """What decides which keys are dimmed."""
        return (self.selected_fault() is None, self.selected_node() is None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide the actions in read-only mode; dim those without a selection."""
        if action in FAULT_ACTIONS and self.host.read_only:
            return False
        if action == "lift" and self.selected_fault() is None:
            return None
        if action == "node" and self.selected_node() is None:
            return None
        return super().check_action(action, parameters)

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    # -- actions ------------------------------------------------------------------------------

    def action_add_fault(self) -> None:
        """Ask for a fault, then start it."""
        listing = self.listing or FaultListing()
        nodes = [n.node for n in listing.nodes if n.supported and not n.error]
        fault = self.selected_fault()

        def start(request: FaultRequest | None) -> None:
            if request is not None:
                self.host.perform(
                    request.label,
                    _with_faults(lambda f: f.add(request.kind, request.node, request.params)),
                )

        screen = AddFaultScreen(
            nodes, fault["node"] if fault else "", (fault or {}).get("topic") or ""
        )
        self.app.push_screen(screen, start)

    def action_lift(self) -> None:
        """Lift the selected fault, after confirming."""
        fault = self.selected_fault()
        if fault is None:
            return
        node, fault_id = str(fault["node"]), str(fault.get("id"))
        what = f"fault {fault_id} ({fault.get('kind')} {scope_text(fault)}) on {node}"
        self._confirm_then(
            f"Lift {what}?",
            "The node behaves normally again for what this fault covered.",
            "Lift",
            f"lift {what}",
            _with_faults(lambda f: f.lift(node, fault_id)),
            danger=False,
        )

    def action_lift_all(self) -> None:
        """Lift every fault on every node, after confirming."""

        async def lift_all(faults: FaultSource) -> None:
            lifted, warning = await faults.lift_all()
            if warning:
                raise FaultError(502, f"lifted {lifted}; {warning}")

        count = len(self.listing.faults) if self.listing is not None else 0
        self._confirm_then(
            "Lift every fault?",
            f"The {fmt.plural(count, 'fault')} in force on every node end now.",
            "Lift all",
            "lift every fault",
            _with_faults(lift_all),
            danger=False,
        )

    def action_node(self, name: str) -> None:
        """Restart, crash or start the node selected in the Nodes table, after confirming."""
        node = self.selected_node()
        if node is None:
            return
        action = NodeAction(name)
        message, danger = _NODE_MESSAGES[action]
        self._confirm_then(
            f"{name.capitalize()} {node}?",
            message,
            name.capitalize(),
            f"{name} {node}",
            _with_faults(lambda f: f.node_action(action, node)),
            danger=danger,
        )
