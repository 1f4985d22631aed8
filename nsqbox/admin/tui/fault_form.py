"""The form that starts a fault: node, kind, scope, count, duration and any other parameter.

The kind is free text with the known kinds as suggestions, and ``Other`` takes ``key=value``
pairs, so a fault kind a node learns later can be started without a change here. Nothing is
sent until *Start* (or Enter) is pressed: the form is the confirmation, as for publishing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.suggester import SuggestFromList
from textual.widgets import Input, Label

from ...go.syntax import parse_duration
from ...wire.names import is_valid_channel_name, is_valid_topic_name
from ..faults import is_fault_kind
from .modals import MODAL_CSS, FormScreen, node_select, pick_node

__all__ = ["KNOWN_KINDS", "AddFaultScreen", "FaultRequest"]

#: The fault kinds the form suggests (nsqbox's nsqd; other kinds may be typed).
KNOWN_KINDS = ("fail_publishes", "disk_full", "time_out_in_flight", "drop_connections")


@dataclass(frozen=True, slots=True)
class FaultRequest:
    """A fault to start: on which node (HTTP address), which kind, with which parameters."""

    node: str
    kind: str
    params: tuple[tuple[str, str], ...] = ()

    @property
    def label(self) -> str:
        """``fault fail_publishes (topic=orders count=3) on 127.0.0.1:4151``."""
        scope = " ".join(f"{k}={v}" for k, v in self.params)
        return f"fault {self.kind}" + (f" ({scope})" if scope else "") + f" on {self.node}"


class AddFaultScreen(FormScreen[FaultRequest | None]):
    """Ask for a fault's node, kind and parameters; a :class:`FaultRequest` or None."""

    DEFAULT_CSS = (
        MODAL_CSS.format(name="AddFaultScreen")
        + """
    AddFaultScreen > Vertical {
        width: 90;
        border: thick $warning;
        padding: 0 2;
    }
    AddFaultScreen Input, AddFaultScreen Select {
        margin-bottom: 0;
    }
    AddFaultScreen Horizontal.fields {
        align-horizontal: left;
        margin-top: 0;
    }
    AddFaultScreen Horizontal.fields Input {
        width: 1fr;
        margin-right: 1;
    }
    """
    )
    OK = "Start"
    OK_VARIANT = "warning"

    def __init__(self, nodes: Sequence[str], node: str = "", topic: str = "") -> None:
        super().__init__("Start a fault")
        self.nodes = list(nodes)
        self.node = pick_node(self.nodes, node)
        self.topic = topic

    def fields(self) -> ComposeResult:
        """Node, kind, topic and channel, count and duration, other parameters."""
        yield Label("Node")
        yield node_select(self.nodes, self.node)
        yield Label(f"Kind: {', '.join(KNOWN_KINDS)}, ...")
        yield Input(
            KNOWN_KINDS[0],
            id="kind",
            suggester=SuggestFromList(KNOWN_KINDS, case_sensitive=True),
        )
        yield Label("Topic, channel (optional: every one)")
        with Horizontal(classes="fields"):
            yield Input(self.topic, placeholder="topic", id="topic")
            yield Input(placeholder="channel", id="channel")
        yield Label("Count (commands) and duration (30s, 2m); without either: until lifted")
        with Horizontal(classes="fields"):
            yield Input(placeholder="count", id="count", type="integer")
            yield Input(placeholder="duration", id="duration")
        yield Label("Other parameters (key=value ...)")
        yield Input(placeholder="error=boom user_agent=pynsq reset=true", id="other")

    def on_mount(self) -> None:
        """Focus the kind."""
        self.query_one("#kind", Input).focus()

    def answer(self) -> FaultRequest | str:
        """The request, or what is wrong."""
        node, kind = self.chosen_node(), self.value("kind")
        if not node:
            return "no node with fault routes"
        if not is_fault_kind(kind):
            return f"invalid fault kind {kind!r}"
        params: list[tuple[str, str]] = []
        topic, channel = self.value("topic"), self.value("channel")
        if topic and not is_valid_topic_name(topic):
            return f"invalid topic name {topic!r}"
        if channel and not is_valid_channel_name(channel):
            return f"invalid channel name {channel!r}"
        params += [(k, v) for k, v in (("topic", topic), ("channel", channel)) if v]
        count = self.value("count")
        if count:
            if not count.isdigit() or int(count) < 1:
                return "count must be a positive number"
            params.append(("count", str(int(count))))
        duration = self.value("duration")
        if duration:
            try:
                seconds = parse_duration(duration)
            except ValueError:
                return f"invalid duration {duration!r} (30s, 2m, 1h)"
            if seconds <= 0:
                return "duration must be positive"
            params.append(("duration", repr(seconds)))
        for pair in self.value("other").split():
            key, sep, value = pair.partition("=")
            if not sep or not key:
                return f"other parameters are key=value, not {pair!r}"
            params.append((key, value))
        return FaultRequest(node, kind, tuple(params))
