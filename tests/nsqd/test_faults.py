"""nsqd's faults on demand (nsqbox.nsqd.domain.faults) on one NSQD with a hand-moved clock.

The handle-level tests (tests/testing/test_faults.py) observe the faults with real
clients; these pin the bookkeeping: counts, durations, scopes, listing and lifting.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from nsqbox.nsqd.domain.faults import DISK_FULL_ERROR
from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.domain.topic import TopicError


class Clock:
    """A clock the test moves."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def nsqd(tmp_path: Path, clock: Clock) -> Iterator[NSQD]:
    node = NSQD(NSQDOptions(data_path=str(tmp_path)), now=clock)
    yield node
    node.close()


def test_no_fault_means_no_check(nsqd: NSQD) -> None:
    assert nsqd.publish_fault is None
    nsqd.get_topic("t").put_message(b"x")
    fault = nsqd.faults.fail_publishes(count=1)
    assert nsqd.publish_fault is not None
    with pytest.raises(TopicError, match="fault injected: publish failed"):
        nsqd.get_topic("t").put_messages([b"a", b"b"])  # one command counts once
    assert nsqd.publish_fault is None  # the count ran out: the hot path is clean again
    assert nsqd.faults.active() == []
    assert not nsqd.faults.lift(fault.id)
    nsqd.get_topic("t").put_message(b"y")
    assert nsqd.get_topic("t").message_count == 2


def test_a_fault_for_a_time_ends_by_itself(nsqd: NSQD, clock: Clock) -> None:
    nsqd.faults.disk_full("t", duration=5.0)
    assert nsqd.get_health() == f"NOK - {DISK_FULL_ERROR}"
    assert not nsqd.is_healthy()
    with pytest.raises(TopicError, match=DISK_FULL_ERROR):
        nsqd.get_topic("t").put_message(b"x")
    nsqd.get_topic("other").put_message(b"x")  # scoped to "t"
    clock.now += 5.0
    assert nsqd.get_health() == "OK"
    nsqd.get_topic("t").put_message(b"x")
    assert nsqd.faults.active() == []
    assert nsqd.publish_fault is None


def test_faults_are_listed_oldest_first_and_lifted(nsqd: NSQD) -> None:
    first = nsqd.faults.fail_publishes("a", count=2, error="nope")
    second = nsqd.faults.disk_full()
    listed = [f.describe() for f in nsqd.faults.active()]
    assert [(f["id"], f["kind"], f["topic"], f["remaining"]) for f in listed] == [
        (first.id, "fail_publishes", "a", 2),
        (second.id, "disk_full", None, None),
    ]
    with pytest.raises(TopicError, match="nope"):  # the first that matches answers
        nsqd.get_topic("a").put_message(b"x")
    assert nsqd.faults.active()[0].remaining == 1
    assert nsqd.faults.lift(second.id)
    assert nsqd.get_health() == "OK"
    assert nsqd.faults.lift_all() == 1
    assert nsqd.publish_fault is None


def test_a_real_backend_failure_still_shows_first(nsqd: NSQD) -> None:
    nsqd.faults.disk_full(error="fault")
    nsqd.set_health("real failure")
    assert nsqd.get_health() == "NOK - real failure"
    nsqd.set_health(None)
    assert nsqd.get_health() == "NOK - fault"


@pytest.mark.parametrize(("count", "duration"), [(0, None), (None, 0.0), (-1, None)])
def test_bad_arguments(nsqd: NSQD, count: int | None, duration: float | None) -> None:
    with pytest.raises(ValueError, match="must be"):
        nsqd.faults.fail_publishes(count=count, duration=duration)
    assert nsqd.faults.active() == []
