"""The admin TUI's app: views as modes, the refresh loop, actions in the background.

:class:`AdminApp` opens a :class:`~.backend.Backend` (a :data:`~.backend.BackendFactory`), refreshes
it every ``interval`` seconds in an exclusive worker and publishes each snapshot in its
``snapshot`` reactive, which every view watches. Modes hold the view stacks: *topics* (Topics,
Topic, Channel), *nodes* (Nodes, Node, Topic) and *faults*; ``t``, ``n`` and ``f`` switch. A view
asks for another with a message (:mod:`.navigation`) and the app pushes it, so only the app
imports every view. An action runs in its own worker; its outcome is a notification (and an
:class:`ActionResult` in :attr:`AdminApp.results`), and a refresh follows at once. Nothing a
host does — refuse, time out, vanish — raises out of the app. ``ctrl+s``, in every view, has
the box save a snapshot of itself (:mod:`.snapshot_save`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from contextlib import suppress
from dataclasses import dataclass
from datetime import datetime, tzinfo
from functools import partial
from pathlib import Path, PurePosixPath
from typing import Any

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.reactive import reactive
from textual.screen import ModalScreen, Screen
from textual.worker import WorkerCancelled, WorkerFailed

from ...broker.clock import BrokerClock
from ...process.terminal_text import visible
from ...snapshot.confined import default_save_name
from ..model import ClusterSnapshot
from .backend import Backend, BackendFactory, Outcome, SnapshotClientError
from .channel import ChannelScreen
from .faults import FaultsScreen
from .help import HelpScreen
from .journey import JourneyScreen
from .messages import MessagesScreen
from .navigation import (
    OpenChannel,
    OpenJourney,
    OpenMessages,
    OpenNode,
    OpenTopic,
    OpenTroubles,
)
from .nodes import NodeScreen, NodesScreen
from .snapshot_save import SaveSnapshotScreen, saved_text
from .topic import TopicScreen
from .topics import TopicsScreen
from .troubles import TroublesScreen

__all__ = ["ActionResult", "AdminApp"]

#: App actions that make no sense while a modal (a confirmation, a form) is open.
_NOT_UNDER_MODALS = frozenset(
    {"show_view", "help", "refresh_now", "quit", "command_palette", "save_snapshot"}
)


@dataclass(frozen=True, slots=True)
class ActionResult:
    """How one action went: what it was, and the errors of the hosts that failed."""

    label: str
    errors: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """Whether every host did it."""
        return not self.errors


class AdminApp(App[int]):
    """nsqadmin in a terminal, for nsqbox or any NSQ cluster.

    ``backend`` opens the cluster (None: :meth:`connect` is called later, as ``nsqbox up --tui``
    does once its servers listen). ``interval`` is seconds between refreshes; ``read_only``
    hides every action that changes the cluster; ``tz`` is the zone for clock times (default:
    local). ``web_session`` (a browser tab's TUI) saves files only under ``save_dir``.
    """

    TITLE = "nsqbox"
    MODES = {"topics": TopicsScreen, "nodes": NodesScreen, "faults": FaultsScreen}
    DEFAULT_MODE = "topics"
    BINDINGS = [
        Binding("t", "show_view('topics')", "Topics"),
        Binding("n", "show_view('nodes')", "Nodes"),
        Binding("f", "show_view('faults')", "Faults"),
        Binding("r", "refresh_now", "Refresh"),
        # in the help view and the command palette; the footer keeps its room for ? and q
        Binding(
            "ctrl+s",
            "save_snapshot",
            "Save snapshot",
            show=False,
            tooltip="Have the box save a snapshot of itself",
        ),
        Binding("question_mark", "help", "Help"),
        Binding("colon", "command_palette", "Commands", show=False),
        Binding("q", "quit", "Quit"),
    ]

    #: The latest snapshot (None until the first refresh); the views watch it.
    snapshot: reactive[ClusterSnapshot | None] = reactive(None, always_update=True, init=False)

    def __init__(
        self,
        backend: BackendFactory | None,
        *,
        interval: float = 2.0,
        read_only: bool = False,
        tz: tzinfo | None = None,
        web_session: bool = False,
        save_dir: Path | None = None,
    ) -> None:
        super().__init__()
        if interval <= 0:
            raise ValueError("interval must be positive")
        self.interval = interval
        self.read_only = read_only
        #: A browser tab's TUI (``--web``): it saves files only under ``save_dir``.
        self.web_session = web_session
        self.save_dir = save_dir
        self.tz = tz
        #: The box's broker clock (``nsqbox up --tui``): the status line shows it when manual.
        self.broker_clock: BrokerClock | None = None
        #: A line the status line keeps under its first (``nsqbox up --tui``: the box's
        #: addresses), instead of a notification that would cover the table.
        self.notice: str | None = None
        self.backend: Backend | None = None
        self.refresh_error: str | None = None
        #: Refreshes done (for tests and the status line).
        self.refresh_count = 0
        #: Every action's outcome, in the order they finished.
        self.results: list[ActionResult] = []
        self._factory = backend
        self._wake = asyncio.Event()

    def on_mount(self) -> None:
        """Start refreshing, if there is a cluster to read yet."""
        if self._factory is not None:
            self.connect(self._factory)

    async def on_unmount(self) -> None:
        """Let the cancelled workers finish (the refresh loop closes its HTTP client)."""
        for worker in list(self.workers):
            with suppress(WorkerCancelled, WorkerFailed):
                await worker.wait()

    # -- refreshing ---------------------------------------------------------------------------

    def connect(self, backend: BackendFactory) -> None:
        """Read the cluster ``backend`` opens, from now on (replacing any before)."""
        self._factory = backend
        self._poll(backend)

    @work(exclusive=True, group="refresh", exit_on_error=False)
    async def _poll(self, factory: BackendFactory) -> None:
        try:
            async with factory() as backend:
                self.backend = backend
                while True:
                    self._wake.clear()
                    await self._refresh_once(backend)
                    try:
                        async with asyncio.timeout(self.interval):
                            await self._wake.wait()
                    except TimeoutError:
                        pass
        except Exception as exc:  # the backend could not even be opened
            self.refresh_error = f"{type(exc).__name__}: {exc}"
            self.snapshot = self.snapshot  # redraw the status lines
        finally:
            self.backend = None

    async def _refresh_once(self, backend: Backend) -> None:
        try:
            snapshot = await backend.refresh()
        except Exception as exc:  # refresh() reports host failures itself; this is the rest
            self.refresh_error = f"{type(exc).__name__}: {exc}"
            self.snapshot = self.snapshot
            return
        self.refresh_error = None
        self.refresh_count += 1
        self.snapshot = snapshot

    def refresh_now(self) -> None:
        """Refresh at once instead of at the end of the interval."""
        self._wake.set()

    def action_refresh_now(self) -> None:
        """Refresh at once."""
        self.refresh_now()

    # -- actions ------------------------------------------------------------------------------

    def perform(self, label: str, call: Callable[[Backend], Awaitable[Outcome]]) -> None:
        """Run ``call`` against the cluster in the background; report and refresh after."""
        if self.read_only:
            self.notify(visible(f"read-only: not doing {label}"), severity="warning", markup=False)
            return
        self._perform(label, call)

    @work(group="actions", exit_on_error=False)
    async def _perform(self, label: str, call: Callable[[Backend], Awaitable[Outcome]]) -> None:
        backend = self.backend
        if backend is None:
            errors: tuple[str, ...] = ("not connected to the cluster yet",)
        else:
            try:
                errors = tuple(str(e) for e in await call(backend))
            except Exception as exc:  # ClusterError (no node found), or a bug in a backend
                errors = (str(exc) or type(exc).__name__,)
        self.results.append(ActionResult(label, errors))
        # labels hold names, errors hold a peer's words: text, not markup, controls visible
        if errors:
            self.notify(
                visible("\n".join(errors)),
                title=visible(f"{label}: failed"),
                severity="error",
                timeout=15,
                markup=False,
            )
        else:
            self.notify(visible(label), title="done", markup=False)
        self.refresh_now()

    # -- snapshots ----------------------------------------------------------------------------

    def action_save_snapshot(self) -> None:
        """Ask for a file name, then have the box save a snapshot of itself under it."""
        backend = self.backend
        if backend is None:
            self.notify("not connected to the cluster yet", severity="warning")
            return
        info = backend.snapshots
        name = default_save_name(datetime.now(self.tz))
        screen = SaveSnapshotScreen(name, info.directory if info is not None else None)

        def asked(chosen: PurePosixPath | None) -> None:
            if chosen is not None:
                self._save_snapshot(str(chosen))

        self.push_screen(screen, asked)

    @work(group="actions", exit_on_error=False)
    async def _save_snapshot(self, name: str) -> None:
        label = f"save snapshot {name}"
        backend = self.backend
        try:
            if backend is None:
                raise SnapshotClientError(0, "not connected to the cluster yet")
            saved = await backend.save_snapshot(name)
        except SnapshotClientError as exc:
            self.results.append(ActionResult(label, (exc.message,)))
            self.notify(
                visible(exc.message),
                title=visible(f"{label}: failed"),
                severity="error",
                timeout=15,
                markup=False,
            )
            return
        self.results.append(ActionResult(label))
        text = saved_text(saved.file, saved.directory, saved.messages, saved.topics, saved.channels)
        self.notify(visible(text), title="snapshot saved", timeout=10, markup=False)

    # -- navigation, help, palette ------------------------------------------------------------

    def action_show_view(self, mode: str) -> None:
        """Show the Topics or the Nodes view (the top of its stack when already there)."""
        if self.current_mode == mode:
            while len(self.screen_stack) > 1:
                self.pop_screen()
        else:
            self.switch_mode(mode)

    @on(OpenTopic)
    def _open_topic(self, message: OpenTopic) -> None:
        self.push_screen(TopicScreen(message.topic))

    @on(OpenChannel)
    def _open_channel(self, message: OpenChannel) -> None:
        self.push_screen(ChannelScreen(message.topic, message.channel))

    @on(OpenMessages)
    def _open_messages(self, message: OpenMessages) -> None:
        self.push_screen(MessagesScreen(message.topic, message.channel))

    @on(OpenJourney)
    def _open_journey(self, message: OpenJourney) -> None:
        self.push_screen(JourneyScreen(message.msg_id, message.crumbs))

    @on(OpenTroubles)
    def _open_troubles(self, message: OpenTroubles) -> None:
        self.push_screen(TroublesScreen(message.topic, message.channel))

    @on(OpenNode)
    def _open_node(self, message: OpenNode) -> None:
        self.push_screen(NodeScreen(message.node))

    def action_help(self) -> None:
        """Show the keys of the current view, then the app's (not the widgets' own)."""
        screen = self.screen
        active = [
            a
            for a in screen.active_bindings.values()
            if a.binding.description and a.enabled and a.node in (screen, self)
        ]
        active.sort(key=lambda a: (a.node is self, not a.binding.show))
        keys = [(self.get_key_display(a.binding), a.binding.description) for a in active]
        title = f"nsqbox: {screen.sub_title or 'keys'}"
        self.push_screen(HelpScreen(title, _unique(keys)))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Keep the app's keys away from confirmations and forms; no saving when read-only
        (a save writes a file on the box's machine)."""
        if action == "save_snapshot" and self.read_only:
            return False
        return not (action in _NOT_UNDER_MODALS and isinstance(self.screen, ModalScreen))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every action the view offers (as its keys do), then Textual's own commands."""
        seen = set()
        for active in screen.active_bindings.values():
            binding = active.binding
            if not binding.description or not active.enabled or binding.action in seen:
                continue
            seen.add(binding.action)
            yield SystemCommand(
                binding.description,
                f"{binding.tooltip or binding.description} (key: {self.get_key_display(binding)})",
                partial(self.run_action, binding.action, active.node),
            )
        yield from super().get_system_commands(screen)


def _unique(pairs: list[tuple[str, str]]) -> list[tuple[str, str]]:
    """Drop repeated descriptions (a key bound on both the view and the app)."""
    seen: set[str] = set()
    out = []
    for key, description in pairs:
        if description not in seen:
            seen.add(description)
            out.append((key, description))
    return out
