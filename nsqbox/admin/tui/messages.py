"""The Messages view: what a channel (or a topic, for channels not yet created) holds, listed
page by page without taking anything.

It reads nsqbox's peek route on every node that has the topic (:meth:`.backend.Backend.peek`):
queued in memory, queued on disk, deferred, in flight, in that order per node. A page is up to
:data:`PAGE_LIMIT` messages per node; ``]`` goes on with the cursor of the page, ``[`` back,
``r`` lists the page again. The list is a look at one moment: it does not follow the refreshes
of the other views. Enter opens a message (:mod:`.message`), ``/`` filters by body text, ``R``
republishes a copy of the selected message and ``s`` saves the listed ones
(:mod:`.message_actions`); ``j`` opens the selected message's journey (:mod:`.journey`). Real
nsqd has no peek route: its nodes are shown as not supported.
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..peek import PeekQuery
from . import format as fmt
from .bodies import preview
from .message import MessageScreen
from .message_actions import republish, save_messages
from .navigation import OpenJourney
from .peeked import WHERE, Listed
from .reading import ReadingScreen
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..model import ClusterSnapshot
    from ..peek import NodePeek, PeekResult
    from .backend import Backend

__all__ = ["BODY_BYTES", "PAGE_LIMIT", "MessagesScreen"]

#: Messages listed per node and page.
PAGE_LIMIT = 100
#: Body bytes listed per message: nsqd's default largest message (a page stays under ~1 MiB
#: of bodies per node whatever this is: nsqd ends a page there).
BODY_BYTES = 1024 * 1024
#: Characters of body in the table.
PREVIEW = 44

#: What a node that has not (or no longer) the topic or channel answers, as the view says it.
_ABSENT = {"TOPIC_NOT_FOUND": "no such topic here", "CHANNEL_NOT_FOUND": "no such channel here"}

COLUMNS = (
    Column("node", "Node"),
    Column("id", "ID"),
    Column("where", "Where"),
    Column("attempts", "Attempts"),
    Column("timestamp", "Timestamp"),
    Column("size", "Size"),
    Column("left", "Left"),
    Column("body", "Body"),
)


class MessagesScreen(ReadingScreen["PeekResult"]):
    """A page of the messages a channel (or a topic) holds, on every node that has it."""

    BINDINGS = [
        Binding("right_square_bracket", "next_page", "Next page"),
        Binding("left_square_bracket", "previous_page", "Previous page"),
        Binding("r", "reload", "Reload"),
        Binding("R", "republish", "Republish"),
        Binding("s", "save", "Save"),
        Binding("j", "journey", "Journey"),
    ]
    #: What the summary says while a page is read.
    activity = "listing"

    def __init__(self, topic: str, channel: str | None = None, *, limit: int = PAGE_LIMIT) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel
        self.limit = limit
        where = f"{topic} / {channel}" if channel else topic
        self.crumbs = f"topics / {where} / messages"
        #: The cursor of every page so far: ``""`` for the first, the current one last.
        self.cursors = [""]
        #: The listed messages of the current page, in the nodes' order.
        self.messages: list[Listed] = []
        #: What each node answered for the current page.
        self.reports: list[NodePeek] = []
        self.next_cursor: str | None = None
        self._rows: list[tuple[Row, str]] = []

    @property
    def label(self) -> str:
        """``channel billing of orders`` or ``topic orders``."""
        if self.channel:
            return f"channel {self.channel} of {self.topic}"
        return f"topic {self.topic}"

    def compose_body(self) -> ComposeResult:
        """The summary over the table."""
        yield Static(id="summary")
        yield StatsTable(id="messages")

    # -- listing ------------------------------------------------------------------------------

    @property
    def page(self) -> int:
        """The current page's number, from 1."""
        return len(self.cursors)

    async def fetch(self, backend: Backend, snapshot: ClusterSnapshot) -> PeekResult:
        """The current page, from every node that has the topic."""
        nodes = self.nodes_with(snapshot, self.topic)
        query = PeekQuery(self.topic, self.channel or "", self.limit, BODY_BYTES, self.cursors[-1])
        return await backend.peek(nodes, query)

    def take(self, answer: PeekResult | None) -> None:
        """Keep the page listed, and its rows."""
        if answer is None:
            self.messages, self.reports, self.next_cursor = [], [], None
        else:
            self.messages = [Listed.from_peek(m) for m in answer.messages]
            self.reports, self.next_cursor = answer.nodes, answer.next
        self._rows = [self._row(i, m) for i, m in enumerate(self.messages)]

    def _row(self, index: int, message: Listed) -> tuple[Row, str]:
        """The message's row, and the text the filter looks in."""
        tz = self.host.tz
        cells = (
            message.node,
            message.id,
            message.where,
            fmt.number(message.attempts),
            fmt.wall_clock(message.timestamp / 1e9, tz) if message.timestamp else fmt.NONE,
            fmt.number(message.size),
            Text(message.left, justify="right"),
            Text(preview(message.body, PREVIEW)),  # a str cell would be read as markup
        )
        haystack = message.body.decode("utf-8", "replace")
        return Row(str(index), cells), haystack

    # -- drawing ------------------------------------------------------------------------------

    def show(self, snapshot: ClusterSnapshot) -> None:
        """The summary and the listed messages that pass the filter."""
        self.show_summary()
        rows = [row for row, text in self._rows if self.matches(text)]
        self.main_table.show(COLUMNS, rows)

    @property
    def summary_title(self) -> str:
        """``messages of channel billing of orders`` or ``messages of topic orders``."""
        return f"messages of {self.label}"

    def summarize(self, text: Text) -> None:
        """What the page holds and where, what the nodes hold, and each node's trouble."""
        if self.unsupported:
            nodes = ", ".join(r.node for r in self.reports)
            text.append(" · not supported by this nsqd", "bold yellow")
            text.append(
                f"\n{nodes}: no peek route (real nsqd cannot list what a queue holds)", "dim"
            )
            return
        where = Counter(m.state for m in self.messages)
        held = ", ".join(f"{WHERE[s]} {where[s]:,}" for s in WHERE if where[s])
        text.append(f" · page {self.page} · {fmt.plural(len(self.messages), 'message')} listed")
        if held:
            text.append(f" ({held})")
        reported = [r for r in self.reports if r.supported and not r.error]
        if reported:
            text.append(
                f" · held: depth {fmt.count(sum(r.depth for r in reported))}, in flight "
                f"{fmt.count(sum(r.in_flight_count for r in reported))}, deferred "
                f"{fmt.count(sum(r.deferred_count for r in reported))}"
            )
        text.append(" · ] next page" if self.next_cursor else " · last page", "dim")
        if self.reading:
            text.append(" · listing…", "dim")
        for report in self.reports:
            if report.error in _ABSENT:
                text.append(f"\n{report.node}: {_ABSENT[report.error]}", "dim")
            elif report.error:
                text.append(f"\n✗ {report.node}: {report.error}", "yellow")
            if report.disk_error:
                text.append(f"\n✗ {report.node}: disk queue: {report.disk_error}", "yellow")

    # -- keys ---------------------------------------------------------------------------------

    @property
    def selected(self) -> Listed | None:
        """The message under the cursor."""
        key = self.main_table.selected_key
        return None if key is None else self.messages[int(key)]

    def binding_state(self) -> object:
        """Paging and the actions depend on the page and its selection."""
        return (self.next_cursor is None, self.page, bool(self.messages), self.selected is None)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Hide the actions in read-only mode; dim what has nothing to act on."""
        if action in ("republish", "save") and self.host.read_only:
            return False
        if action == "next_page" and self.next_cursor is None:
            return None
        if action == "previous_page" and self.page == 1:
            return None
        if action in ("republish", "journey") and self.selected is None:
            return None
        if action == "save" and not self.messages:
            return None
        return True

    def action_next_page(self) -> None:
        """List the next page."""
        if self.next_cursor is not None and not self.reading:
            self.cursors.append(self.next_cursor)
            self.load()

    def action_previous_page(self) -> None:
        """List the previous page again."""
        if len(self.cursors) > 1 and not self.reading:
            self.cursors.pop()
            self.load()

    @on(DataTable.RowSelected, "#messages")
    def _open(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is None:
            return
        message = self.messages[int(event.row_key.value)]
        self.app.push_screen(MessageScreen(message, self.publish_nodes(), "", self.crumbs))

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    def action_republish(self) -> None:
        """Publish a copy of the selected message to a topic (asks which, then confirms)."""
        message = self.selected
        if message is not None:
            republish(self, self.host, message, self.publish_nodes(), "")

    def action_journey(self) -> None:
        """Open the journey of the selected message: what happened to it, on every node."""
        message = self.selected
        if message is not None:
            self.post_message(OpenJourney(message.id, self.crumbs))

    def action_save(self) -> None:
        """Write the listed messages (those the filter shows) to a JSON-lines file."""
        shown = [self.messages[int(key)] for key in self.main_table.keys]
        name = f"{self.topic}.{self.channel}" if self.channel else self.topic
        save_messages(self, self.host, shown, f"{name}.messages.page{self.page}.jsonl")
