"""How fast a recording is replayed: the speed's bounds and how it is written, and the route
that replays a file under the broker clock. Shared by the command and the handle
(:mod:`.replay`) and by nsqd's step replay, which imports only this (no file, no HTTP client).
"""

from __future__ import annotations

from typing import Final

__all__ = ["MAX_SPEED", "MIN_SPEED", "STEP_PATH", "parse_speed"]

#: The fastest a recording's spacing can be replayed, and the slowest.
MAX_SPEED: Final = 1_000_000.0
MIN_SPEED: Final = 0.001
#: nsqbox's route that replays a file under the broker clock.
STEP_PATH: Final = "/nsqbox/replay/step"


def parse_speed(text: str | float) -> float | None:
    """A speed: ``"max"`` (None: as fast as possible), or a factor such as ``"10x"``,
    ``"0.5x"``, ``2`` or ``"2"``; ValueError outside :data:`MIN_SPEED` to :data:`MAX_SPEED`."""
    if text == "max":
        return None
    if isinstance(text, bool):
        raise ValueError(f"speed must be max or a factor such as 10x, not {text!r}")
    try:
        speed = float(text.removesuffix("x") if isinstance(text, str) else text)
    except ValueError:
        raise ValueError(f"speed must be max or a factor such as 10x, not {text!r}") from None
    if not MIN_SPEED <= speed <= MAX_SPEED:
        raise ValueError(f"speed must be between {MIN_SPEED:g}x and {MAX_SPEED:g}x, not {text!r}")
    return speed
