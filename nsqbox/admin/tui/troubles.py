"""The Troubles view: a channel's messages in trouble, and the ones its clients gave up on.

It reads nsqbox's journal on every node of the topic (:meth:`.backend.Backend.troubles` and
:meth:`~.backend.Backend.given_up`): *In trouble* lists the messages whose delivery went
wrong (requeued or timed out) and that are not finished yet, *Given up* the messages
finished at some attempt after earlier deliveries failed — what pynsq's ``max_tries`` and
go-nsq's ``MaxAttempts`` do, silently, to a message they give up on. Both with their bodies
(the first :data:`BODY_BYTES`), shown as text with their control characters visible.

Tab moves between the two tables. Enter opens the selected message (its body whole), ``j``
its journey, and ``R`` republishes a copy of a given-up message (asks for the topic, then
confirms; :func:`~.message_actions.republish`); ``r`` reads both lists again. Real nsqd keeps
no journal: its nodes are shown as not supported.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
from typing import TYPE_CHECKING

from rich.console import RenderableType
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import DataTable, Static

from ..journal import GivenUp, Trouble, TroublesQuery, Who
from . import format as fmt
from .bodies import preview
from .message import MessageScreen
from .message_actions import republish
from .navigation import OpenJourney
from .peeked import Listed
from .reading import ReadingScreen
from .widgets import Column, Row, StatsTable

if TYPE_CHECKING:
    from ..journal import GivenUpResult, NodeJournal, TroublesResult
    from ..model import ClusterSnapshot
    from .backend import Backend

__all__ = ["BODY_BYTES", "LIMIT", "TroublesScreen", "listed"]

#: Messages listed per node and list.
LIMIT = 100
#: Body bytes listed per message: a list stays under nsqbox's 16 MiB per answer (100 of
#: them, base64), and a longer body is not republished in part.
BODY_BYTES = 64 * 1024
#: Characters of body in the tables.
PREVIEW = 32

TROUBLE_COLUMNS = (
    Column("node", "Node"),
    Column("id", "ID"),
    Column("requeues", "Requeued"),
    Column("timeouts", "Timed out"),
    Column("held", "Held longest"),
    Column("client", "Last client"),
    Column("since", "Since"),
    Column("size", "Size"),
    Column("body", "Body"),
)
GIVEN_UP_COLUMNS = (
    Column("node", "Node"),
    Column("id", "ID"),
    Column("finished", "Finished"),
    Column("attempts", "Attempt"),
    Column("requeues", "Requeued"),
    Column("timeouts", "Timed out"),
    Column("client", "Finished by"),
    Column("size", "Size"),
    Column("body", "Body"),
)


def _body(encoded: str) -> bytes:
    try:
        return base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return b""


def listed(message: Trouble | GivenUp) -> Listed:
    """The message as the message view and republishing take it."""
    if isinstance(message, GivenUp):
        state, attempts = "given up", message.attempts
    else:
        state, attempts = "in trouble", message.requeues + message.timeouts
    return Listed(
        node=message.node,
        id=message.id,
        state=state,
        attempts=attempts,
        timestamp=message.timestamp,
        size=message.size,
        body=_body(message.body),
    )


def _haystack(message: Trouble | GivenUp, body: bytes) -> str:
    """What the filter looks in: the id, the node and the body's text."""
    return f"{message.id} {message.node} {body.decode('utf-8', 'replace')}"


def _client(who: Who) -> str:
    """A client in a few characters: its user agent, as the Journey view names a client (which
    adds its address), else its hostname, its address or its connection's id."""
    named = who.user_agent or who.hostname or who.remote_address
    return named or (f"client {who.client}" if who.client else "-")


