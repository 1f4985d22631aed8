"""The Topic view: one topic's rate, its rows per node, and its channels.

Actions apply to the row under the cursor of the focused table: a channel in the channels
table, the topic in the nodes table (where ``T`` tombstones the topic on that node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.binding import Binding
from textual.widgets import DataTable, Static

from . import format as fmt
from .cells import channel_cells, paused_cell
from .detail import DetailScreen
from .navigation import OpenChannel, OpenMessages
from .operations import ACTION_BINDINGS, Target
from .safe import safe_text
from .widgets import Column, RatePlot, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..stats import TopicStats

__all__ = ["TopicScreen"]

NODE_COLUMNS = (
    Column("node", "Node"),
    Column("hostname", "Hostname"),
    Column("depth", "Topic depth"),
    Column("memory", "Memory"),
    Column("disk", "Disk"),
    Column("messages", "Messages"),
    Column("rate", "Rate"),
    Column("channels", "Channels"),
    Column("paused", "Paused"),
)
CHANNEL_COLUMNS = (
    Column("channel", "Channel"),
    Column("depth", "Depth"),
    Column("in_flight", "In flight"),
    Column("deferred", "Deferred"),
    Column("requeued", "Requeued"),
    Column("timed_out", "Timed out"),
    Column("messages", "Messages"),
    Column("rate", "Rate"),
    Column("connections", "Connections"),
    Column("paused", "Paused"),
)
#: Added to the channels table when some channel reports end-to-end latency.
LATENCY_COLUMN = Column("e2e", "E2E latency")


class TopicScreen(DetailScreen):
    """A topic: summary, rate plot, per-node rows and channels."""

    BINDINGS = [
        ACTION_BINDINGS["pause"],
        ACTION_BINDINGS["empty"],
        ACTION_BINDINGS["delete"],
        ACTION_BINDINGS["tombstone"],
        ACTION_BINDINGS["create"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
        Binding("m", "messages", "Messages"),
    ]
    creates_channels = True
    rows_id = "channels"
    rows_title = "Channels"

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self.crumbs = f"topics / {topic}"

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Fill everything from the topic's cluster-wide row."""
        topic = snapshot.topic(self.topic)
        if topic is None:
            message = f"topic {self.topic}: not on any node (deleted?)"
            self.show_missing(message, NODE_COLUMNS, CHANNEL_COLUMNS)
            return
        self.query_one("#summary", Static).update(safe_text(self._summary(topic)))
        self.query_one(RatePlot).plot(f"topic {self.topic}", self.rate_series(self.topic))
        node_rows = [
            Row(
                row.node,
                (
                    row.node,
                    row.hostname,
                    fmt.number(row.depth),
                    fmt.number(row.memory_depth),
                    fmt.number(row.backend_depth),
                    fmt.number(row.message_count),
                    Text(self.rate_cell(self.topic, None, row.node), justify="right"),
                    fmt.number(len(row.channels)),
                    paused_cell(row.paused),
                ),
            )
            for row in topic.nodes
        ]
        self.query_one("#nodes", StatsTable).show(NODE_COLUMNS, node_rows)
        channels = sorted(topic.channels, key=lambda c: c.channel_name)
        latency = fmt.has_latency(*(c.e2e_processing_latency for c in channels))
        columns = (*CHANNEL_COLUMNS, LATENCY_COLUMN) if latency else CHANNEL_COLUMNS
        rows = []
        for channel in channels:
            if not self.matches(channel.channel_name):
                continue
            rate = self.rate_cell(channel.topic_name, channel.channel_name)
            cells: list[RenderableType] = [channel.channel_name, *channel_cells(channel, rate)]
            if latency:
                cells.append(fmt.latency(channel.e2e_processing_latency))
            rows.append(Row(channel.channel_name, tuple(cells)))
        self.query_one("#channels", StatsTable).show(columns, rows)

    def _summary(self, topic: TopicStats) -> Text:
        text = Text()
        text.append(f"topic {self.topic}", "bold")
        text.append(
            f" · topic depth {fmt.count(topic.depth)} (memory {fmt.count(topic.memory_depth)}, "
            f"disk {fmt.count(topic.backend_depth)}) · {fmt.plural(topic.message_count, 'message')}"
            f" · {fmt.plural(len(topic.channels), 'channel')} · "
            f"{fmt.plural(len(topic.nodes), 'node')}"
        )
        return self.summary_tail(text, topic.e2e_processing_latency, topic.paused)

    def target(self) -> Target | None:
        """The selected channel, or the topic (on the selected node in the nodes table)."""
        snapshot = self.host.snapshot
        topic = snapshot.topic(self.topic) if snapshot is not None else None
        if topic is None:
            return None
        nodes = self.query_one("#nodes", StatsTable)
        channels = self.query_one("#channels", StatsTable)
        if channels.has_focus and channels.selected_key is not None:
            channel = topic.channel(channels.selected_key)
            if channel is not None:
                return Target(self.topic, channel.channel_name, None, channel.paused, channel.depth)
        node = nodes.selected_key if nodes.has_focus else None
        return Target(self.topic, None, node, topic.paused, topic.depth)

    @on(DataTable.RowSelected, "#channels")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(OpenChannel(self.topic, str(event.row_key.value)))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    def on_descendant_focus(self) -> None:
        """What the keys act on depends on the focused table."""
        self.refresh_bindings()

    def action_messages(self) -> None:
        """List the messages the topic itself holds (nothing is taken)."""
        self.post_message(OpenMessages(self.topic))
