"""Where a box's state was last loaded from: the record each nsqd keeps of its last load.

Every load into an nsqd (``nsqbox up --load`` and ``--seed``, ``nsqbox snapshot load``, the
test handle's ``load``) leaves a :class:`LoadedSnapshot` on it: the file's name (its base name,
as the loader gave it: never a path), when it was loaded (real time), whether it replaced what
the node held, and how many messages it brought. The admin service reports the box's latest
(:func:`latest`) at ``GET /api/snapshot``, and the TUI shows it on its status line.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from typing import Any, Final

from ..process.terminal_text import visible

__all__ = ["MAX_NAME_CHARS", "LoadedSnapshot", "latest", "load_name"]

#: The longest file name kept (a longer one is cut, with an ellipsis).
MAX_NAME_CHARS: Final = 255


def load_name(path: str | os.PathLike[str] | None) -> str:
    """The name a load of ``path`` is recorded under: its base name, bounded, with control
    characters made visible ("" for None)."""
    if path is None:
        return ""
    name = os.path.basename(os.fspath(path).rstrip("/")) or os.fspath(path)
    if len(name) > MAX_NAME_CHARS:
        name = name[: MAX_NAME_CHARS - 1] + "…"
    return visible(name)


@dataclass(frozen=True, slots=True)
class LoadedSnapshot:
    """One load into one nsqd."""

    #: The file's base name ("" when the loader did not say).
    file: str
    #: When it was loaded: real wall-clock time, ns since the epoch.
    loaded_at_ns: int
    #: Whether it replaced what the node held (else it was merged in).
    replace: bool
    #: Messages it brought into this node.
    messages: int
    #: The load this was part of: the same for every node of one load ("" when not said).
    load_id: str = ""

    def doc(self) -> dict[str, Any]:
        """As JSON: ``{"file", "loaded_at_ns", "replace", "messages"}``."""
        doc = asdict(self)
        del doc["load_id"]
        return doc


def latest(records: Iterable[LoadedSnapshot | None]) -> dict[str, Any] | None:
    """The box's last load over its nodes' records, as JSON (None when none was loaded):
    the latest record, with ``messages`` summed over every node of the same load and
    ``nodes`` counting them."""
    known = [r for r in records if r is not None]
    if not known:
        return None
    last = max(known, key=lambda r: r.loaded_at_ns)
    same = [r for r in known if r is last or (last.load_id and r.load_id == last.load_id)]
    return {**last.doc(), "messages": sum(r.messages for r in same), "nodes": len(same)}
