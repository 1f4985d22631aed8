"""How the Messages view shows a message body: a one-line preview, and the whole body as
pretty JSON when it parses, text when it is UTF-8, a hex dump otherwise. Pure functions.

Whatever is shown has its control characters made visible (:mod:`nsqbox.process.terminal_text`): a
body is UTF-8 text with no C0 control but tab, newline and CR, yet may hold C1 controls, and a
JSON string may spell any control as ``\\u001b``, which decoding turns into the character.
"""

from __future__ import annotations

import json
from enum import Enum

from rich.console import RenderableType
from rich.syntax import Syntax
from rich.text import Text

from ...process.terminal_text import visible

__all__ = ["BodyKind", "body_kind", "hex_dump", "preview", "render_body"]

#: Bytes per line of a hex dump.
HEX_WIDTH = 16


class BodyKind(Enum):
    """What a body is, for showing it."""

    JSON = "JSON"
    TEXT = "text"
    BINARY = "binary"


def _text(body: bytes) -> str | None:
    """The body as text, or None when it is not UTF-8 or holds control characters."""
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if any((c < " " and c not in "\t\n\r") or c == "\x7f" for c in text):
        return None
    return text


def body_kind(body: bytes) -> BodyKind:
    """JSON when the body parses as a JSON object or array, text when it is readable UTF-8."""
    text = _text(body)
    if text is None:
        return BodyKind.BINARY
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        try:
            json.loads(text)
        except ValueError:
            return BodyKind.TEXT
        return BodyKind.JSON
    return BodyKind.TEXT


def preview(body: bytes, width: int = 60) -> str:
    """One line of at most ``width`` characters: the text (line breaks as ``⏎``), or hex."""
    text = _text(body)
    if text is None:
        shown = body[: width // 3].hex(" ")
        more = "…" if len(body) > width // 3 else ""
        return f"0x {shown}{more}"
    flat = text.replace("\r\n", "⏎").replace("\n", "⏎").replace("\r", "⏎").replace("\t", " ")
    flat = visible(flat)
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def hex_dump(body: bytes) -> str:
    """``offset  hex bytes  |ascii|`` lines, :data:`HEX_WIDTH` bytes each."""
    lines = []
    for offset in range(0, len(body), HEX_WIDTH):
        chunk = body[offset : offset + HEX_WIDTH]
        ascii_ = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        lines.append(f"{offset:08x}  {chunk.hex(' '):<{HEX_WIDTH * 3 - 1}}  |{ascii_}|")
    return "\n".join(lines)


def render_body(body: bytes) -> tuple[BodyKind, RenderableType]:
    """The body's kind and the whole of it, ready to show."""
    kind = body_kind(body)
    if kind is BodyKind.JSON:
        pretty = visible(json.dumps(json.loads(body), indent=2, ensure_ascii=False))
        return kind, Syntax(pretty, "json", theme="ansi_dark", word_wrap=True)
    if kind is BodyKind.TEXT:
        # CRLF line ends read as line ends (Rich drops a CR), a lone CR shows
        return kind, Text(visible(body.decode("utf-8").replace("\r\n", "\n")))
    return kind, Text(hex_dump(body))
