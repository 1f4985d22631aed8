"""The Topic view: one topic's rate, its rows per node, and its channels.

Actions apply to the row under the cursor of the focused table: a channel in the channels
table, the topic in the nodes table (where ``T`` tombstones the topic on that node).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from . import format as fmt
from .operations import ACTION_BINDINGS, OperableScreen, Target
from .widgets import Column, RatePlot, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..stats import ChannelStats, TopicStats

__all__ = ["TopicScreen"]

NODE_COLUMNS = (
    Column("node", "Node"),
    Column("hostname", "Hostname"),
    Column("depth", "Depth"),
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


def paused_cell(paused: bool) -> Text | str:
    """``paused`` in bold yellow, or nothing."""
    return Text("paused", style="bold yellow") if paused else ""


def channel_cells(
    screen: OperableScreen, channel: ChannelStats, node: str = "*"
) -> list[RenderableType]:
    """The counters every channel row shows, from depth to paused."""
    return [
        fmt.number(channel.depth),
        fmt.number(channel.in_flight_count),
        fmt.number(channel.deferred_count),
        fmt.number(channel.requeue_count),
        fmt.number(channel.timeout_count),
        fmt.number(channel.message_count),
        Text(screen.rate_cell(channel.topic_name, channel.channel_name, node), justify="right"),
        fmt.number(channel.client_count),
        paused_cell(channel.paused),
    ]


class TopicScreen(OperableScreen):
    """A topic: summary, rate plot, per-node rows and channels."""

    DEFAULT_CSS = """
    TopicScreen #nodes {
        height: auto;
        max-height: 8;
    }
    TopicScreen #summary {
        padding: 0 1;
    }
    """
    BINDINGS = [
        ACTION_BINDINGS["pause"],
        ACTION_BINDINGS["empty"],
        ACTION_BINDINGS["delete"],
        ACTION_BINDINGS["tombstone"],
        ACTION_BINDINGS["create"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
    ]
    creates_channels = True

    def __init__(self, topic: str) -> None:
        super().__init__()
        self.topic = topic
        self.crumbs = f"topics / {topic}"

    def compose_body(self) -> ComposeResult:
        """Summary, plot, nodes, channels."""
        yield Static(id="summary")
        yield RatePlot(id="rate")
        yield Static("Nodes", classes="section")
        yield StatsTable(id="nodes")
        yield Static("Channels", classes="section")
        yield StatsTable(id="channels")

    def on_mount(self) -> None:
        """The channels table has the focus (Enter opens a channel)."""
        self.query_one("#channels", StatsTable).focus()

    @property
    def main_table(self) -> StatsTable:
        """The channels table."""
        return self.query_one("#channels", StatsTable)

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Fill everything from the topic's cluster-wide row."""
        topic = snapshot.topic(self.topic)
        summary = self.query_one("#summary", Static)
        if topic is None:
            summary.update(Text(f"topic {self.topic}: not on any node (deleted?)", "bold red"))
            self.query_one("#nodes", StatsTable).show(NODE_COLUMNS, [])
            self.query_one("#channels", StatsTable).show(CHANNEL_COLUMNS, [])
            return
        summary.update(self._summary(topic))
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
            cells: list[RenderableType] = [channel.channel_name, *channel_cells(self, channel)]
            if latency:
                cells.append(fmt.latency(channel.e2e_processing_latency))
            rows.append(Row(channel.channel_name, tuple(cells)))
        self.query_one("#channels", StatsTable).show(columns, rows)

    def _summary(self, topic: TopicStats) -> Text:
        text = Text()
        text.append(f"topic {self.topic}", "bold")
        text.append(
            f" · depth {fmt.count(topic.depth)} (memory {fmt.count(topic.memory_depth)}, "
            f"disk {fmt.count(topic.backend_depth)}) · {fmt.plural(topic.message_count, 'message')}"
            f" · {fmt.plural(len(topic.channels), 'channel')} · "
            f"{fmt.plural(len(topic.nodes), 'node')}"
        )
        if fmt.has_latency(topic.e2e_processing_latency):
            text.append(f" · e2e {fmt.latency(topic.e2e_processing_latency, (0.5, 0.99))}")
        if topic.paused:
            text.append(" · PAUSED", "bold yellow")
        return text

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
        from .channel import ChannelScreen

        if event.row_key.value is not None:
            self.app.push_screen(ChannelScreen(self.topic, str(event.row_key.value)))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    def on_descendant_focus(self) -> None:
        """What the keys act on depends on the focused table."""
        self.refresh_bindings()
