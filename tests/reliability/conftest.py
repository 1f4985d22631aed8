"""Reliability suite: fuzzing, faults, load and limits against real servers.

Its figures (cases tried, connections held, messages, RSS) are printed in the
terminal summary, so CI logs show them without ``-s``.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, settings

from tests.reliability import figures

# Every run tries the same cases: derandomized, no example database, no deadline
# (a live server under load answers in its own time; hangs are caught by timeouts).
settings.register_profile(
    figures.PROFILE,
    max_examples=figures.WIRE_EXAMPLES,
    derandomize=True,
    deadline=None,
    database=None,
    print_blob=False,
    suppress_health_check=[
        HealthCheck.too_slow,
        HealthCheck.data_too_large,
        HealthCheck.function_scoped_fixture,
        HealthCheck.filter_too_much,
    ],
)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Print the suite's figures after the test results."""
    found = figures.figures()
    if not found:
        return
    terminalreporter.write_sep("-", "nsqbox reliability figures")
    profile = settings.get_profile(figures.PROFILE)
    examples = ", ".join(f"{k} {v}" for k, v in figures.EXAMPLES.items())
    found = {
        "hypothesis": f"derandomize={profile.derandomize}, deadline={profile.deadline}",
        "hypothesis max_examples": examples,
        **found,
    }
    width = max(map(len, found))
    for name, value in found.items():
        terminalreporter.write_line(f"{name:<{width}}  {value}")
    seconds = sum(
        getattr(report, "duration", 0.0)
        for reports in terminalreporter.stats.values()
        for report in reports
        if getattr(report, "nodeid", "").startswith("tests/reliability/")
    )
    terminalreporter.write_line(f"{'reliability tests time (s)':<{width}}  {seconds:.1f}")
