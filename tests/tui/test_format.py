"""How numbers, rates, durations, latencies and sparklines are written."""

from __future__ import annotations

from datetime import UTC

import pytest

from nsqbox.admin.stats import Latency, Percentile
from nsqbox.admin.tui import format as fmt


@pytest.mark.parametrize(
    ("value", "text"),
    [(None, "-"), (0.0, "0"), (2.54, "2.5/s"), (99.94, "99.9/s"), (1234.4, "1,234/s")],
)
def test_rate(value: float | None, text: str) -> None:
    assert fmt.rate(value) == text


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (45, "45s"), (187, "3m07s"), (7_500, "2h05m"), (99_000, "1d3h")],
)
def test_duration(seconds: int, text: str) -> None:
    assert fmt.duration_ns(seconds * 1_000_000_000) == text


@pytest.mark.parametrize(
    ("ns", "text"),
    [
        (500, "500ns"),
        (850_000, "850µs"),
        (12_340_000, "12.3ms"),
        (250e6, "250ms"),
        (1.52e9, "1.52s"),
    ],
)
def test_latency_ns(ns: float, text: str) -> None:
    assert fmt.latency_ns(ns) == text


def test_latency_quantiles() -> None:
    latency = Latency(count=3, percentiles=[Percentile(0.99, 38e6, average=38e6)])
    assert fmt.latency(latency) == "p99 38.0ms"
    assert fmt.latency(latency, (0.5, 0.99)) == "p99 38.0ms"
    assert fmt.latency(Latency()) == "-"
    assert fmt.has_latency(Latency(), latency)
    assert not fmt.has_latency(Latency())


def test_spark() -> None:
    assert fmt.spark([0, 1, 2, 3, 4, 5, 6, 7], width=8) == "▁▂▃▄▅▆▇█"
    assert fmt.spark([None, 0.0, 0.0], width=4) == "  ▁▁"
    assert fmt.spark([], width=3) == "   "
    # one value is no trend yet: the baseline, not a full block
    assert fmt.spark([7.5], width=3) == "  ▁"
    assert fmt.spark([None, 7.5], width=3) == "  ▁"
    assert fmt.spark([7.5, 15.0], width=3) == " ▅█"
    assert len(fmt.spark(list(range(40)))) == 12


def test_counts_and_clock() -> None:
    assert (fmt.count(1234567), fmt.number(42).plain) == ("1,234,567", "42")
    assert (fmt.plural(1, "node"), fmt.plural(1000, "message")) == ("1 node", "1,000 messages")
    assert fmt.wall_clock(1_767_270_896.0, UTC) == "12:34:56"
