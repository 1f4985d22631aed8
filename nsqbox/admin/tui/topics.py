"""The Topics view: every topic of the cluster, summed over its nodes (the home view)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable

from . import format as fmt
from .cells import paused_cell
from .navigation import OpenTopic
from .operations import ACTION_BINDINGS, OperableScreen, Target
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot

__all__ = ["TopicsScreen"]

COLUMNS = (
    Column("topic", "Topic"),
    Column("depth", "Depth"),
    Column("messages", "Messages"),
    Column("in_flight", "In-Flight"),
    Column("deferred", "Deferred"),
    Column("rate", "Rate"),
    Column("trend", "Trend", width=12),
    Column("channels", "Channels"),
    Column("nodes", "Nodes"),
    Column("paused", "Paused"),
)


class TopicsScreen(OperableScreen):
    """Topics with depth, messages, in-flight and deferred (summed over channels), rate (and
    its trend), channels, nodes and paused."""

    crumbs = "topics"
    BINDINGS = [
        ACTION_BINDINGS["pause"],
        ACTION_BINDINGS["empty"],
        ACTION_BINDINGS["delete"],
        ACTION_BINDINGS["create"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
    ]

    def compose_body(self) -> ComposeResult:
        """One table."""
        yield StatsTable(id="topics")

    def show(self, snapshot: ClusterSnapshot) -> None:
        """One row per topic; topics only lookupd knows show with no nodes."""
        rows = []
        for name in snapshot.topic_names:
            topic = snapshot.topic(name)
            channels = [c.channel_name for c in topic.channels] if topic else []
            if not self.matches(name, *channels):
                continue
            if topic is None:
                cells: tuple[Text | str, ...] = (
                    name,
                    *(Text(fmt.NONE, justify="right") for _ in range(4)),
                    fmt.NONE,
                    "",
                    "",
                    Text("lookupd only", style="dim"),
                    "",
                )
            else:
                cells = (
                    name,
                    fmt.number(topic.depth),
                    fmt.number(topic.message_count),
                    fmt.number(sum(c.in_flight_count for c in topic.channels)),
                    fmt.number(sum(c.deferred_count for c in topic.channels)),
                    Text(self.rate_cell(name), justify="right"),
                    Text(fmt.spark(self.rate_series(name)), style="green"),
                    self.joined(sorted(channels)),
                    Text(str(len(topic.nodes)), justify="right"),
                    paused_cell(topic.paused),
                )
            rows.append(Row(name, cells))
        self.query_one("#topics", StatsTable).show(COLUMNS, rows)

    def target(self) -> Target | None:
        """The selected topic."""
        snapshot = self.host.snapshot
        name = self.query_one("#topics", StatsTable).selected_key
        if name is None or snapshot is None:
            return None
        row = snapshot.topic(name)
        return Target(name, paused=row.paused if row else False, depth=row.depth if row else 0)

    @on(DataTable.RowSelected, "#topics")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(OpenTopic(str(event.row_key.value)))

    @on(DataTable.RowHighlighted, "#topics")
    def _moved(self) -> None:
        self.refresh_bindings()
