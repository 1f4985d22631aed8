"""End-to-end processing latency percentiles over a sliding window (internal/quantile).

nsqd keeps, per channel, the time from publish to FIN of recent messages and
reports chosen percentiles of it (``--e2e-processing-latency-percentile``) over
``--e2e-processing-latency-window-time``. As in nsqd, the window is two
summaries: new samples go into the current one, and every half window the
other is reset and becomes current, so a query sees between half a window and
a whole window of data.

Each summary is a biased-quantile stream after Cormode, Korn, Muthukrishnan and
Srivastava ("Effective computation of biased quantiles over data streams",
ICDE 2005), targeted at the configured percentiles with 1% rank error, the
algorithm nsqd uses through bmizerany/perks. Samples are buffered and merged
into the summary in sorted batches, so an insert is an append and the summary
stays a few hundred entries whatever the traffic.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence

from ...wire.documents import Percentile, QuantileResult, nanoseconds_to_human

__all__ = [
    "BUFFER_SIZE",
    "EPSILON",
    "TAIL_FRACTION",
    "Percentile",
    "Quantile",
    "QuantileResult",
    "nanoseconds_to_human",
]

#: Allowed rank error, as a fraction of the rank (perks' Epsilon)...
EPSILON = 0.01
#: ...but never more than this fraction of the tail above the target, so p99
#: and p99.9 stay meaningful (nsqd's fixed 1% lets p99 report the maximum).
TAIL_FRACTION = 0.1
#: Samples buffered before they are merged into the summary.
BUFFER_SIZE = 500


class _Stream:
    """A CKMS summary targeted at some quantiles: sorted ``[value, width, delta]`` entries.

    ``width`` is how many observations an entry stands for; ``delta`` bounds
    the uncertainty of its rank. ``count`` is the sum of widths.
    """

    __slots__ = ("_buffer", "_entries", "_targets", "count")

    def __init__(self, targets: Sequence[float]) -> None:
        # (quantile, epsilon) pairs.
        self._targets = tuple(
            (q, min(EPSILON, (1 - q) * TAIL_FRACTION) or EPSILON) for q in targets
        )
        self._buffer: list[float] = []
        self._entries: list[list[float]] = []
        self.count = 0.0

    def insert(self, value: float) -> None:
        self._buffer.append(value)
        if len(self._buffer) >= BUFFER_SIZE:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._buffer.sort()
            self._merge([[v, 1.0, 0.0] for v in self._buffer])
            self._buffer.clear()

    def samples(self) -> list[list[float]]:
        self.flush()
        return [list(e) for e in self._entries]

    def reset(self) -> None:
        self._buffer.clear()
        self._entries = []
        self.count = 0.0

    def _allowed(self, rank: float) -> float:
        """The invariant f(r, n): how wide an entry at ``rank`` may be."""
        n = self.count
        best = math.inf
        for q, eps in self._targets:
            if q * n <= rank:
                f = 2 * eps * rank / q
            elif q < 1:
                f = 2 * eps * (n - rank) / (1 - q)
            else:  # the maximum: no slack below it (Go divides by zero into +Inf)
                f = math.inf
            best = min(best, f)
        return best

    def _merge(self, incoming: list[list[float]]) -> None:
        """Merge sorted ``incoming`` entries into the summary, then compress it."""
        merged: list[list[float]] = []
        entries = self._entries
        i = 0
        rank = 0.0
        for value, width, delta in incoming:
            while i < len(entries) and entries[i][0] <= value:
                rank += entries[i][1]
                merged.append(entries[i])
                i += 1
            # A new minimum or maximum has an exact rank; inside, the rank of
            # the new entry is known only up to what the invariant allows.
            inside = 0 < i < len(entries)
            if inside:
                delta = max(delta, math.floor(self._allowed(rank)) - 1)
            merged.append([value, width, delta])
            self.count += width
            rank += width
        merged.extend(entries[i:])
        self._entries = merged
        self._compress()

    def _compress(self) -> None:
        entries = self._entries
        if len(entries) < 2:
            return
        # Walk from the top, folding each entry into its successor while the
        # pair still satisfies the invariant at that rank.
        kept = [entries[-1]]
        rank = self.count - 1 - entries[-1][1]
        for entry in reversed(entries[:-1]):
            upper = kept[-1]
            if entry[1] + upper[1] + upper[2] <= self._allowed(rank):
                upper[1] += entry[1]
            else:
                kept.append(entry)
            rank -= entry[1]
        kept.reverse()
        self._entries = kept

    def query(self, q: float) -> float:
        self.flush()
        entries = self._entries
        if not entries:
            return 0.0
        target = math.ceil(q * self.count)
        target += math.ceil(self._allowed(target) / 2)
        previous = entries[0]
        rank = 0.0
        for entry in entries[1:]:
            rank += previous[1]
            if rank + entry[1] + entry[2] > target:
                return previous[0]
            previous = entry
        return previous[0]


class Quantile:
    """Sliding-window percentiles of message latency (nsqd's ``quantile.Quantile``).

    ``insert(timestamp_ns)`` records ``now - timestamp_ns`` (the message's
    publish time in wall-clock ns); :meth:`result` reports the configured
    percentiles in ns. ``clock`` (seconds, monotonic) drives the window and
    ``wall_clock_ns`` the latency; tests may pass their own.
    """

    def __init__(
        self,
        window_time_s: float,
        percentiles: Sequence[float],
        *,
        clock: Callable[[], float] = time.monotonic,
        wall_clock_ns: Callable[[], int] = time.time_ns,
    ) -> None:
        self.percentiles = list(percentiles)
        self.move_window_time = window_time_s / 2
        self._clock = clock
        self._wall_clock_ns = wall_clock_ns
        self._streams = (_Stream(self.percentiles), _Stream(self.percentiles))
        self._current = 0
        self._last_move = clock()

    def insert(self, timestamp_ns: int) -> None:
        """Record one finished message published at ``timestamp_ns`` (wall clock)."""
        self._rotate()
        self._streams[self._current].insert(float(self._wall_clock_ns() - timestamp_ns))

    def result(self) -> QuantileResult:
        """Count and percentiles over the window (values in ns)."""
        self._rotate()
        merged = _Stream(self.percentiles)
        for stream in self._streams:
            merged._merge(stream.samples())
        return QuantileResult(
            count=int(merged.count),
            percentiles=[Percentile(q, merged.query(q)) for q in self.percentiles],
        )

    def merge(self, other: Quantile) -> None:
        """Add ``other``'s samples, current into current and previous into previous.

        How nsqd aggregates a topic's latency from its channels.
        """
        for offset in (0, 1):
            ours = self._streams[self._current ^ offset]
            ours.flush()
            ours._merge(other._streams[other._current ^ offset].samples())
        self._last_move = max(self._last_move, other._last_move)

    def _rotate(self) -> None:
        step = self.move_window_time
        elapsed = self._clock() - self._last_move
        if step <= 0 or elapsed <= step:
            return
        # Every half window the older summary is reset and becomes current; after
        # an idle spell of two or more halves, both are stale.
        moves = math.ceil(elapsed / step) - 1
        for _ in range(min(moves, 2)):
            self._current ^= 1
            self._streams[self._current].reset()
        if moves > 2 and moves % 2:
            self._current ^= 1
        self._last_move += moves * step
