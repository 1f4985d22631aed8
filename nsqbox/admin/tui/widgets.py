"""The TUI's own widgets: a table that updates in place, a rate plot and the status line."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from rich.console import RenderableType
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import DataTable, Sparkline, Static
from textual.widgets.data_table import RowKey

from . import format as fmt
from .safe import safe, safe_cell

__all__ = ["Column", "RatePlot", "Row", "StatsTable", "StatusLine"]


@dataclass(frozen=True, slots=True)
class Column:
    """One column of a :class:`StatsTable`: its key, header and (optional) fixed width."""

    key: str
    label: str
    width: int | None = None


@dataclass(frozen=True, slots=True)
class Row:
    """One row: a key that names what it shows (a topic, a node...) and its cells."""

    key: str
    cells: tuple[RenderableType, ...]


class StatsTable(DataTable[Any]):
    """A row-cursor table that :meth:`show` updates in place.

    The rows are keyed: changed cells are rewritten one by one while the set of rows stays
    the same, so the cursor and the scroll position do not move. When rows come or go, the
    table is rebuilt and the cursor follows the row it was on (or stays at its index when that
    row went away); a table that empties for a while (a refresh that failed, a filter) puts
    the cursor back on that row when it returns. Every cell is shown as text, never as
    markup, its control characters visible (:func:`~nsqbox.admin.tui.safe.safe_cell`): cells
    hold names and user agents from the wire.
    """

    DEFAULT_CSS = """
    StatsTable {
        height: 1fr;
    }
    """

    def __init__(self, *, id: str | None = None, header_height: int = 1) -> None:
        super().__init__(id=id, cursor_type="row", zebra_stripes=True, header_height=header_height)
        self._column_keys: tuple[str, ...] = ()
        self._rows: dict[str, tuple[RenderableType, ...]] = {}
        #: The columns' widths when the table last measured them.
        self._widths: tuple[int, ...] = ()
        #: The row the cursor was on before the table emptied (a failed refresh, a filter).
        self._emptied_on: str | None = None

    def _update_dimensions(self, new_rows: Iterable[RowKey]) -> None:
        """Measure as ``DataTable`` does, then drop its rendered cells if a width changed.

        ``DataTable`` measures new and changed cells when it is idle, but keys its cache of
        rendered cells without their widths: a row drawn between ``add_row`` and that idle
        moment (a busy process, a screen refreshing first) stayed drawn at the header's width
        ("memor" for "memory") until some later change. Clearing the cache on a width change
        draws every row again at the measured widths.
        """
        super()._update_dimensions(new_rows)
        widths = tuple(column.get_render_width(self) for column in self.ordered_columns)
        if widths != self._widths:
            self._widths = widths
            self.notify_style_update()  # DataTable's way to clear its rendered cells and refresh

    @property
    def selected_key(self) -> str | None:
        """The key of the row under the cursor, or None when the table is empty."""
        if not self.row_count:
            return None
        index = min(self.cursor_row, self.row_count - 1)
        value = self.ordered_rows[index].key.value
        return None if value is None else str(value)

    @property
    def keys(self) -> list[str]:
        """The rows' keys, top to bottom."""
        return list(self._rows)

    def cells(self, key: str) -> tuple[str, ...]:
        """The row ``key``'s cells as plain text (for tests and the filter)."""
        return tuple(c.plain if isinstance(c, Text) else str(c) for c in self._rows[key])

    def show(self, columns: Sequence[Column], rows: Sequence[Row]) -> None:
        """Make the table show ``rows`` under ``columns``, touching only what changed."""
        column_keys = tuple(c.key for c in columns)
        rows = [Row(r.key, tuple(safe_cell(c) for c in r.cells)) for r in rows]
        selected = self.selected_key if self._rows else self._emptied_on
        self._emptied_on = selected if not rows else None
        if column_keys != self._column_keys:
            self.clear(columns=True)
            for column in columns:
                self.add_column(column.label, key=column.key, width=column.width)
            self._column_keys = column_keys
            self._rows = {}
        if [r.key for r in rows] == list(self._rows):
            for row in rows:
                old = self._rows[row.key]
                for column_key, new, previous in zip(column_keys, row.cells, old, strict=True):
                    if new != previous:
                        self.update_cell(row.key, column_key, new, update_width=True)
                self._rows[row.key] = row.cells
            return
        index = self.cursor_row
        self.clear()
        self._rows = {}
        for row in rows:
            self.add_row(*row.cells, key=row.key)
            self._rows[row.key] = row.cells
        keys = list(self._rows)
        if selected in self._rows:
            index = keys.index(selected)
        if keys:
            self.move_cursor(row=min(index, len(keys) - 1), animate=False)

    def select(self, key: str) -> bool:
        """Put the cursor on row ``key``; False when there is no such row."""
        if key not in self._rows:
            return False
        self.move_cursor(row=list(self._rows).index(key), animate=False)
        return True


class RatePlot(Vertical):
    """A caption and a sparkline of a rate's history (messages per second, oldest first)."""

    DEFAULT_CSS = """
    RatePlot {
        height: auto;
        padding: 0 1;
    }
    RatePlot > .rate-caption {
        color: $text-muted;
    }
    RatePlot > Sparkline {
        height: 2;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._series: list[float | None] = []
        self._title = "rate"

    def compose(self) -> ComposeResult:
        """A caption line over the sparkline."""
        yield Static(classes="rate-caption")
        yield Sparkline([])

    def plot(self, title: str, series: Sequence[float | None]) -> None:
        """Show ``series`` under ``title`` (``topic orders``)."""
        self._series = list(series)
        self._title = title
        known = [v for v in self._series if v is not None]
        if known:
            caption = (
                f"{title}: {fmt.rate(known[-1])} now, peak {fmt.rate(max(known))}, "
                f"over the last {len(self._series)} refreshes"
            )
        else:
            caption = f"{title}: collecting rates…"
        self.query_one(".rate-caption", Static).update(safe(caption))
        # A plot needs two rates (three refreshes): Textual draws one value as a full-height
        # block, which reads as a peak. Until then, the empty plot's baseline.
        plotted = [v or 0.0 for v in self._series] if len(known) >= 2 else []
        self.query_one(Sparkline).data = plotted

    @property
    def series(self) -> list[float | None]:
        """What is plotted."""
        return list(self._series)


class StatusLine(Static):
    """One line about the cluster (where, how many, when) and one per failed host."""

    DEFAULT_CSS = """
    StatusLine {
        height: auto;
        max-height: 6;
        padding: 0 1;
        background: $panel;
        color: $text-muted;
    }
    """

    def __init__(self) -> None:
        super().__init__("connecting…")
        self.text = "connecting…"

    def set(self, summary: str, errors: Sequence[str] = (), notes: Sequence[str] = ()) -> None:
        """Show ``summary``, then ``notes`` and, in red, ``errors`` under it (as text,
        controls visible)."""
        text = safe(summary)
        for line in notes:
            text.append("\n")
            text.append_text(safe(line))
        for line in errors:
            text.append("\n")
            text.append_text(safe(line, "bold red"))
        self.text = text.plain
        self.update(text)