class TroublesScreen(ReadingScreen["tuple[TroublesResult, GivenUpResult]"]):
    """A channel's messages in trouble and the ones given up on, on every node."""

    BINDINGS = [
        Binding("r", "reload", "Reload"),
        Binding("j", "journey", "Journey"),
        Binding("R", "republish", "Republish"),
    ]

    def __init__(self, topic: str, channel: str) -> None:
        super().__init__()
        self.topic = topic
        self.channel = channel
        self.crumbs = f"topics / {topic} / {channel} / troubles"
        self.troubles: list[Trouble] = []
        self.given_up: list[GivenUp] = []
        #: How many messages the channel has in trouble (more may be than are listed).
        self.count = 0
        #: How many messages its clients gave up on (likewise).
        self.given_up_count = 0
        self.reports: list[NodeJournal] = []
        self._trouble_rows: list[tuple[Row, str]] = []
        self._given_up_rows: list[tuple[Row, str]] = []

    def compose_body(self) -> ComposeResult:
        """Summary, then the two tables."""
        yield Static(id="summary")
        yield Static("In trouble: requeued or timed out, not finished", classes="section")
        yield StatsTable(id="troubles")
        yield Static("Given up: finished after failed deliveries", classes="section")
        yield StatsTable(id="given_up")

    async def fetch(
        self, backend: Backend, snapshot: ClusterSnapshot
    ) -> tuple[TroublesResult, GivenUpResult]:
        """Both lists, from every node that has the topic."""
        nodes = self.nodes_with(snapshot, self.topic)
        query = TroublesQuery(self.topic, self.channel, LIMIT, BODY_BYTES)
        troubles, given_up = await asyncio.gather(
            backend.troubles(nodes, query), backend.given_up(nodes, query)
        )
        return troubles, given_up

    def take(self, answer: tuple[TroublesResult, GivenUpResult] | None) -> None:
        """Keep both lists, and their rows."""
        if answer is None:
            self.troubles, self.given_up, self.reports = [], [], []
            self.count = self.given_up_count = 0
        else:
            troubles, given_up = answer
            self.troubles, self.given_up = troubles.messages, given_up.messages
            self.reports, self.count = troubles.nodes, troubles.count
            self.given_up_count = given_up.count
        tz = self.host.tz
        self._trouble_rows = []
        for i, trouble in enumerate(self.troubles):
            body = _body(trouble.body)
            who = trouble.last_client
            cells: tuple[RenderableType, ...] = (
                trouble.node,
                trouble.id,
                fmt.number(trouble.requeues),
                fmt.number(trouble.timeouts),
                Text(fmt.latency_ns(trouble.held_longest_ms * 1e6), justify="right"),
                _client(who),
                fmt.wall_clock(trouble.since / 1e9, tz) if trouble.since else fmt.NONE,
                fmt.number(trouble.size),
                Text(preview(body, PREVIEW)),  # a str cell would be read as markup
            )
            self._trouble_rows.append((Row(str(i), cells), _haystack(trouble, body)))
        self._given_up_rows = []
        for i, gave in enumerate(self.given_up):
            body = _body(gave.body)
            who = gave.finished_by
            cells = (
                gave.node,
                gave.id,
                fmt.wall_clock(gave.time / 1e9, tz),
                fmt.number(gave.attempts),
                fmt.number(gave.requeues),
                fmt.number(gave.timeouts),
                _client(who),
                fmt.number(gave.size),
                Text(preview(body, PREVIEW)),
            )
            self._given_up_rows.append((Row(str(i), cells), _haystack(gave, body)))

    # -- drawing ------------------------------------------------------------------------------

    def show(self, snapshot: ClusterSnapshot) -> None:
        """The summary and the messages that pass the filter."""
        self.show_summary()
        for table_id, columns, rows in (
            ("#troubles", TROUBLE_COLUMNS, self._trouble_rows),
            ("#given_up", GIVEN_UP_COLUMNS, self._given_up_rows),
        ):
            shown = [row for row, text in rows if self.matches(text)]
            self.query_one(table_id, StatsTable).show(columns, shown)

    @property
    def summary_title(self) -> str:
        """``troubles of channel CHANNEL of TOPIC``."""
        return f"troubles of channel {self.channel} of {self.topic}"

    def summarize(self, text: Text) -> None:
        """How many messages are in trouble and given up, or that no node keeps a journal."""
        if self.unsupported:
            text.append(" · not supported by these nsqds", "bold yellow")
        else:
            for count, what, messages in (
                (self.count, "in trouble", self.troubles),
                (self.given_up_count, "given up", self.given_up),
            ):
                text.append(f" · {fmt.count(count)} {what}")
                if count > len(messages):
                    text.append(f" (the first {fmt.count(len(messages))} listed)", "dim")
        self.summarize_reports(text)

    # -- keys ---------------------------------------------------------------------------------

    def _focused(self) -> StatsTable:
        given_up = self.query_one("#given_up", StatsTable)
        return given_up if given_up.has_focus else self.main_table

    @property
    def selected(self) -> Trouble | GivenUp | None:
        """The message under the cursor of the focused table."""
        table = self._focused()
        key = table.selected_key
        if key is None:
            return None
        return self.given_up[int(key)] if table.id == "given_up" else self.troubles[int(key)]

    def binding_state(self) -> object:
        """The actions depend on the selection."""
        selected = self.selected
        return (selected is None, isinstance(selected, GivenUp))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """No republishing in read-only mode; dim what has nothing to act on."""
        if action == "republish" and self.host.read_only:
            return False
        if action == "republish" and not isinstance(self.selected, GivenUp):
            return None
        if action == "journey" and self.selected is None:
            return None
        return True

    @on(DataTable.RowHighlighted)
    def _moved(self) -> None:
        self.refresh_bindings()

    def on_descendant_focus(self) -> None:
        """Which table has the focus decides what the keys act on."""
        self.refresh_bindings()

    @on(DataTable.RowSelected)
    def _open(self, event: DataTable.RowSelected) -> None:
        selected = self.selected
        if selected is not None:
            self.app.push_screen(
                MessageScreen(listed(selected), self.publish_nodes(), self.topic, self.crumbs)
            )

    def action_journey(self) -> None:
        """Open the selected message's journey."""
        selected = self.selected
        if selected is not None:
            self.post_message(OpenJourney(selected.id, self.crumbs))

    def action_republish(self) -> None:
        """Publish a copy of the selected given-up message (asks which topic, then confirms)."""
        selected = self.selected
        if isinstance(selected, GivenUp):
            republish(self, self.host, listed(selected), self.publish_nodes(), self.topic)
