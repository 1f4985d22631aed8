"""One listed message, opened: where it is, its counters, and its body shown whole.

The body is pretty-printed JSON when it parses, text when it is UTF-8, a hex dump otherwise
(:func:`~.bodies.render_body`). ``R`` republishes a copy (:func:`~.message_actions.republish`),
``j`` opens its journey (:mod:`.journey`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from ...process.terminal_text import visible
from .base import AdminHost
from .bodies import render_body
from .message_actions import republish
from .navigation import OpenJourney
from .peeked import Listed
from .safe import safe

__all__ = ["MessageScreen"]


class MessageScreen(Screen[None]):
    """A message's details over its whole (listed) body."""

    DEFAULT_CSS = """
    MessageScreen #details {
        padding: 0 1;
        height: auto;
    }
    MessageScreen #kind {
        padding: 0 1;
        color: $accent;
        text-style: bold;
    }
    MessageScreen VerticalScroll {
        height: 1fr;
        border: round $primary;
        padding: 0 1;
    }
    """
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("R", "republish", "Republish"),
        Binding("j", "journey", "Journey"),
    ]

    def __init__(self, message: Listed, nodes: Sequence[str], topic: str, crumbs: str) -> None:
        """Show ``message``; ``nodes`` and ``topic`` are what republishing proposes."""
        super().__init__()
        self.message = message
        self.nodes = list(nodes)
        self.topic = topic
        self.crumbs = crumbs

    @property
    def host(self) -> AdminHost:
        """The app, as the views use it."""
        return cast(AdminHost, self.app)

    def compose(self) -> ComposeResult:
        """Header, details, the body's kind, the body, footer."""
        kind, body = render_body(self.message.body)
        details = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        details.add_column(style="bold cyan", no_wrap=True)
        details.add_column()
        for label, value in self.message.details(self.host.tz):
            details.add_row(label, safe(value))
        yield Header(icon="◆")
        yield Static(details, id="details")
        yield Static(Text(f"body: {kind.value}"), id="kind")
        with VerticalScroll():
            yield Static(body, id="body")
        yield Footer()

    def on_mount(self) -> None:
        """Name the message in the header."""
        self.sub_title = visible(f"{self.crumbs} / {self.message.id}")

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No republishing in read-only mode."""
        return not (action == "republish" and self.host.read_only)

    def action_back(self) -> None:
        """Back to the list."""
        self.app.pop_screen()

    def action_republish(self) -> None:
        """Publish a copy of the message to a topic (asks which, then confirms)."""
        republish(self, self.host, self.message, self.nodes, self.topic)

    def action_journey(self) -> None:
        """Open the message's journey: what happened to it, on every node."""
        self.post_message(OpenJourney(self.message.id, self.crumbs))
