"""What every cluster view shares: header, filter, status line, footer, and live snapshots.

A view subclasses :class:`ClusterScreen`, composes its tables in
:meth:`~ClusterScreen.compose_body` and fills them in :meth:`~ClusterScreen.show`, which runs on
mount and after every refresh (the app's ``snapshot`` is watched). ``/`` opens the filter (its
text is :attr:`~ClusterScreen.filter_text`, matched case-insensitively by
:meth:`~ClusterScreen.matches`); Esc clears it, and otherwise goes back to the previous view.

The screens reach the app through the :class:`AdminHost` protocol, so they do not import it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from datetime import datetime, tzinfo
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, cast

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, Input

from ...process.terminal_text import visible
from . import format as fmt
from .widgets import StatsTable, StatusLine

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from .backend import Backend, Outcome

__all__ = ["AdminHost", "ClusterScreen"]


class AdminHost(Protocol):
    """What a view uses of the app (:class:`~nsqbox.admin.tui.app.AdminApp`)."""

    snapshot: ClusterSnapshot | None
    backend: Backend | None
    read_only: bool
    #: A browser tab's TUI (``--web``): saving goes only under ``save_dir`` (None: nowhere).
    web_session: bool
    save_dir: Path | None
    interval: float
    tz: tzinfo | None
    #: Why the last refresh failed as a whole (None when it worked).
    refresh_error: str | None
    #: A line the status line keeps under its first (``nsqbox up --tui``: where the box
    #: listens), or None.
    notice: str | None

    def perform(self, label: str, call: Callable[[Backend], Awaitable[Outcome]]) -> None:
        """Run an action against the cluster in the background and report how it went."""
        ...

    def refresh_now(self) -> None:
        """Refresh at once instead of at the next interval."""
        ...


class ClusterScreen(Screen[None]):
    """A view of the cluster that follows the app's snapshots."""

    DEFAULT_CSS = """
    ClusterScreen #filter {
        display: none;
        border: tall $accent;
    }
    ClusterScreen #filter.-shown {
        display: block;
    }
    ClusterScreen .section {
        padding: 0 1;
        text-style: bold;
        color: $accent;
    }
    """

    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("slash", "filter", "Filter"),
    ]

    #: Shown in the header after the app's title.
    crumbs: str = ""

    def __init__(self) -> None:
        super().__init__()
        self.filter_text = ""
        #: The snapshot the view shows (None before the first).
        self.drawn: ClusterSnapshot | None = None
        self._binding_state: object = None

    # -- layout -------------------------------------------------------------------------------

    def compose(self) -> ComposeResult:
        """Header, the view's own widgets, filter, status line and footer."""
        yield Header(icon="◆")
        yield from self.compose_body()
        yield Input(placeholder="filter (Esc clears)", id="filter")
        yield StatusLine()
        yield Footer()

    def compose_body(self) -> ComposeResult:
        """The view's tables and plots."""
        yield from ()

    def on_mount(self) -> None:
        """Follow the app's snapshots (the first one, if any, is shown at once)."""
        self.sub_title = visible(self.crumbs)  # the header shows it as text, not markup
        self.watch(self.app, "snapshot", self._snapshot_changed, init=True)

    @property
    def host(self) -> AdminHost:
        """The app, as the views use it."""
        return cast(AdminHost, self.app)

    @property
    def main_table(self) -> StatsTable:
        """The table Enter, the filter and most actions refer to (the first one)."""
        return self.query(StatsTable).first()

    def _snapshot_changed(self, snapshot: ClusterSnapshot | None) -> None:
        self.redraw()

    def redraw(self) -> None:
        """Show the latest snapshot again (after a refresh, or when the filter changes)."""
        snapshot = self.host.snapshot
        if snapshot is not None:
            self.show(snapshot)
        self.drawn = snapshot
        self._show_status(snapshot)
        state = self.binding_state()
        if state != self._binding_state:  # redrawing the footer each refresh is costly
            self._binding_state = state
            self.refresh_bindings()

    def binding_state(self) -> object:
        """What the footer's keys depend on; they are redrawn when it changes."""
        return None

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Fill the view's widgets from ``snapshot``."""

    # -- status line --------------------------------------------------------------------------

    def _show_status(self, snapshot: ClusterSnapshot | None) -> None:
        host = self.host
        parts = [host.backend.description if host.backend is not None else "connecting…"]
        errors: list[str] = []
        if snapshot is not None:
            parts += [
                fmt.plural(len(snapshot.nodes), "node"),
                fmt.plural(len(snapshot.topics), "topic"),
                f"every {host.interval:g}s",
                f"updated {fmt.wall_clock(snapshot.wall_time, host.tz)}",
            ]
            errors = [f"✗ {e.address}: {e.message}" for e in snapshot.errors]
        if host.refresh_error is not None:
            errors.append(f"✗ refresh failed: {host.refresh_error}")
        clock = getattr(host, "broker_clock", None)
        if clock is not None and clock.manual:  # broker time, when it is not real time
            when = datetime.fromtimestamp(clock.wall(), host.tz)
            parts.append(f"broker time {when:%Y-%m-%d %H:%M:%S}")
        loaded = self._loaded(snapshot)
        if loaded:
            parts.append(loaded)
        if self.filter_text:
            parts.append(f"filter: {self.filter_text}")
        if host.read_only:
            parts.append("READ-ONLY")
        notes = [host.notice] if host.notice else []
        self.query_one(StatusLine).set(" · ".join(parts), errors, notes)

    def _loaded(self, snapshot: ClusterSnapshot | None) -> str:
        """``loaded from FILE at 12:09:36`` (a date too when not the day of the last refresh):
        the box's last load, as its admin service said; "" when none."""
        host = self.host
        info = host.backend.snapshots if host.backend is not None else None
        if info is None or info.loaded is None:
            return ""
        loaded = info.loaded
        when = datetime.fromtimestamp(loaded.loaded_at_ns / 1e9, host.tz)
        today = datetime.fromtimestamp(snapshot.wall_time, host.tz) if snapshot else None
        at = (
            f"{when:%H:%M:%S}"
            if today and today.date() == when.date()
            else f"{when:%Y-%m-%d %H:%M}"
        )
        text = f"loaded from {loaded.file or 'a snapshot'} at {at}"
        return text + " (replace)" if loaded.replace else text

    # -- filter -------------------------------------------------------------------------------

    def matches(self, *texts: str) -> bool:
        """Whether a row showing ``texts`` passes the filter."""
        needle = self.filter_text.lower()
        return not needle or any(needle in t.lower() for t in texts)

    def action_filter(self) -> None:
        """Show the filter input and type into it."""
        box = self.query_one("#filter", Input)
        box.add_class("-shown")
        box.focus()

    @on(Input.Changed, "#filter")
    def _filter_changed(self, event: Input.Changed) -> None:
        self.filter_text = event.value.strip()
        self.redraw()

    @on(Input.Submitted, "#filter")
    def _filter_done(self) -> None:
        self.main_table.focus()

    def action_back(self) -> None:
        """Clear the filter if there is one, else go back to the previous view."""
        box = self.query_one("#filter", Input)
        if self.filter_text or box.has_focus:
            box.value = ""
            box.remove_class("-shown")
            self.filter_text = ""
            self.main_table.focus()
            self.redraw()
        elif len(self.app.screen_stack) > 1:
            self.app.pop_screen()

    # -- helpers for the views ----------------------------------------------------------------

    def rate_cell(self, topic: str, channel: str | None = None, node: str = "*") -> str:
        """The current rate of a topic or channel, formatted."""
        backend = self.host.backend
        return fmt.rate(backend.rate(topic, channel, node=node) if backend else None)

    def rate_series(self, topic: str, channel: str | None = None) -> list[float | None]:
        """The rate history of a topic or channel (empty before the backend is open)."""
        backend = self.host.backend
        return backend.rate_series(topic, channel) if backend else []

    @staticmethod
    def joined(values: Iterable[str], limit: int = 3) -> str:
        """The first ``limit`` values and how many more: ``a, b, c +2``."""
        items: Sequence[str] = list(values)
        text = ", ".join(items[:limit])
        return f"{text} +{len(items) - limit}" if len(items) > limit else text
