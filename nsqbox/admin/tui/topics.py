"""The Topics view: every topic of the cluster, summed over its nodes (the home view).

What the counts mean follows NSQ. A topic's *depth* is its own queue: messages nsqd has not yet
copied to a channel (nsqadmin v1.3.0's topic page shows this as the topic's Depth); once a topic
has channels it is usually 0. Every channel then holds its own copy of each message, so a sum
over channels counts one message once per channel (one DPUB to a topic with two channels would
read "2 deferred"). The view shows instead what the busiest channel holds: the most any one
channel has queued, in flight and deferred (each summed over the nodes), so one published
message reads 1 whatever the number of channels. The Topic view lists every channel.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from . import format as fmt
from .cells import paused_cell
from .navigation import OpenTopic
from .operations import ACTION_BINDINGS, OperableScreen, Target
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..stats import TopicStats

__all__ = ["LEGEND", "TopicsScreen", "busiest"]

COLUMNS = (
    Column("topic", "Topic"),
    Column("depth", "Topic\ndepth"),
    Column("channel_depth", "Channel\ndepth"),
    Column("in_flight", "Channel\nin-flight"),
    Column("deferred", "Channel\ndeferred"),
    Column("messages", "Messages"),
    Column("rate", "Rate"),
    Column("trend", "Trend", width=12),
    Column("channels", "Channels"),
    Column("nodes", "Nodes"),
    Column("paused", "Paused"),
)


#: Under the table: what the counting columns count.
LEGEND = (
    "Topic depth: not yet copied to a channel · Channel columns: the most in any one channel "
    "(each holds a copy of every message)"
)


def busiest(topic: TopicStats) -> tuple[int, int, int]:
    """The most any one channel of ``topic`` has queued, in flight and deferred (0s when it
    has no channel): each channel holds its own copy of a message, so these are not summed."""
    channels = topic.channels
    return (
        max((c.depth for c in channels), default=0),
        max((c.in_flight_count for c in channels), default=0),
        max((c.deferred_count for c in channels), default=0),
    )


class TopicsScreen(OperableScreen):
    """Topics with their own depth, the busiest channel's depth, in-flight and deferred,
    messages, rate (and its trend), channels, nodes and paused."""

    DEFAULT_CSS = """
    TopicsScreen #legend {
        padding: 0 1;
        color: $text-muted;
    }
    """

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
        yield StatsTable(id="topics", header_height=2)
        yield Static(LEGEND, id="legend", markup=False)

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
                    *(Text(fmt.NONE, justify="right") for _ in range(5)),
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
                    *(fmt.number(n) for n in busiest(topic)),
                    fmt.number(topic.message_count),
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
