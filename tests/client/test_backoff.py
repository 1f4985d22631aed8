"""The backoff timer and the reconnection delays, pure arithmetic."""

from __future__ import annotations

import pytest

from nsqbox.client.backoff import BackoffTimer, ReconnectDelay


def test_levels_double_the_duration_up_to_the_maximum() -> None:
    timer = BackoffTimer(multiplier=1.0, max_duration=10.0)
    assert timer.interval == 0.0
    durations = []
    for _ in range(6):
        timer.failure()
        durations.append(timer.interval)
    assert durations == [2.0, 4.0, 8.0, 10.0, 10.0, 10.0]
    assert timer.level == 4  # stops growing once the maximum is reached


def test_successes_step_down_one_level_each() -> None:
    timer = BackoffTimer(multiplier=0.5, max_duration=100.0)
    for _ in range(3):
        assert timer.failure()
    assert timer.interval == 4.0
    assert timer.success()
    assert timer.interval == 2.0
    assert timer.success()
    assert timer.success()
    assert timer.interval == 0.0
    assert not timer.success()


@pytest.mark.parametrize(("multiplier", "maximum"), [(1.0, 0.0), (0.0, 10.0)])
def test_disabled_timer_never_backs_off(multiplier: float, maximum: float) -> None:
    timer = BackoffTimer(multiplier, maximum)
    assert not timer.enabled
    assert not timer.failure()
    assert timer.level == 0


def test_a_small_maximum_still_backs_off() -> None:
    timer = BackoffTimer(multiplier=1.0, max_duration=1.5)
    assert timer.failure()
    assert timer.interval == 1.5
    assert not timer.failure()


def test_negative_durations_are_refused() -> None:
    with pytest.raises(ValueError, match="backoff"):
        BackoffTimer(-1.0, 1.0)


def test_reconnect_delays_follow_the_guide() -> None:
    delays = ReconnectDelay(8.0, 60.0)
    assert [delays.next() for _ in range(5)] == [8.0, 16.0, 32.0, 60.0, 60.0]
    delays.reset()
    assert delays.next() == 8.0


def test_reconnect_delay_bounds() -> None:
    with pytest.raises(ValueError, match="initial"):
        ReconnectDelay(0.0, 1.0)
    with pytest.raises(ValueError, match="initial"):
        ReconnectDelay(5.0, 1.0)
