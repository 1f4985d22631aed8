"""How the TUI writes numbers, rates, durations, latencies and tiny plots. Pure functions.

Every cell of every table goes through here, so the views agree on one look: counts with
thousands separators, rates with one decimal below 100/s, durations as ``1h02m``, latencies in
the largest unit that keeps them readable, and rate history as a row of block characters.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, tzinfo

from rich.text import Text

from ..stats import Latency

__all__ = [
    "BLOCKS",
    "NONE",
    "count",
    "duration_ns",
    "flag",
    "has_latency",
    "latency",
    "latency_ns",
    "number",
    "plural",
    "rate",
    "spark",
    "wall_clock",
]

#: What a cell shows when there is no value (a rate before two refreshes, no latency...).
NONE = "-"

#: The eight heights of a text sparkline, lowest first.
BLOCKS = "▁▂▃▄▅▆▇█"


def count(value: int) -> str:
    """``1,234,567``."""
    return f"{value:,}"


def number(value: int) -> Text:
    """A count, right-aligned in its cell (numbers line up in columns)."""
    return Text(count(value), justify="right")


def rate(value: float | None) -> str:
    """Messages per second: ``-`` when unknown, ``0``, ``2.5/s``, ``1,234/s``."""
    if value is None:
        return NONE
    if value == 0:
        return "0"
    if value < 100:
        return f"{value:.1f}/s"
    return f"{value:,.0f}/s"


def plural(n: int, word: str) -> str:
    """``1 channel``, ``2 channels``, ``1,000 messages``."""
    return f"{n:,} {word}{'' if n == 1 else 's'}"


def flag(value: bool, text: str = "yes") -> str:
    """``text`` when set, empty otherwise (a column of mostly-empty cells reads faster)."""
    return text if value else ""


def duration_ns(value: int) -> str:
    """A duration in nanoseconds, in at most two units: ``45s``, ``3m07s``, ``2h05m``, ``4d3h``."""
    seconds = max(0, value // 1_000_000_000)
    if seconds < 60:
        return f"{seconds}s"
    minutes, seconds = divmod(seconds, 60)
    if minutes < 60:
        return f"{minutes}m{seconds:02d}s"
    hours, minutes = divmod(minutes, 60)
    if hours < 24:
        return f"{hours}h{minutes:02d}m"
    days, hours = divmod(hours, 24)
    return f"{days}d{hours}h"


def latency_ns(value: float) -> str:
    """A latency given in nanoseconds: ``850µs``, ``12.3ms``, ``1.52s``."""
    if value < 1_000:
        return f"{value:.0f}ns"
    if value < 1_000_000:
        return f"{value / 1_000:.0f}µs"
    if value < 1_000_000_000:
        ms = value / 1_000_000
        return f"{ms:.1f}ms" if ms < 100 else f"{ms:.0f}ms"
    return f"{value / 1_000_000_000:.2f}s"


def latency(value: Latency, quantiles: Sequence[float] = (0.99,)) -> str:
    """End-to-end latency at ``quantiles`` (``p99 12.3ms``), or ``-`` when not reported.

    nsqd reports it only when started with ``--e2e-processing-latency-percentile``.
    """
    by_quantile = {p.quantile: p for p in value.percentiles}
    parts = []
    for q in quantiles:
        p = by_quantile.get(q)
        if p is not None:
            parts.append(f"p{q * 100:g} {latency_ns(p.average)}")
    return " ".join(parts) if parts else NONE


def has_latency(*values: Latency) -> bool:
    """Whether any of ``values`` carries percentiles (so a latency column is worth showing)."""
    return any(v.percentiles for v in values)


def spark(values: Sequence[float | None], width: int = 12) -> str:
    """The last ``width`` values as block characters, scaled to their maximum.

    Unknown values (None) are blanks; all-zero history is a flat line of the lowest block,
    and so is a single value (scaled to itself it would be a full block: a peak it is not).
    """
    tail = list(values)[-width:]
    known = [v for v in tail if v is not None]
    top = max(known, default=0.0) if len(known) >= 2 else 0.0
    out = []
    for v in tail:
        if v is None:
            out.append(" ")
        elif top <= 0:
            out.append(BLOCKS[0])
        else:
            out.append(BLOCKS[min(len(BLOCKS) - 1, int(v / top * (len(BLOCKS) - 1) + 0.5))])
    return "".join(out).rjust(width)


def wall_clock(when: float, tz: tzinfo | None = None) -> str:
    """``HH:MM:SS`` of a Unix time, in ``tz`` (default: the local zone)."""
    return datetime.fromtimestamp(when, tz).strftime("%H:%M:%S")
