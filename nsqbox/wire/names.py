"""Topic and channel name validation (internal/protocol/names.go)."""

from __future__ import annotations

import re

EPHEMERAL_SUFFIX = "#ephemeral"
_NAME_RE = re.compile(r"[.a-zA-Z0-9_-]+(#ephemeral)?")
#: Names already found valid: every publish checks its topic's, and a broker has a few.
_VALID: set[str] = set()
#: Past this many, the set starts over (a peer cannot grow it without bound).
_VALID_LIMIT = 4096


def is_valid_name(name: str) -> bool:
    """True when ``name`` is 1 to 64 characters of ``[.a-zA-Z0-9_-]``, optionally ``#ephemeral``."""
    if name in _VALID:
        return True
    if 0 < len(name) <= 64 and _NAME_RE.fullmatch(name) is not None:
        if len(_VALID) >= _VALID_LIMIT:
            _VALID.clear()
        _VALID.add(name)
        return True
    return False


# nsqd keeps two names for one rule; so do we, so call sites read like the Go.
is_valid_topic_name = is_valid_name
is_valid_channel_name = is_valid_name


def is_ephemeral(name: str) -> bool:
    """True for ``...#ephemeral`` names."""
    return name.endswith(EPHEMERAL_SUFFIX)
