"""Backoff arithmetic, pure: the consumer's backoff level and reconnection delays.

The guide (Backoff): failures lengthen the backoff, successes shorten it until
the consumer is out of backoff. Like go-nsq's exponential strategy, a level
counter goes up on failure and down on success, and a level ``n`` backs off for
``multiplier * 2**n`` seconds, at most ``max_duration``. When does the clock
start, and what is ignored meanwhile, is the RDY controller's business
(:mod:`nsqbox.client.rdy`).
"""

from __future__ import annotations

__all__ = ["BackoffTimer", "ReconnectDelay"]


class BackoffTimer:
    """The backoff level and the duration it stands for."""

    def __init__(self, multiplier: float = 1.0, max_duration: float = 120.0) -> None:
        if multiplier < 0 or max_duration < 0:
            raise ValueError("backoff durations must be >= 0")
        self.multiplier = multiplier
        self.max_duration = max_duration
        #: 0 when not backing off.
        self.level = 0

    @property
    def enabled(self) -> bool:
        """False when configured away (a zero maximum or multiplier): never back off."""
        return self.max_duration > 0 and self.multiplier > 0

    def duration(self, level: int) -> float:
        """Seconds to back off at ``level`` (0 for level 0), capped at the maximum."""
        if level <= 0:
            return 0.0
        return min(self.multiplier * 2.0**level, self.max_duration)

    @property
    def interval(self) -> float:
        """Seconds to back off at the current level."""
        return self.duration(self.level)

    def failure(self) -> bool:
        """One more failure; True when the level went up.

        The level stops growing once its duration reaches the maximum (go-nsq
        stops one step earlier, so a small maximum there means no backoff at
        all), so one success always shortens the longest backoff.
        """
        if not self.enabled:
            return False
        if self.level > 0 and self.interval >= self.max_duration:
            return False
        self.level += 1
        return True

    def success(self) -> bool:
        """One success; True when the level went down."""
        if self.level == 0:
            return False
        self.level -= 1
        return True

    def reset(self) -> None:
        """Back to no backoff."""
        self.level = 0


class ReconnectDelay:
    """Delays between reconnection attempts: the guide's 8s, 16s, 32s... up to a maximum."""

    def __init__(self, initial: float = 8.0, maximum: float = 120.0) -> None:
        if initial <= 0 or maximum < initial:
            raise ValueError("need 0 < initial <= maximum")
        self.initial = initial
        self.maximum = maximum
        self._next = initial

    def next(self) -> float:
        """The delay before the next attempt (each call doubles the following one)."""
        delay = self._next
        self._next = min(self._next * 2, self.maximum)
        return delay

    def reset(self) -> None:
        """A connection succeeded: start again from the initial delay."""
        self._next = self.initial
