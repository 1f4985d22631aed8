"""The Channel view: one channel's rate, its rows per node, and its clients."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual.binding import Binding
from textual.widgets import Static

from . import format as fmt
from .cells import channel_cells, features
from .detail import DetailScreen
from .navigation import OpenMessages, OpenTroubles
from .operations import ACTION_BINDINGS, Target
from .safe import safe_text
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


def client_key(client: ClientStats) -> str:
    """A client row's key: its node and its address there."""
    return f"{client.node}/{client.remote_address}/{client.client_id}"


class ChannelScreen(DetailScreen):
    """A channel: summary, rate plot, per-node rows and clients."""

    BINDINGS = [
        ACTION_BINDINGS["pause"],
        ACTION_BINDINGS["empty"],
        ACTION_BINDINGS["delete"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
        Binding("m", "messages", "Messages"),
        Binding("exclamation_mark", "troubles", "Troubles"),
    ]
    rows_id = "clients"
    rows_title = "Clients"

    def __init__(self, topic: str, channel: str) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel
        self.crumbs = f"topics / {topic} / {channel}"

    def show(self, snapshot: ClusterSnapshot) -> None:
        """Fill everything from the channel's cluster-wide row."""
        channel = snapshot.channel(self.topic, self.channel)
        if channel is None:
            message = f"channel {self.channel} of {self.topic}: not found (deleted?)"
            self.show_missing(message, NODE_COLUMNS, CLIENT_COLUMNS)
            return
        self.query_one("#summary", Static).update(safe_text(self._summary(channel)))
        self.query_one(RatePlot).plot(
            f"channel {self.channel}", self.rate_series(self.topic, self.channel)
        )
        self.query_one("#nodes", StatsTable).show(
            NODE_COLUMNS,
            [
                Row(row.node, (row.node, *channel_cells(row, self._rate(row))))
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

    def _rate(self, row: ChannelStats) -> str:
        return self.rate_cell(row.topic_name, row.channel_name, row.node)

    def _summary(self, channel: ChannelStats) -> Text:
        text = Text()
        text.append(f"channel {self.channel}", "bold")
        text.append(
            f" of {self.topic} · depth {fmt.count(channel.depth)} · in flight "
            f"{fmt.count(channel.in_flight_count)} · deferred {fmt.count(channel.deferred_count)}"
            f" · {fmt.plural(channel.message_count, 'message')} · "
            f"{fmt.plural(channel.client_count, 'client')}"
        )
        return self.summary_tail(text, channel.e2e_processing_latency, channel.paused)

    def target(self) -> Target | None:
        """The channel."""
        snapshot = self.host.snapshot
        channel = snapshot.channel(self.topic, self.channel) if snapshot is not None else None
        if channel is None:
            return None
        return Target(self.topic, self.channel, None, channel.paused, channel.depth)

    def action_messages(self) -> None:
        """List the messages the channel holds (nothing is taken)."""
        self.post_message(OpenMessages(self.topic, self.channel))

    def action_troubles(self) -> None:
        """List the channel's messages in trouble and the ones its clients gave up on."""
        self.post_message(OpenTroubles(self.topic, self.channel))
