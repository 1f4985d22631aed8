"""The RDY controller on a fake clock: the exact RDY commands for each situation in the guide."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqbox.client.backoff import BackoffTimer
from nsqbox.client.rdy import RdyController


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Harness:
    """A controller whose RDY commands are recorded as ``(connection, count)``."""

    def __init__(self, max_in_flight: int, *, seed: int = 1, **kwargs: object) -> None:
        self.clock = Clock()
        self.sent: list[tuple[str, int]] = []
        self.scheduled = 0
        backoff = kwargs.pop("backoff", None) or BackoffTimer(1.0, 120.0)
        self.rdy = RdyController(
            max_in_flight,
            lambda key, count: self.sent.append((key, count)),
            clock=self.clock,
            backoff=backoff,  # type: ignore[arg-type]
            rng=random.Random(seed),
            on_schedule=self._schedule,
            **kwargs,  # type: ignore[arg-type]
        )

    def _schedule(self) -> None:
        self.scheduled += 1

    def take(self) -> list[tuple[str, int]]:
        out, self.sent = self.sent, []
        return out

    def receive(self, key: str, n: int = 1) -> None:
        for _ in range(n):
            self.rdy.received(self.rdy.conns[key])

    def finish(self, key: str, n: int = 1) -> None:
        for _ in range(n):
            self.rdy.finished(self.rdy.conns[key])

    def requeue(self, key: str, *, backoff: bool = True) -> None:
        self.rdy.requeued(self.rdy.conns[key], backoff=backoff)

    def expire_backoff(self) -> None:
        deadline = self.rdy.backoff_deadline
        assert deadline is not None
        self.clock.now = deadline
        self.rdy.backoff_expired()


def test_new_connection_starts_at_rdy_1_then_goes_to_its_share() -> None:
    h = Harness(10)
    h.rdy.add("a")
    assert h.take() == [("a", 1)]  # the guide's initial RDY 1
    h.receive("a")
    assert h.take() == [("a", 10)]
    h.receive("a")
    assert h.take() == []


def test_max_in_flight_is_spread_evenly_over_connections() -> None:
    h = Harness(10)
    h.rdy.add("a")
    h.receive("a")
    h.take()
    h.rdy.add("b")
    # room first (a drops to its new share), then the newcomer's RDY 1
    assert h.take() == [("a", 5), ("b", 1)]
    h.receive("b")
    assert h.take() == [("b", 5)]
    assert h.rdy.total_rdy == 10


def test_uneven_split_stays_below_max_in_flight() -> None:
    h = Harness(5)
    for key in "abc":
        h.rdy.add(key)
        h.receive(key)
    assert h.rdy.per_connection() == 1
    assert {k: c.rdy for k, c in h.rdy.conns.items()} == {"a": 1, "b": 1, "c": 1}
    assert h.rdy.total_rdy == 3


def test_rdy_never_exceeds_max_rdy_count() -> None:
    h = Harness(5000)
    h.rdy.add("a", max_rdy_count=2500)
    h.receive("a")
    assert h.take() == [("a", 1), ("a", 2500)]


def test_connections_beyond_max_in_flight_get_no_initial_rdy() -> None:
    h = Harness(2)
    for key in "abc":
        h.rdy.add(key)
    assert h.take() == [("a", 1), ("b", 1)]
    assert h.rdy.total_rdy == 2


def test_rdy_is_refreshed_when_a_quarter_is_left() -> None:
    h = Harness(8)
    h.rdy.add("a")
    h.receive("a")
    assert h.take() == [("a", 1), ("a", 8)]
    h.receive("a", 5)  # 3 of 8 left: more than 25%
    assert h.take() == []
    h.receive("a")  # 2 of 8 left: 25%
    assert h.take() == [("a", 8)]
    h.receive("a", 5)
    assert h.take() == []


def test_backoff_rdy_0_wait_rdy_1_then_full() -> None:
    h = Harness(4)
    for key in "ab":
        h.rdy.add(key)
        h.receive(key)
        h.finish(key)
    assert h.take() == [("a", 1), ("a", 4), ("a", 2), ("b", 1), ("b", 2)]
    start = h.clock.now
    h.receive("a")
    h.requeue("a")
    assert h.take() == [("a", 0), ("b", 0)]
    assert h.rdy.backoff_deadline == start + 2.0  # level 1: 1s * 2**1
    assert h.scheduled == 1
    # results while the timer runs are ignored
    h.rdy.finished(h.rdy.conns["b"])
    h.receive("a")
    h.requeue("a")
    assert h.rdy.backoff.level == 1
    assert h.take() == []
    h.expire_backoff()
    tester = h.take()
    ((key, count),) = tester
    assert count == 1  # test the waters on one connection
    h.receive(key)
    assert h.take() == []  # no ramp-up while in backoff
    h.finish(key)
    assert h.take() == [("a", 2), ("b", 2)]  # back to full throttle
    assert not h.rdy.in_backoff
    assert h.rdy.backoff_deadline is None


def test_backoff_steps_down_one_level_per_success() -> None:
    h = Harness(1)
    h.rdy.add("a")
    h.receive("a")
    h.requeue("a")
    h.expire_backoff()
    h.receive("a")
    h.requeue("a")  # the test failed too: level 2
    assert h.rdy.backoff.level == 2
    # RDY 1, refreshed once used up (the 25% rule), then the backoff's RDY 0 / RDY 1 / RDY 0
    assert h.take() == [("a", 1), ("a", 1), ("a", 0), ("a", 1), ("a", 0)]
    assert h.rdy.backoff_deadline == h.clock.now + 4.0
    h.expire_backoff()
    h.receive("a")
    h.finish("a")  # level 1: still backing off, for 2s
    assert h.take() == [("a", 1), ("a", 0)]
    assert h.rdy.backoff_deadline == h.clock.now + 2.0
    h.expire_backoff()
    h.receive("a")
    h.finish("a")
    assert h.take() == [("a", 1), ("a", 1)]  # level 0: RDY 1 is the full share here
    assert not h.rdy.in_backoff


def test_neutral_requeue_repeats_the_test_at_the_same_level() -> None:
    h = Harness(3)
    h.rdy.add("a")
    h.receive("a")
    h.requeue("a")
    h.expire_backoff()
    h.take()
    h.receive("a")
    h.requeue("a", backoff=False)
    assert h.take() == [("a", 0)]
    assert h.rdy.backoff.level == 1
    assert h.rdy.backoff_deadline == h.clock.now + 2.0


def test_backoff_can_be_disabled() -> None:
    h = Harness(3, backoff=BackoffTimer(1.0, 0.0))
    h.rdy.add("a")
    h.receive("a")
    h.take()
    h.requeue("a")
    assert h.take() == []
    assert not h.rdy.in_backoff


def test_backoff_timer_without_connections_looks_again_in_a_second() -> None:
    h = Harness(3)
    h.rdy.add("a")
    h.receive("a")
    h.requeue("a")
    h.rdy.remove("a")
    h.expire_backoff()
    assert h.rdy.backoff_deadline == h.clock.now + 1.0
    h.rdy.add("b")
    assert h.take() == [("a", 1), ("a", 3), ("a", 0)]  # b waits: the timer runs
    h.expire_backoff()
    assert h.take() == [("b", 1)]


def test_new_connection_during_backoff_waits() -> None:
    h = Harness(3)
    h.rdy.add("a")
    h.receive("a")
    h.requeue("a")
    h.expire_backoff()
    h.take()
    h.rdy.add("b")  # "a" holds the one RDY that tests the waters
    assert h.take() == []


@pytest.mark.parametrize(
    ("rdy", "in_flight", "starved"),
    [(10, 0, False), (10, 8, False), (10, 9, True), (1, 1, True), (100, 85, True)],
)
def test_is_starved_follows_the_085_rule(rdy: int, in_flight: int, starved: bool) -> None:
    h = Harness(rdy)
    h.rdy.add("a")
    h.receive("a", in_flight)
    if in_flight == 0:
        h.receive("a")
        h.finish("a")
    assert h.rdy.conns["a"].rdy == rdy
    assert h.rdy.is_starved() is starved


def test_idle_connections_give_up_rdy_to_others() -> None:
    h = Harness(1, low_rdy_idle_timeout=10.0, low_rdy_timeout=30.0)
    for key in "abc":
        h.rdy.add(key)
    assert h.take() == [("a", 1)]
    h.clock.now += 5
    h.rdy.redistribute()
    assert h.take() == []  # "a" is not idle yet
    h.clock.now += 6
    h.rdy.redistribute()
    sent = h.take()
    assert sent[0] == ("a", 0)
    assert sent[1] in [("b", 1), ("c", 1)]
    assert h.rdy.total_rdy == 1


def test_busy_connection_gives_up_rdy_after_low_rdy_timeout() -> None:
    h = Harness(1, low_rdy_idle_timeout=10.0, low_rdy_timeout=30.0)
    for key in "ab":
        h.rdy.add(key)
    h.take()
    for _ in range(31):  # "a" stays busy: a message every second
        h.clock.now += 1
        h.receive("a")
        h.finish("a")
    h.take()
    h.rdy.redistribute()
    assert h.take() == [("a", 0), ("b", 1)]


def test_losing_a_connection_moves_its_rdy() -> None:
    h = Harness(2)
    for key in "abc":
        h.rdy.add(key)
    h.take()
    h.rdy.remove("a")
    assert h.rdy.need_redistribute
    h.rdy.redistribute()
    assert h.take() == [("c", 1)]


def test_set_max_in_flight() -> None:
    h = Harness(4)
    for key in "ab":
        h.rdy.add(key)
        h.receive(key)
    h.take()
    h.rdy.set_max_in_flight(0)
    assert h.take() == [("a", 0), ("b", 0)]
    h.rdy.set_max_in_flight(8)
    assert h.take() == [("a", 4), ("b", 4)]


ops = st.lists(
    st.tuples(
        st.sampled_from(
            ["add", "remove", "recv", "fin", "req", "req0", "tick", "expire", "redist", "mif"]
        ),
        st.integers(0, 4),
    ),
    max_size=80,
)


@settings(max_examples=200, deadline=None)
@given(ops=ops, max_in_flight=st.integers(0, 7))
def test_invariants_hold_under_any_sequence(ops: list[tuple[str, int]], max_in_flight: int) -> None:
    h = Harness(max_in_flight, low_rdy_idle_timeout=3.0, low_rdy_timeout=5.0)
    rdy = h.rdy
    for op, n in ops:
        key = "abcde"[n]
        conn = rdy.conns.get(key)
        if op == "add" and conn is None:
            rdy.add(key, max_rdy_count=3)
        elif op == "remove":
            rdy.remove(key)
        elif op == "recv" and conn is not None:
            rdy.received(conn)
        elif op in ("fin", "req", "req0") and conn is not None and conn.in_flight:
            if op == "fin":
                rdy.finished(conn)
            else:
                rdy.requeued(conn, backoff=op == "req")
        elif op == "tick":
            h.clock.now += n
        elif op == "expire" and rdy.backoff_deadline is not None:
            h.expire_backoff()
        elif op == "redist":
            rdy.redistribute()
        elif op == "mif":
            rdy.set_max_in_flight(n)
        assert rdy.total_rdy == sum(c.rdy for c in rdy.conns.values())
        assert rdy.total_rdy <= rdy.max_in_flight
        assert all(0 <= c.rdy <= c.max_rdy_count for c in rdy.conns.values())
        if rdy.backoff_deadline is not None:
            assert rdy.total_rdy == 0
