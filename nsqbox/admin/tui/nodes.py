"""The Nodes view (every nsqd) and the Node view (one nsqd's topics, with tombstones)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.widgets import DataTable, Static

from . import format as fmt
from .cells import paused_cell, status_cell, tombstones
from .navigation import OpenNode, OpenTopic
from .operations import ACTION_BINDINGS, OperableScreen, Target
from .safe import safe, safe_text
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot, NodeSnapshot

__all__ = ["NodeScreen", "NodesScreen"]

NODE_COLUMNS = (
    Column("hostname", "Hostname"),
    Column("broadcast", "Broadcast address"),
    Column("tcp", "TCP"),
    Column("http", "HTTP"),
    Column("version", "Version"),
    Column("topics", "Topics"),
    Column("tombstones", "Tombstones"),
    Column("depth", "Depth"),
    Column("messages", "Messages"),
    Column("clients", "Clients"),
    Column("status", "Status"),
)
TOPIC_COLUMNS = (
    Column("topic", "Topic"),
    Column("depth", "Depth"),
    Column("messages", "Messages"),
    Column("rate", "Rate"),
    Column("channels", "Channels"),
    Column("paused", "Paused"),
    Column("tombstoned", "Tombstoned"),
)


class NodesScreen(OperableScreen):
    """Every nsqd: addresses, version, topics, tombstones, totals and whether it answered."""

    crumbs = "nodes"
    BINDINGS = [ACTION_BINDINGS["publish"]]

    def compose_body(self) -> ComposeResult:
        """One table."""
        yield StatsTable(id="nodes")

    def show(self, snapshot: ClusterSnapshot) -> None:
        """One row per node, in the snapshot's order (hostname, then address)."""
        rows = []
        for node in snapshot.nodes:
            p = node.producer
            if not self.matches(node.name, p.hostname, p.broadcast_address):
                continue
            topics = sorted({t.topic for t in p.topics} | {t.topic_name for t in node.topics})
            cells = (
                p.hostname,
                p.broadcast_address,
                Text(str(p.tcp_port), justify="right"),
                Text(str(p.http_port), justify="right"),
                p.version,
                self.joined(topics) if topics else "",
                Text(self.joined(tombstones(node)), style="yellow"),
                fmt.number(node.depth) if node.ok else fmt.NONE,
                fmt.number(node.message_count) if node.ok else fmt.NONE,
                fmt.number(node.client_count) if node.ok else fmt.NONE,
                status_cell(node),
            )
            rows.append(Row(node.name, cells))
        self.query_one("#nodes", StatsTable).show(NODE_COLUMNS, rows)

    @on(DataTable.RowSelected, "#nodes")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(OpenNode(str(event.row_key.value)))


class NodeScreen(OperableScreen):
    """One nsqd: who it is, and its topics (Enter opens one; ``T`` tombstones it here)."""

    DEFAULT_CSS = """
    NodeScreen #summary {
        padding: 0 1;
    }
    """
    BINDINGS = [
        ACTION_BINDINGS["tombstone"],
        ACTION_BINDINGS["publish"],
        ACTION_BINDINGS["tail"],
    ]

    def __init__(self, node: str) -> None:
        super().__init__()
        self.node = node
        self.crumbs = f"nodes / {node}"

    def compose_body(self) -> ComposeResult:
        """Summary and the topics table."""
        yield Static(id="summary")
        yield Static("Topics", classes="section")
        yield StatsTable(id="topics")

    def show(self, snapshot: ClusterSnapshot) -> None:
        """The node's own rows, and the topics lookupd lists for it."""
        node = snapshot.node(self.node)
        summary = self.query_one("#summary", Static)
        if node is None:
            summary.update(safe(f"node {self.node}: not in the cluster any more", "bold red"))
            self.query_one("#topics", StatsTable).show(TOPIC_COLUMNS, [])
            return
        summary.update(safe_text(self._summary(node)))
        registered = {t.topic: t.tombstoned for t in node.producer.topics}
        names = sorted(set(registered) | {t.topic_name for t in node.topics})
        rows = []
        for name in names:
            if not self.matches(name):
                continue
            row = node.topic(name)
            tombstoned = Text("tombstoned", style="bold yellow") if registered.get(name) else ""
            if row is None:
                cells: tuple[Text | str, ...] = (
                    name,
                    *(Text(fmt.NONE, justify="right") for _ in range(3)),
                    "",
                    "",
                    tombstoned,
                )
            else:
                cells = (
                    name,
                    fmt.number(row.depth),
                    fmt.number(row.message_count),
                    Text(self.rate_cell(name, None, self.node), justify="right"),
                    self.joined(sorted(c.channel_name for c in row.channels)),
                    paused_cell(row.paused),
                    tombstoned,
                )
            rows.append(Row(name, cells))
        self.query_one("#topics", StatsTable).show(TOPIC_COLUMNS, rows)

    def _summary(self, node: NodeSnapshot) -> Text:
        p = node.producer
        text = Text()
        text.append(p.hostname or node.name, "bold")
        text.append(f" · HTTP {p.http_address} · TCP {p.tcp_address} · version {p.version or '?'}")
        if p.remote_addresses:
            text.append(f"\nlookupd: {', '.join(p.remote_addresses)}", "dim")
        if node.error is not None:
            text.append(f"\n✗ {node.error}", "bold red")
        return text

    def target(self) -> Target | None:
        """The selected topic, on this node."""
        name = self.query_one("#topics", StatsTable).selected_key
        if name is None:
            return None
        return Target(name, node=self.node)

    @on(DataTable.RowSelected, "#topics")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.post_message(OpenTopic(str(event.row_key.value)))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()
