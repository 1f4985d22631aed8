"""The Channel view: one channel's rate, its rows per node, and its clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Static

from . import format as fmt
from .operations import ACTION_BINDINGS, OperableScreen, Target
from .topic import channel_cells
from .widgets import Column, RatePlot, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..stats import ChannelStats, ClientStats

__all__ = ["ChannelScreen"]

NODE_COLUMNS = (
    Column("node", "Node"),
    Column("depth", "Depth"),
    Column("in_flight", "In flight"),
    Column("deferred", "Deferred"),
    Column("requeued", "Requeued"),
    Column("timed_out", "Timed out"),
    Column("messages", "Messages"),
    Column("rate", "Rate"),
    Column("clients", "Clients"),
    Column("paused", "Paused"),
)
CLIENT_COLUMNS = (
    Column("host", "Host"),
    Column("address", "Address"),
    Column("node", "Node"),
    Column("user_agent", "User agent"),
    Column("features", "TLS/snappy/deflate"),
    Column("rdy", "RDY"),
    Column("in_flight", "In flight"),
    Column("finished", "Finished"),
    Column("requeued", "Requeued"),
    Column("connected", "Connected"),
    Column("since", "Since"),
)


def features(client: ClientStats) -> str:
    """What the connection negotiated: ``TLS1.3 snappy``, ``deflate``, or nothing."""
    parts = []
    if client.tls:
        parts.append(client.tls_version or "TLS")
    if client.snappy:
        parts.append("snappy")
    if client.deflate:
        parts.append("deflate")
    return " ".join(parts)


def client_key(client: ClientStats) -> str:
    """A client row's key: its node and its address there."""
    return f"{client.node}/{client.remote_address}/{client.client_id}"


class ChannelScreen(OperableScreen):
    """A channel: summary, rate plot, per-node rows and clients."""

    DEFAULT_CSS = """
    ChannelScreen #nodes {
        height: auto;
        max-height: 8;
    }
    ChannelScreen #summary {
        padding: 0 1;
    }
    """
    BINDINGS = [
        ACTION_BINDINGS["pause"],
        ACTION_BINDINGS["empty"],
        ACTION_BINDINGS["delete"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
    ]

    def __init__(self, topic: str, channel: str) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel
        self.crumbs = f"topics / {topic} / {channel}"

    def compose_body(self) -> ComposeResult:
        """Summary, plot, nodes, clients."""
        yield Static(id="summary")
        yield RatePlot(id="rate")
        yield Static("Nodes", classes="section")
        yield StatsTable(id="nodes")
        yield Static("Clients", classes="section")
        yield StatsTable(id="clients")

    def on_mount(self) -> None:
        """The clients table has the focus."""
        self.query_one("#clients", StatsTable).focus()

    @property
    def main_table(self) -> StatsTable:
        """The clients table."""
        return self.query_one("#clients", StatsTable)

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Fill everything from the channel's cluster-wide row."""
        channel = snapshot.channel(self.topic, self.channel)
        summary = self.query_one("#summary", Static)
        if channel is None:
            summary.update(
                Text(f"channel {self.channel} of {self.topic}: not found (deleted?)", "bold red")
            )
            self.query_one("#nodes", StatsTable).show(NODE_COLUMNS, [])
            self.query_one("#clients", StatsTable).show(CLIENT_COLUMNS, [])
            return
        summary.update(self._summary(channel))
        self.query_one(RatePlot).plot(
            f"channel {self.channel}", self.rate_series(self.topic, self.channel)
        )
        self.query_one("#nodes", StatsTable).show(
            NODE_COLUMNS,
            [
                Row(row.node, (row.node, *channel_cells(self, row, row.node)))
                for row in channel.nodes
            ],
        )
        tz = self.host.tz
        rows = []
        for client in sorted(channel.clients, key=lambda c: (c.hostname, c.remote_address)):
            if not self.matches(client.hostname, client.remote_address, client.user_agent):
                continue
            cells = (
                client.hostname,
                client.remote_address,
                client.node,
                client.user_agent or fmt.NONE,
                features(client),
                fmt.number(client.ready_count),
                fmt.number(client.in_flight_count),
                fmt.number(client.finish_count),
                fmt.number(client.requeue_count),
                Text(fmt.duration_ns(client.connected), justify="right"),
                fmt.wall_clock(client.connect_ts, tz) if client.connect_ts else fmt.NONE,
            )
            rows.append(Row(client_key(client), cells))
        self.query_one("#clients", StatsTable).show(CLIENT_COLUMNS, rows)

    def _summary(self, channel: ChannelStats) -> Text:
        text = Text()
        text.append(f"channel {self.channel}", "bold")
        text.append(
            f" of {self.topic} · depth {fmt.count(channel.depth)} · in flight "
            f"{fmt.count(channel.in_flight_count)} · deferred {fmt.count(channel.deferred_count)}"
            f" · {fmt.plural(channel.message_count, 'message')} · "
            f"{fmt.plural(channel.client_count, 'client')}"
        )
        if fmt.has_latency(channel.e2e_processing_latency):
            text.append(f" · e2e {fmt.latency(channel.e2e_processing_latency, (0.5, 0.99))}")
        if channel.paused:
            text.append(" · PAUSED", "bold yellow")
        return text

    def target(self) -> Target | None:
        """The channel."""
        snapshot = self.host.snapshot
        channel = snapshot.channel(self.topic, self.channel) if snapshot is not None else None
        if channel is None:
            return None
        return Target(self.topic, self.channel, None, channel.paused, channel.depth)
