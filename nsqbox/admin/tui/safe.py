"""Wire text as the TUI shows it: a :class:`~rich.text.Text`, never markup, controls visible.

Every string that comes from a peer or a user — names in ``/stats``, a client's user agent, a
message body, an error — reaches a widget through here. A ``str`` given to ``Static``,
``Label``, ``DataTable.add_row`` or ``notify`` is parsed as markup (``[link=…]``, ``[red]``) and
its control characters reach the terminal; a :class:`~rich.text.Text` made by :func:`safe` is
neither (see :mod:`nsqbox.process.terminal_text`).
"""

from __future__ import annotations

from rich.console import RenderableType
from rich.text import Text

from ...process.terminal_text import UNSAFE, visible

__all__ = ["safe", "safe_cell", "safe_text"]


def safe(value: str, style: str = "") -> Text:
    """``value`` as a :class:`Text` (not markup), its control characters shown as ``\\xNN``."""
    return Text(visible(value), style=style)


def safe_text(text: Text) -> Text:
    """``text`` with its control characters shown as ``\\xNN``, its styles kept.

    ``text`` itself when it has none (the usual case: one regex search).
    """
    plain = text.plain
    if UNSAFE.search(plain) is None:
        return text
    offsets = [edge for m in UNSAFE.finditer(plain) for edge in (m.start(), m.end())]
    result = text.blank_copy()
    for piece in text.divide(offsets):
        if len(piece.plain) == 1 and UNSAFE.match(piece.plain):
            shown = Text(visible(piece.plain))
            for span in piece.spans:
                shown.stylize(span.style, 0, len(shown))
            result.append_text(shown)
        else:
            result.append_text(piece)
    return result


def safe_cell(cell: RenderableType) -> RenderableType:
    """A table cell ready for a ``DataTable``: a ``str`` as :func:`safe` text, a ``Text``
    through :func:`safe_text`; other renderables (built by the TUI itself) as they are."""
    if isinstance(cell, str):  # as DataTable's own formatter makes a one-line cell
        return Text(visible(cell), no_wrap=True, end="")
    if isinstance(cell, Text):
        return safe_text(cell)
    return cell
