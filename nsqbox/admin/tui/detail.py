"""What the Topic and Channel views share: a summary, a rate plot, per-node rows, and a table.

A :class:`DetailScreen` shows one topic or channel: its summary line, its rate plot, a *Nodes*
table (one row per nsqd) and a second table — the topic's channels, the channel's clients —
named by :attr:`~DetailScreen.rows_id` and :attr:`~DetailScreen.rows_title`. That second table
has the focus and is the one Enter, the filter and most actions refer to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from . import format as fmt
from .operations import OperableScreen
from .safe import safe
from .widgets import Column, RatePlot, StatsTable

if TYPE_CHECKING:
    from ..stats import Latency

__all__ = ["DetailScreen"]


class DetailScreen(OperableScreen):
    """One topic or channel: summary, rate plot, per-node rows and a second table."""

    DEFAULT_CSS = """
    DetailScreen #nodes {
        height: auto;
        max-height: 8;
    }
    DetailScreen #summary {
        padding: 0 1;
    }
    """

    #: The id of the second table (``channels``, ``clients``).
    rows_id: ClassVar[str] = "rows"
    #: Its section title.
    rows_title: ClassVar[str] = "Rows"

    def compose_body(self) -> ComposeResult:
        """Summary, plot, nodes, and the second table."""
        yield Static(id="summary")
        yield RatePlot(id="rate")
        yield Static("Nodes", classes="section")
        yield StatsTable(id="nodes")
        yield Static(self.rows_title, classes="section")
        yield StatsTable(id=self.rows_id)

    def on_mount(self) -> None:
        """The second table has the focus."""
        self.main_table.focus()

    @property
    def main_table(self) -> StatsTable:
        """The second table."""
        return self.query_one(f"#{self.rows_id}", StatsTable)

    def show_missing(
        self, message: str, node_columns: tuple[Column, ...], columns: tuple[Column, ...]
    ) -> None:
        """Say that the topic or channel is gone, and empty both tables."""
        self.query_one("#summary", Static).update(safe(message, "bold red"))
        self.query_one("#nodes", StatsTable).show(node_columns, [])
        self.main_table.show(columns, [])

    @staticmethod
    def summary_tail(text: Text, latency: Latency, paused: bool) -> Text:
        """Append the end-to-end latency (when reported) and PAUSED to a summary line."""
        if fmt.has_latency(latency):
            text.append(f" · e2e {fmt.latency(latency, (0.5, 0.99))}")
        if paused:
            text.append(" · PAUSED", "bold yellow")
        return text
