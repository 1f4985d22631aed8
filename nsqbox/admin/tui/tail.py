"""Tail: watch a topic's live messages through an ephemeral channel of the TUI's own.

The TUI runs on asyncio and nsqbox's consumer is trio, so each nsqd that has the topic is read
by nsqbox's blocking consumer (:class:`~nsqbox.client.blocking.BlockingConsumer`) in a worker
thread. Each message is finished at once: an ephemeral channel (``nsqbox_tui_NNNNNN#ephemeral``)
gets a copy of every message published to the topic and takes nothing from other channels, and
nsqd deletes it when the tail closes. (On a topic with no channels it would take the messages
the topic keeps for its first channel: the views ask before tailing such a topic.)
"""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass
from datetime import datetime

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Footer, Header, RichLog, Static
from textual.worker import get_current_worker

from ... import __version__
from ...process.terminal_text import visible
from . import format as fmt
from .safe import safe

__all__ = ["TailScreen", "TailSource", "tail_channel_name"]

#: Bodies longer than this are cut in the log (the full body is not kept).
MAX_BODY = 400
#: How often a consumer thread checks whether the tail was closed (seconds).
POLL = 0.2


def tail_channel_name() -> str:
    """A fresh ephemeral channel name for one tail."""
    return f"nsqbox_tui_{random.randrange(1_000_000):06d}#ephemeral"


@dataclass(frozen=True, slots=True)
class TailSource:
    """One nsqd to read from: its name (HTTP address) and its TCP address."""

    node: str
    tcp_address: str


class TailScreen(Screen[None]):
    """A log of a topic's messages as they arrive, from every nsqd that has the topic."""

    DEFAULT_CSS = """
    TailScreen #caption {
        padding: 0 1;
        color: $text-muted;
    }
    TailScreen RichLog {
        height: 1fr;
        border: round $primary;
        scrollbar-size-vertical: 1;
    }
    """
    BINDINGS = [
        Binding("escape", "back", "Stop and back"),
        Binding("c", "clear", "Clear"),
    ]

    class Received(Message):
        """A consumer thread got a message."""

        def __init__(self, node: str, timestamp: int, attempts: int, body: bytes) -> None:
            super().__init__()
            self.node = node
            self.timestamp = timestamp
            self.attempts = attempts
            self.body = body

    class Failed(Message):
        """A consumer thread stopped on an error."""

        def __init__(self, node: str, error: str) -> None:
            super().__init__()
            self.node = node
            self.error = error

    def __init__(self, topic: str, sources: list[TailSource], *, live: bool = True) -> None:
        """Tail ``topic`` on ``sources``; ``live=False`` starts no consumer (for screenshots)."""
        super().__init__()
        self.topic = topic
        self.sources = sources
        self.channel = tail_channel_name()
        self.live = live
        self.count = 0
        #: The log's lines (as shown: control characters visible).
        self.lines: list[Text] = []
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        """Caption, log, footer."""
        yield Header(icon="◆")
        yield Static(id="caption")
        yield RichLog(max_lines=2000, wrap=False, markup=False, highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        """Start one consumer thread per node."""
        self.sub_title = visible(f"tail / {self.topic}")
        self._caption()
        if self.live:
            for source in self.sources:
                self._consume(source)

    def on_unmount(self) -> None:
        """Stop the consumers (each closes its connection, and nsqd drops the channel)."""
        self._stop.set()

    def _caption(self) -> None:
        self.query_one("#caption", Static).update(
            safe(
                f"topic {self.topic} through channel {self.channel} on "
                f"{fmt.plural(len(self.sources), 'node')} · {fmt.plural(self.count, 'message')}"
                " · Esc stops"
            )
        )

    def action_back(self) -> None:
        """Stop tailing and go back."""
        self._stop.set()
        self.app.pop_screen()

    def action_clear(self) -> None:
        """Clear the log."""
        self.query_one(RichLog).clear()
        self.lines.clear()

    # -- messages -----------------------------------------------------------------------------

    def _write(self, line: Text) -> None:
        self.lines.append(line)
        del self.lines[:-2000]
        self.query_one(RichLog).write(line)

    @on(Received)
    def add_message(self, event: Received) -> None:
        """Append one message: time, node, attempts and body."""
        tz = getattr(self.app, "tz", None)
        when = datetime.fromtimestamp(event.timestamp / 1e9, tz).strftime("%H:%M:%S.%f")[:-3]
        body = event.body[:MAX_BODY].decode("utf-8", "replace").replace("\n", "⏎")
        more = "…" if len(event.body) > MAX_BODY else ""
        self.count += 1
        # Text, not markup: a body is anybody's; its control characters shown as \xNN
        self._write(
            Text.assemble(
                (when, "dim"),
                " ",
                (visible(event.node), "cyan"),
                " ",
                (f"#{event.attempts}", "dim"),
                " ",
                visible(body + more),
            )
        )
        self._caption()

    @on(Failed)
    def _failed(self, event: Failed) -> None:
        self._write(safe(f"✗ {event.node}: {event.error}", "bold red"))

    @work(thread=True, group="tail", exit_on_error=False)
    def _consume(self, source: TailSource) -> None:
        from ...client import Config  # the client loads only when a tail starts
        from ...client.blocking import BlockingConsumer

        worker = get_current_worker()
        config = Config(
            user_agent=f"nsqbox-tui/{__version__}", max_in_flight=100, close_timeout=2.0
        )
        try:
            consumer = BlockingConsumer(source.tcp_address, self.topic, self.channel, config=config)
        except Exception as exc:  # refused, unreachable, E_* from nsqd: show it, stay up
            self._post(self.Failed(source.node, str(exc) or type(exc).__name__))
            return
        try:
            with consumer:
                while not self._stop.is_set() and not worker.is_cancelled:
                    for message in consumer.messages(timeout=POLL):
                        self._post(
                            self.Received(
                                source.node, message.timestamp, message.attempts, message.body
                            )
                        )
                        message.finish()
                        if self._stop.is_set():
                            break
        except Exception as exc:
            self._post(self.Failed(source.node, str(exc) or type(exc).__name__))

    def _post(self, message: Message) -> None:
        try:
            self.post_message(message)
        except RuntimeError:  # the app's loop is closing: nobody is left to show it
            self._stop.set()

    @property
    def text(self) -> str:
        """The log as plain text (for tests)."""
        return "\n".join(line.plain for line in self.lines)
