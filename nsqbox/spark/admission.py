"""Admission control: how many messages a micro-batch may take, and whether to plan one now.

Kafka's source gives Spark ``maxOffsetsPerTrigger``, ``minOffsetsPerTrigger``
and ``maxTriggerDelay``; the ``nsq`` source has the same three, counted in
messages: ``maxMessagesPerTrigger``, ``minMessagesPerTrigger`` and
``maxTriggerDelay``. Spark asks a source for its *default read limit* and hands
it back with each ``latestOffset(start, limit)``, or another limit where the
trigger says so (``ReadAllAvailable`` for ``Trigger.Once``). pyspark's Python
limits hold one number each (there is no composite limit, and ``ReadMinRows``
has no delay), so the source keeps the rest itself: with a minimum, the
default limit is ``ReadMinRows`` and the maximum and the delay come from the
options, as Kafka's ``CompositeReadLimit`` would carry them.

:class:`Admission` decides from the channel's depth (:mod:`.depth`; None when
a node cannot be asked): no batch while every node is known to be empty, no
batch while fewer than the minimum wait and the delay since the last batch has
not passed, else a batch of at most the maximum. Pure: no pyspark, no NSQ.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["Admission", "Bounds", "lag_report", "total_depth"]


@dataclass(frozen=True)
class Bounds:
    """One trigger's limits: the most messages (None: all available) and the fewest."""

    max_rows: int | None
    min_rows: int | None = None


def total_depth(depths: Mapping[str, int | None]) -> int | None:
    """The sum of the nodes' depths, or None when one of them is unknown."""
    values = list(depths.values())
    if any(v is None for v in values):
        return None
    return sum(v for v in values if v is not None)


def lag_report(depths: Mapping[str, int | None]) -> dict[str, Any] | None:
    """``{"depth": n, "nodes": {address: n}}`` from the nodes' depths; None with no node.

    A node whose depth could not be asked (no HTTP address, no answer, the channel
    not created yet) is listed with ``None``, and then the total is unknown too:
    ``depth`` is left out rather than reported as 0 (a lag of 0 would say "caught up").
    """
    if not depths:
        return None
    report: dict[str, Any] = {"nodes": dict(depths)}
    total = total_depth(depths)
    if total is not None:
        report = {"depth": total, **report}
    return report


class Admission:
    """Whether a trigger plans a batch, and how large (see the module docstring).

    ``max_trigger_delay`` runs from the last planned batch, or from the first
    trigger this object saw (a restarted query waits a whole delay first, as
    Kafka's source does).
    """

    def __init__(
        self, max_trigger_delay: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.max_trigger_delay = max_trigger_delay
        self._clock = clock
        self._last_batch: float | None = None

    def delay_passed(self) -> bool:
        """True once ``max_trigger_delay`` has passed since the last batch."""
        now = self._clock()
        if self._last_batch is None:
            self._last_batch = now
        return now - self._last_batch >= self.max_trigger_delay

    def planned(self) -> None:
        """A batch was planned now: the delay starts again."""
        self._last_batch = self._clock()

    def rows(self, bounds: Bounds, available: int | None, fallback: int) -> int | None:
        """How many messages the next batch may take, or None to plan no batch now.

        ``available`` is what waits over all nodes (None: unknown, taken as
        "some"). A batch may take the maximum; with a maximum of None (all
        available) it takes what waits, or ``fallback`` when that is unknown
        (the caller's own bound).
        """
        if available == 0:
            self.delay_passed()  # starts the delay's clock on the first idle trigger
            return None
        if (
            bounds.min_rows is not None
            and available is not None
            and available < bounds.min_rows
            and not self.delay_passed()
        ):
            return None
        if bounds.max_rows is None:
            return fallback if available is None else available
        # the depth decides whether to plan, not how much: more may have arrived since
        # (nsqd copies a message to its channels after PUB has answered)
        return bounds.max_rows
