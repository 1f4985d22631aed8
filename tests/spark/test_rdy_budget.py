"""The in-flight budget: RDY per connection never lets the reader hold more than its total."""

from __future__ import annotations

from nsqbox.spark.rdy_budget import RdyBudget


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def budget(total: int, links: int, max_rdy: int = 2500) -> tuple[RdyBudget[str], Clock]:
    clock = Clock()
    made: RdyBudget[str] = RdyBudget(total, clock=clock, rotate_after=1.0)
    for i in range(links):
        made.add(f"c{i}", max_rdy)
    return made, clock


def test_the_total_is_split_over_every_connection_of_every_node() -> None:
    made, _ = budget(20_000, 8)
    assert made.plan() == {f"c{i}": 2500 for i in range(8)}
    assert made.committed == 20_000
    made, _ = budget(10, 3)
    assert sorted(made.plan().values()) == [3, 3, 4]


def test_a_connection_is_capped_at_its_max_rdy_count() -> None:
    made, _ = budget(20_000, 2, max_rdy=2500)
    assert made.plan() == {"c0": 2500, "c1": 2500}


def test_a_joining_node_gets_rdy_only_as_held_messages_are_answered() -> None:
    made, _ = budget(100, 1)
    assert made.plan() == {"c0": 100}
    made.received("c0", 100)
    made.add("c1", 2500)
    # c0 is lowered to its new share, but still holds 100: nothing is free for c1
    assert made.plan() == {"c0": 50}
    assert made.committed == 100
    made.answered("c0", 30)
    assert made.plan() == {"c1": 30}
    assert made.committed == 100
    made.answered("c0", 40)
    assert made.plan() == {"c1": 50}
    assert made.committed <= 100


def test_a_leaving_node_frees_its_share_for_the_others() -> None:
    made, _ = budget(100, 2)
    made.plan()
    made.received("c1", 50)
    made.remove("c1")
    assert made.plan() == {"c0": 100}


def test_with_fewer_messages_than_connections_rdy_rotates() -> None:
    made, clock = budget(2, 3)
    first = made.plan()
    assert sorted(first.values()) == [1, 1]
    (waiting,) = {"c0", "c1", "c2"} - set(first)
    holder, other = first
    made.received(holder, 1)  # one connection holds a message, unanswered
    clock.now = 1.5
    # both give RDY up after their turn; nothing is free until nsqd cannot have sent more
    assert made.plan() == dict.fromkeys(first, 0)
    assert made.committed == 2
    clock.now = 2.6
    made.idle(other)  # its socket read empty once nsqd had time to flush: nothing on the way
    assert made.plan()[waiting] == 1
    assert made.committed == 2
    # turns go on: every connection gets RDY in time, and the total holds throughout
    had = {key for key, link in made.links.items() if link.rdy}
    for step in range(8):
        clock.now = 3.0 + 1.5 * step
        for key in made.links:
            made.answered(key, made.links[key].held)
            made.idle(key)
        made.plan()
        assert made.committed <= 2
        had |= {key for key, link in made.links.items() if link.rdy}
    assert had == {"c0", "c1", "c2"}


def test_a_lowered_rdy_stays_committed_to_what_may_still_be_on_the_wire() -> None:
    # nsqd holds 100 in flight for c0, only 40 of them read: lowering RDY to 50 frees
    # nothing, since the other 60 may still arrive
    made, clock = budget(100, 1)
    made.plan()
    made.received("c0", 40)
    made.add("c1", 2500)
    assert made.plan() == {"c0": 50}
    assert made.committed == 100
    made.idle("c0")  # too soon: nsqd may not have flushed yet
    assert made.plan() == {}
    made.answered("c0", 40)  # those 40 are no longer in flight on nsqd
    assert made.plan() == {"c1": 40}
    assert made.committed == 100
    clock.now = 1.0
    made.idle("c0")  # read empty after the settle time: the other 60 never came
    assert made.plan() == {"c1": 50}
    assert made.committed == 100


def test_a_zero_budget_stops_every_connection() -> None:
    made, _ = budget(10, 2)
    made.plan()
    made.total = 0
    assert made.plan() == {"c0": 0, "c1": 0}
