"""The Journey view: what happened to one message, on every node, in broker-time order.

It reads nsqbox's journal (:meth:`.backend.Backend.journey`, every node's ``GET
/nsqbox/journal?id=``, merged by :func:`~nsqbox.admin.journal.read_events`): published,
queued, delivered (to whom, which attempt), touched, requeued, timed out, finished, dropped,
deferred and due, each with its node, its channel and the client it concerns. ``j`` on a
message in the Messages or the Troubles view opens it; ``r`` reads it again. Real nsqd keeps
no journal: its nodes are shown as not supported. User agents, addresses and every other
text from the nodes are shown as text, their control characters visible.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import Static

from . import format as fmt
from .reading import ReadingScreen
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..journal import Event, EventsResult, NodeJournal
    from ..model import ClusterSnapshot
    from .backend import Backend

__all__ = ["JourneyScreen", "describe", "who"]

COLUMNS = (
    Column("time", "Broker time"),
    Column("after", "After"),
    Column("node", "Node"),
    Column("kind", "Event"),
    Column("channel", "Channel"),
    Column("client", "Client"),
    Column("attempt", "Attempt"),
    Column("details", "Details"),
)

#: How the view names each kind of event.
KIND_NAMES = {"timed_out": "timed out"}


def _ms(value: float | None) -> str:
    """A duration given in ms: ``850µs``, ``12.3ms``, ``4.20s``, ``3m07s``."""
    if value is None:
        return fmt.NONE
    if value <= 0:
        return "0"
    return fmt.latency_ns(value * 1e6) if value < 60_000 else fmt.duration_ns(int(value * 1e6))


def who(event: Event) -> str:
    """The client an event concerns: ``user agent (address)``, or ``-``."""
    agent, address = event.user_agent or "", event.remote_address or ""
    if agent and address:
        return f"{agent} ({address})"
    return agent or address or (f"client {event.client}" if event.client else fmt.NONE)


def describe(event: Event) -> str:
    """What an event adds to its kind, in a few words."""
    kind = event.kind
    parts: list[str] = []
    if kind == "published":
        parts.append(event.via or "")
        if event.size is not None:
            parts.append(fmt.plural(event.size, "byte"))
        if event.defer_ms:
            parts.append(f"deferred {_ms(event.defer_ms)}")
    elif kind == "queued":
        parts.append(f"to {event.to or 'memory'}")
    elif kind == "delivered":
        parts.append(f"timeout {_ms(event.timeout_ms)}")
    elif kind == "touched":
        parts.append(f"{_ms(event.timeout_left_ms)} left")
    elif kind == "requeued":
        parts += [f"delay {_ms(event.delay_ms)}", f"held {_ms(event.held_ms)}"]
    elif kind == "timed_out":
        parts.append(f"held {_ms(event.held_ms)}")
    elif kind == "finished":
        if event.since_publish_ms is not None:
            parts.append(f"{_ms(event.since_publish_ms)} after publishing")
    elif kind == "dropped":
        parts.append(event.why or "")
        if event.on_disk:
            parts.append(f"{fmt.plural(event.on_disk, 'message')} on disk")
    elif kind == "deferred":
        parts.append(f"for {_ms(event.delay_ms)}")
    return " · ".join(p for p in parts if p) or fmt.NONE


class JourneyScreen(ReadingScreen["EventsResult"]):
    """One message's events on every node, oldest first."""

    BINDINGS = [Binding("r", "reload", "Reload")]

    def __init__(self, msg_id: str, crumbs: str = "") -> None:
        super().__init__()
        self.msg_id = msg_id
        self.crumbs = f"{crumbs or 'messages'} / journey {msg_id}"
        #: The events read, in broker-time order.
        self.events: list[Event] = []
        #: What each node answered.
        self.reports: list[NodeJournal] = []
        #: Whether some node has more events than were read.
        self.more = False
        self._rows: list[Row] = []

    def compose_body(self) -> ComposeResult:
        """The summary over the table."""
        yield Static(id="summary")
        yield StatsTable(id="journey")

    async def fetch(self, backend: Backend, snapshot: ClusterSnapshot) -> EventsResult:
        """The message's events on every node that answers."""
        nodes = [n.producer for n in snapshot.nodes if n.ok]
        if not nodes:
            raise LookupError("no node answers")
        return await backend.journey(nodes, self.msg_id)

    def take(self, answer: EventsResult | None) -> None:
        """Keep the events read, and their rows."""
        if answer is None:
            self.events, self.reports, self.more = [], [], False
        else:
            self.events, self.reports = answer.events, answer.nodes
            self.more = answer.next is not None
        self._rows = self._table_rows()

    def _table_rows(self) -> list[Row]:
        tz = self.host.tz
        first = self.events[0].time if self.events else 0
        rows = []
        for i, event in enumerate(self.events):
            when = datetime.fromtimestamp(event.time / 1e9, tz)
            cells = (
                f"{when:%H:%M:%S}.{event.time // 1_000_000 % 1000:03d}",
                Text(f"+{_ms((event.time - first) / 1e6)}" if i else "", justify="right"),
                event.node,
                KIND_NAMES.get(event.kind, event.kind),
                event.channel or fmt.NONE,
                who(event),
                fmt.NONE if event.attempt is None else str(event.attempt),
                describe(event),
            )
            rows.append(Row(str(i), cells))
        return rows

    def show(self, snapshot: ClusterSnapshot) -> None:
        """The summary and the events that pass the filter."""
        self.show_summary()
        rows = [r for r in self._rows if self.matches(*(str(c) for c in r.cells))]
        self.main_table.show(COLUMNS, rows)

    @property
    def summary_title(self) -> str:
        """``journey of message ID``."""
        return f"journey of message {self.msg_id}"

    def summarize(self, text: Text) -> None:
        """How many events on how many nodes, or that no node keeps a journal."""
        if self.unsupported:
            text.append(" · not supported by these nsqds", "bold yellow")
        else:
            nodes = sorted({e.node for e in self.events})
            text.append(
                f" · {fmt.plural(len(self.events), 'event')} on {fmt.plural(len(nodes), 'node')}"
            )
            if not self.events:
                text.append(" · none in the journal (too old, or another id)", "dim")
            if self.more:
                text.append(" · more than shown: the first events only", "yellow")
        self.summarize_reports(text)
