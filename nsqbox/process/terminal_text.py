"""Text from the wire made safe to show in a terminal: control characters made visible.

Everything a peer or a user supplies — an IDENTIFY ``user_agent`` or ``hostname``, a topic name
in someone's ``/stats``, a message body, a fault's error text — may hold terminal control
sequences: OSC 52 writes the clipboard, OSC 0 sets the window title, OSC 8 hides a link behind
innocent text, CSI 6n makes the terminal type a reply into the input. Anything shown in a
terminal goes through :func:`visible` first.

Each C0 control except tab and newline (U+0000-U+0008, U+000B-U+001F, ESC and CR included),
DEL (U+007F) and each C1 control (U+0080-U+009F) becomes the four characters of its Python
escape, ``\\xNN`` in lower-case hex: ESC is shown as ``\\x1b``, CSI (U+009B) as ``\\x9b``.
A lone surrogate, which no terminal can be sent (it is not UTF-8), is shown too: one that
carries a byte that was not UTF-8 (``surrogateescape``, as peers' names and error texts are
kept) as that byte's ``\\xNN``, any other as ``\\udNNN``.
Printable text, non-ASCII letters, CJK and emoji are kept as they are. A backslash in the input
is not doubled, so ``\\x1b`` on the screen may also be those four characters sent as they are
(as with ``cat -v``): the point is that no control character reaches the terminal.

Pure and stdlib-only, beside :mod:`nsqbox.net.addresses` at the bottom of the layers; text that is
all printable (the usual case) costs one ``str.isprintable`` call, other text that needs nothing
(a tab, a newline, a no-break space) one precompiled regex search.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["UNSAFE", "is_safe", "visible", "visible_bytes"]

#: The characters :func:`visible` rewrites: C0 but tab and newline, DEL, C1, lone surrogates.
UNSAFE: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff]")

#: The same, for bytes that are pure ASCII (no byte at or above 0x80).
_UNSAFE_ASCII: Final = re.compile(b"[\x00-\x08\x0b-\x1f\x7f]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    if code < 0xD800:
        return f"\\x{code:02x}"
    if 0xDC80 <= code <= 0xDCFF:  # a byte that was not UTF-8, kept by surrogateescape
        return f"\\x{code - 0xDC00:02x}"
    return f"\\u{code:04x}"


def is_safe(text: str) -> bool:
    """Whether ``text`` holds no character :func:`visible` would rewrite."""
    return UNSAFE.search(text) is None


def visible(text: str) -> str:
    """``text`` with every C0 control but tab and newline, DEL and C1 shown as ``\\xNN``.

    >>> visible("\\x1b]52;c;aGk=\\x07ok")
    '\\\\x1b]52;c;aGk=\\\\x07ok'
    >>> visible("café\\tok\\n")
    'café\\tok\\n'
    """
    if text.isprintable() or UNSAFE.search(text) is None:  # printable: no control at all
        return text
    return UNSAFE.sub(_escape, text)


def visible_bytes(data: bytes) -> bytes:
    """Bytes for a terminal: UTF-8 kept, control characters and invalid bytes as ``\\xNN``.

    A byte sequence that is not UTF-8 shows each offending byte as ``\\xNN`` (so a lone
    ``0x9b`` never reaches an 8-bit terminal as CSI); the result is always UTF-8.
    """
    if data.isascii() and _UNSAFE_ASCII.search(data) is None:
        return data
    return visible(data.decode("utf-8", "backslashreplace")).encode("utf-8")
