"""The figures the reliability suite states, and its fixed hypothesis settings.

Tests call :func:`record`; ``conftest.pytest_terminal_summary`` prints every
figure at the end of the session, whether or not pytest captures output.
"""

from __future__ import annotations

from typing import Final

from hypothesis import settings

#: The hypothesis profile conftest.py registers (derandomized, no deadline, no database).
PROFILE: Final = "nsqbox-reliability"

#: Examples per property, fixed so that every run tries the same cases (derandomize).
WIRE_EXAMPLES: Final = 200
TCP_EXAMPLES: Final = 500
HTTP_EXAMPLES: Final = 400
PUB_EXAMPLES: Final = 200
RAW_HTTP_EXAMPLES: Final = 150
LOOKUPD_TCP_EXAMPLES: Final = 200

#: Every fixed example count, as the summary states them.
EXAMPLES: Final = {
    "wire (each sans-IO property)": WIRE_EXAMPLES,
    "tcp (V2 streams)": TCP_EXAMPLES,
    "http (any route)": HTTP_EXAMPLES,
    "http (/pub, /mpub)": PUB_EXAMPLES,
    "http (raw bytes)": RAW_HTTP_EXAMPLES,
    "lookupd tcp (V1 streams)": LOOKUPD_TCP_EXAMPLES,
}


_figures: dict[str, str] = {}


def reliability_settings(max_examples: int) -> settings:
    """The suite's profile with ``max_examples``."""
    return settings(settings.get_profile(PROFILE), max_examples=max_examples)


def record(name: str, value: object) -> None:
    """Remember a figure for the end-of-session summary (last value wins)."""
    _figures[name] = str(value)


def add(name: str, amount: int) -> None:
    """Add to a counting figure."""
    _figures[name] = str(int(_figures.get(name, "0")) + amount)


def figures() -> dict[str, str]:
    """Every figure recorded so far, in recording order."""
    return dict(_figures)
