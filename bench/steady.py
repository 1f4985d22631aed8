"""A journal-on server counted in its steady state, for ``side_by_side.py --callgrind``.

A journal's ring (``--journal-size``, 100,000 entries by default) is far from full in a short
bench: the consume row's 30,000 messages make about 80 entries (a delivery batch or a run
of FINs is one), the latency rows' load a few thousand. Until the ring is full it keeps
every message it refers to alive, so a journal-on server counted then does not free the
messages it consumed, nor the leases of their deliveries, while a journal-off server frees
each at its FIN, inside the count: the pair compares a server that defers that work with
one that does it (the consume row came out -12% to +6%). A box that runs long enough has a
full ring: each entry it records lets an older one go, with the messages only it kept (the
same frees, later).

So on the rows whose messages leave the box (the tcp rows, MPUB then consume, and the
latency rows' load) the counted journal-on servers get a ring of :data:`STEADY_RING`
entries: full from the first queue scan on, so each scan lets go of what the one before
recorded, and what a message costs to free falls inside the count as it does without the
journal. The ring's work per entry is the same whatever its size (it drops whole chunks
of entries, C loops); what a ring of 100,000 entries costs besides (the memory it holds,
which the collector's rare full passes walk) is the RSS rows', not the instructions'.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

__all__ = ["STEADY_CAPTION", "STEADY_RING", "Counted", "steady_flags"]

#: The ring (entries) of a counted journal-on server on the rows whose messages leave the
#: box. One: what a queue scan recorded is let go at the next (at most one entry, a run of
#: FINs or a delivery, is still held when the count ends: about 1% of the consume row's).
STEADY_RING = 1

#: What the instruction table's caption says of it.
STEADY_CAPTION = (
    f"journal-on servers with a full ring ({STEADY_RING} entry) on the MPUB-then-consume "
    "and latency rows, so what freeing a message costs is counted with the journal as "
    "without it (bench/steady.py)"
)


class Counted(Protocol):
    """What :func:`steady_flags` needs of a server: whether it is counted (under callgrind),
    and its own flags (``--also-with``)."""

    @property
    def callgrind(self) -> bool: ...

    @property
    def extra(self) -> Sequence[str]: ...


def steady_flags(server: Counted) -> tuple[str, ...]:
    """The flags that give ``server`` a full ring when it is counted (under callgrind):
    ``--journal-size`` of :data:`STEADY_RING`, unless its own flags choose a size
    (``--journal-size=0``: the journal off). An uncounted server gets none (its wall-clock
    rows are as a box runs; real nsqd has no such flag)."""
    if not server.callgrind:
        return ()
    for flag in server.extra:
        if flag.lstrip("-").partition("=")[0] == "journal-size":
            return ()
    return (f"--journal-size={STEADY_RING}",)
