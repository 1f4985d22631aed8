"""The Logs view: the last lines of a log kept in memory (:class:`LogBuffer`), followed live.

An app that runs servers in its own process sends their log lines to a :class:`LogBuffer`
(through a :class:`logging.StreamHandler`) instead of stderr, where they would tear the screen,
and shows them with :class:`LogScreen`.
"""

from __future__ import annotations

import io
from collections import deque

from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widgets import Footer, Header, RichLog

from .safe import safe

__all__ = ["LogBuffer", "LogScreen"]


class LogBuffer(io.TextIOBase):
    """A text stream keeping the last ``limit`` lines written to it (the servers' log)."""

    def __init__(self, limit: int = 5000) -> None:
        super().__init__()
        self.lines: deque[str] = deque(maxlen=limit)
        #: How many lines were ever written (a view follows new lines with it).
        self.written = 0

    def writable(self) -> bool:
        """It is."""
        return True

    def write(self, text: str) -> int:
        """Keep each complete line."""
        for line in text.splitlines():
            if line:
                self.lines.append(line)
                self.written += 1
        return len(text)

    def since(self, seen: int) -> list[str]:
        """The lines written after the first ``seen`` (as many as are still kept)."""
        new = min(self.written - seen, len(self.lines))
        return list(self.lines)[len(self.lines) - new :] if new > 0 else []


class LogScreen(Screen[None]):
    """The box's log, following new lines."""

    BINDINGS = [Binding("escape", "app.pop_screen", "Back")]
    DEFAULT_CSS = "LogScreen RichLog { height: 1fr; }"

    def __init__(self, buffer: LogBuffer) -> None:
        super().__init__()
        self.buffer = buffer
        self._seen = 0

    def compose(self) -> ComposeResult:
        """Header, log, footer."""
        yield Header(icon="◆")
        yield RichLog(max_lines=5000, wrap=True, markup=False, highlight=False)
        yield Footer()

    def on_mount(self) -> None:
        """Show what is there and follow."""
        self.sub_title = "logs"
        self._follow()
        self.set_interval(0.5, self._follow)

    def _follow(self) -> None:
        log = self.query_one(RichLog)
        for line in self.buffer.since(self._seen):
            log.write(safe(line))  # log lines quote peers (user agents, names)
        self._seen = self.buffer.written
