"""Which command each client state accepts: nsqd's per-state checks as one table.

nsqd's ``protocol_v2.go`` checks the client's state at the top of each command
(``cannot FIN in current state``...). Here the rules are one table of rows
``name: (handler, (rule in INIT, rule in SUBSCRIBED, rule in CLOSING))`` and
:func:`build_tables` turns them into a :class:`CommandTable` per state: the
handlers then check only their parameters.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Final, Generic, TypeVar

__all__ = ["IGNORE", "REFUSE", "RUN", "CommandTable", "build_tables"]

#: What a state does with a command: execute it, refuse it, or ignore it.
RUN: Final = "run"
REFUSE: Final = "refuse"
IGNORE: Final = "ignore"

H = TypeVar("H")


class CommandTable(Generic[H]):
    """What one state does with a command line: its handler, or the refusal for it."""

    __slots__ = ("handlers", "unknown")

    def __init__(self, handlers: dict[bytes, H], unknown: str) -> None:
        #: Every command the state answers, refusals included.
        self.handlers = handlers
        #: The error text for any other command (``{}``: its name, raw).
        self.unknown = unknown


def build_tables(
    rules: Mapping[bytes, tuple[H, tuple[str, ...]]],
    states: tuple[int, ...],
    *,
    refuse: Callable[[str], H],
    ignore: H,
    unknown: str,
) -> dict[int, CommandTable[H]]:
    """Each state's table from ``rules`` (a rule per state, in ``states``' order):
    ``refuse(name)`` makes a refusal's handler, ``ignore`` answers nothing."""
    tables: dict[int, CommandTable[H]] = {}
    for column, state in enumerate(states):
        handlers: dict[bytes, H] = {}
        for name, (handler, row) in rules.items():
            rule = row[column]
            if rule == RUN:
                handlers[name] = handler
            elif rule == IGNORE:
                handlers[name] = ignore
            else:
                handlers[name] = refuse(name.decode())
        tables[state] = CommandTable(handlers, unknown)
    return tables
