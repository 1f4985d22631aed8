"""TimeoutQueue (in-flight and deferred messages) on its own."""

from __future__ import annotations

from nsqbox.nsqd.domain.message import Message
from nsqbox.nsqd.domain.timeout_queue import RESOLUTION, TimeoutQueue


def msg(i: int) -> Message:
    return Message(b"%016x" % i + b"body", 0)


def test_add_get_remove() -> None:
    q = TimeoutQueue()
    m = msg(1)
    q.add(m.id, m, 5.0)
    assert (len(q), m.id in q, q.get(m.id)) == (1, True, m)
    assert m.deadline == 5.0
    q.remove(m.id, m)
    assert (len(q), m.id in q, q.get(m.id)) == (0, False, None)
    assert q.pop_expired(100.0) == []  # the emptied bucket's heap key is skipped


def test_pop_expired_only_takes_ended_buckets_in_deadline_order() -> None:
    q = TimeoutQueue()
    late, early, later = msg(1), msg(2), msg(3)
    q.add(late.id, late, 1.005)
    q.add(early.id, early, 1.001)
    q.add(later.id, later, 2.0)
    assert q.pop_expired(1.0) == []
    # deadlines in a bucket expire once the whole bucket has ended (up to RESOLUTION late)
    assert q.pop_expired(1.0 + RESOLUTION) == [early, late]
    assert list(q) == [later]
    assert q.pop_expired(2.0 + 2 * RESOLUTION) == [later]
    assert len(q) == 0


def test_add_batch_and_clear() -> None:
    q = TimeoutQueue()
    batch = [msg(i) for i in range(3)]
    q.add_batch(batch, (3, 1.0, 7.0))
    assert [(m.client_id, m.delivery_ts, m.deadline) for m in batch] == [(3, 1.0, 7.0)] * 3
    assert all(m.id in q for m in batch)
    q.remove(batch[1].id, batch[1])
    assert set(q.clear()) == {batch[0], batch[2]}
    assert len(q) == 0
    assert q.pop_expired(100.0) == []


def test_readding_after_remove_moves_the_deadline() -> None:
    q = TimeoutQueue()
    m = msg(1)
    q.add(m.id, m, 1.0)
    q.remove(m.id, m)
    q.add(m.id, m, 3.0)  # TOUCH: the same message, a later deadline
    assert q.pop_expired(1.0 + RESOLUTION) == []
    assert q.pop_expired(3.0 + RESOLUTION) == [m]


def test_take_finishes_a_clients_messages_in_one_pass() -> None:
    q = TimeoutQueue()
    mine = [msg(i) for i in range(4)]
    theirs = [msg(10 + i) for i in range(2)]
    q.add_batch(mine[:2], (1, 0.0, 5.0))
    q.add_batch(theirs, (2, 0.0, 5.0))
    q.add_batch(mine[2:], (1, 1.0, 6.0))  # another delivery, another bucket
    q.remove(mine[3].id, mine[3])
    q.add(mine[3].id, mine[3], 9.0)  # TOUCH: a lease of its own, same client
    ids = [mine[0].id, theirs[0].id, b"0" * 16, mine[3].id, mine[1].id, mine[2].id]
    taken, refused = q.take(ids, 1)
    assert taken == [mine[0], mine[3], mine[1], mine[2]]
    assert refused == [(theirs[0].id, theirs[0]), (b"0" * 16, None)]
    assert len(q) == 2
    assert q.earliest() == 5.0  # the emptied buckets are gone, theirs is left
    assert q.pop_expired(100.0) == theirs
