"""Why a peer could not be reached, in a few words: ``connection refused``, as Go says it.

trio's ``open_tcp_stream`` fails with "all attempts to connect to HOST:PORT failed" and keeps
each attempt's error in an exception group underneath; httpx fails with "[Errno 111]
Connection refused" and keeps the ``OSError`` as its cause. A message that names the address
itself (``cannot reach HOST:PORT: ...``) wants only the reason, once: :func:`unreachable_reason`
digs it out. No trio or httpx here: it reads any exception's causes and groups.
"""

from __future__ import annotations

import os
import re
from typing import Final

__all__ = ["unreachable_reason"]

#: At most this many causes are looked at (a chain or group from a peer's failure is short).
_MAX_CAUSES: Final = 64
_ERRNO_PREFIX: Final = re.compile(r"^\[Errno -?\d+\] ")


def _causes(exc: BaseException) -> list[BaseException]:
    """``exc`` and what lies under it: causes, grouped exceptions, exceptions in its args."""
    found: list[BaseException] = []
    seen: set[int] = set()
    stack = [exc]
    while stack and len(found) < _MAX_CAUSES:
        current = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        found.append(current)
        under: list[BaseException] = []
        if isinstance(current, BaseExceptionGroup):
            under.extend(current.exceptions)
        under.extend(arg for arg in current.args if isinstance(arg, BaseException))
        if current.__cause__ is not None:
            under.append(current.__cause__)
        stack.extend(reversed(under))
    return found


def _words(text: str) -> str:
    """``Connection refused`` as Go writes it: ``connection refused``."""
    text = _ERRNO_PREFIX.sub("", text.strip())
    if len(text) > 1 and text[1].islower():
        text = text[0].lower() + text[1:]
    return text


def unreachable_reason(exc: BaseException) -> str:
    """Why connecting failed, without the address: the operating system's words for each
    distinct error underneath ``exc`` (``connection refused``, ``name or service not
    known``, ``timed out``), joined by ``; ``; else ``exc``'s own text (or its type's name)."""
    reasons: list[str] = []
    for cause in _causes(exc):
        if isinstance(cause, OSError) and isinstance(cause.errno, int) and cause.errno > 0:
            reason = _words(os.strerror(cause.errno))  # trio's text repeats the address
        elif isinstance(cause, OSError) and cause.strerror:
            reason = _words(cause.strerror)  # a resolver's (negative) code: its own words
        elif isinstance(cause, TimeoutError):
            reason = "timed out"
        else:
            continue
        if reason not in reasons:
            reasons.append(reason)
    if reasons:
        return "; ".join(reasons)
    return _words(str(exc)) or type(exc).__name__
