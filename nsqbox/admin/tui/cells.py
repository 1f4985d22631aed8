"""Table cells more than one view draws: counters of a channel, paused, a node's status.

Pure functions from stats rows to Rich renderables (no screen, no app), so the views share them
without importing one another.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text

from . import format as fmt

if TYPE_CHECKING:
    from ..model import NodeSnapshot
    from ..stats import ChannelStats, ClientStats

__all__ = ["channel_cells", "features", "paused_cell", "status_cell", "tombstones"]


def paused_cell(paused: bool) -> Text | str:
    """``paused`` in bold yellow, or nothing."""
    return Text("paused", style="bold yellow") if paused else ""


def channel_cells(channel: ChannelStats, rate: str) -> list[RenderableType]:
    """The counters every channel row shows, from depth to paused; ``rate`` is formatted."""
    return [
        fmt.number(channel.depth),
        fmt.number(channel.in_flight_count),
        fmt.number(channel.deferred_count),
        fmt.number(channel.requeue_count),
        fmt.number(channel.timeout_count),
        fmt.number(channel.message_count),
        Text(rate, justify="right"),
        fmt.number(channel.client_count),
        paused_cell(channel.paused),
    ]


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


def status_cell(node: NodeSnapshot) -> Text:
    """``ok``, ``out of date``, or the node's error in red."""
    if node.error is not None:  # the whole error is on the status line
        return Text("✗ not answering", style="bold red")
    if node.producer.out_of_date:
        return Text("out of date", style="yellow")
    return Text("ok", style="green")


def tombstones(node: NodeSnapshot) -> list[str]:
    """The topics this node is tombstoned for in lookupd."""
    return [t.topic for t in node.producer.topics if t.tombstoned]
