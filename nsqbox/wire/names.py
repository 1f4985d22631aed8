"""Topic and channel name validation (internal/protocol/names.go)."""

from __future__ import annotations

import functools
import re

EPHEMERAL_SUFFIX = "#ephemeral"
_NAME_RE = re.compile(r"[.a-zA-Z0-9_-]+(#ephemeral)?")


# Every publish checks its topic's name, and a broker has a few: the answers are
# remembered, the least recently asked forgotten first (a peer cannot grow them).
@functools.lru_cache(maxsize=4096)
def is_valid_name(name: str) -> bool:
    """True when ``name`` is 1 to 64 characters of ``[.a-zA-Z0-9_-]``, optionally ``#ephemeral``."""
    return 0 < len(name) <= 64 and _NAME_RE.fullmatch(name) is not None


# nsqd keeps two names for one rule; so do we, so call sites read like the Go.
is_valid_topic_name = is_valid_name
is_valid_channel_name = is_valid_name


def is_ephemeral(name: str) -> bool:
    """True for ``...#ephemeral`` names."""
    return name.endswith(EPHEMERAL_SUFFIX)
