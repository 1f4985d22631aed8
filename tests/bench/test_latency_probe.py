"""bench/latency_probe.py's line, as bench/side_by_side.py reads it."""

from __future__ import annotations

from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_percentiles_of_reads_p50_and_p99(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.syspath_prepend(str(BENCH))  # the probe imports its sibling bench_writer
    from latency_probe import percentiles_of

    line = "latency: 6400 msgs, 400 msgs/s measured, e2e p50=1.25ms p99=13.50ms p100=20.00ms"
    assert percentiles_of(line) == (1.25, 13.5)
    with pytest.raises(SystemExit, match="no latency"):
        percentiles_of("latency: nothing")
