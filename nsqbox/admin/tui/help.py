"""The help screen: every key of the view it was opened from, and what the views show."""

from __future__ import annotations

from collections.abc import Sequence

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen"]

#: Keys handled by the widgets rather than by bindings.
WIDGET_KEYS = (
    ("enter", "open the selected row"),
    ("↑ ↓ pgup pgdn", "move in the table"),
)

ABOUT = (
    "Views refresh every interval and keep the cursor on its row. Depth counts messages "
    "queued (memory and disk); in flight are sent and not yet finished; deferred wait for "
    "their delay; requeued and timed out count since the channel was created. Rates are "
    "messages per second between refreshes. Destructive actions ask first; --read-only "
    "hides them."
)


class HelpScreen(ModalScreen[None]):
    """Keys and descriptions in a table; any of Esc, q, ? closes it."""

    DEFAULT_CSS = """
    HelpScreen {
        align: center middle;
    }
    HelpScreen > VerticalScroll {
        width: 80;
        max-height: 90%;
        height: auto;
        border: thick $primary;
        background: $surface;
        padding: 1 2;
    }
    """
    BINDINGS = [Binding("escape,q,question_mark", "close", "Close")]

    def __init__(self, title: str, keys: Sequence[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text = title
        self.keys = list(keys)

    def compose(self) -> ComposeResult:
        """The table of keys and a paragraph about the numbers."""
        table = Table(box=None, show_header=False, padding=(0, 2, 0, 0))
        table.add_column(style="bold cyan", no_wrap=True)
        table.add_column()
        for key, description in [*self.keys, *WIDGET_KEYS]:
            table.add_row(key, description)
        with VerticalScroll():
            yield Static(Text(self.title_text, style="bold"))
            yield Static(table)
            yield Static(Text("\n" + ABOUT, style="dim"))

    def action_close(self) -> None:
        """Close the help."""
        self.dismiss(None)
