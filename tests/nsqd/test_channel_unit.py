"""Channel on its own: a fake node and fake consumers, the clock moved by hand."""

from __future__ import annotations

import pytest

from nsqbox.nsqd.domain.channel import Channel, ChannelError
from nsqbox.nsqd.domain.message import Message

from .domain_fakes import FakeConsumer, FakeNode

TS = 1_700_000_000_000_000_000


def msg(i: int, body: bytes | None = None) -> Message:
    """Message number ``i`` (id ``%016x``)."""
    return Message(b"%016x" % i + (body if body is not None else b"m%d" % i), TS)


class Made:
    """A channel and what its callbacks were called with."""

    def __init__(self, name: str = "c", **node_options: object) -> None:
        self.node = FakeNode(**node_options)  # type: ignore[arg-type]
        self.notified: list[Channel] = []
        self.deleted: list[Channel] = []
        self.channel = Channel(
            "t", name, self.node, notify=self.notified.append, on_delete=self.deleted.append
        )

    def consumer(self, client_id: int, rdy: int = 0, **kw: object) -> FakeConsumer:
        client = FakeConsumer(client_id, **kw)  # type: ignore[arg-type]
        self.channel.add_client(client)
        if rdy:
            client.rdy(self.channel, rdy, self.node.clock)
        return client


def test_put_without_consumers_queues_in_memory_then_backend() -> None:
    made = Made(mem_queue_size=2)
    ch = made.channel
    for i in range(3):
        ch.put(msg(i), made.node.clock)
    assert [m.body for m in ch.memory] == [b"m0", b"m1"]
    assert made.node.backends["t:c"].depth == 1
    assert (ch.depth(), ch.backend_depth(), ch.message_count) == (3, 1, 3)
    assert ch.in_flight_count() == 0


def test_backend_failure_is_a_channel_error_with_the_health_text() -> None:
    made = Made(mem_queue_size=0)
    made.node.backends["t:c"].failing = True
    with pytest.raises(ChannelError, match="No space left on device"):
        made.channel.put(msg(1), made.node.clock)
    assert made.node.health_error is not None


def test_put_goes_straight_to_a_ready_consumer() -> None:
    made = Made()
    client = made.consumer(1, rdy=5, msg_timeout=30.0)
    m = msg(1)
    made.channel.put(m, made.node.clock)
    assert client.received == [m]
    assert (m.attempts, m.client_id, m.delivery_ts) == (1, 1, made.node.clock)
    assert m.deadline == made.node.clock + 30.0
    assert made.channel.in_flight_count() == 1
    assert not made.channel.memory


def test_two_consumers_take_turns_and_a_fin_pulls_the_next() -> None:
    made = Made()
    a, b = made.consumer(1, rdy=1), made.consumer(2, rdy=1)
    now = made.node.clock
    for i in range(3):
        made.channel.put(msg(i), now)
    assert (a.bodies(), b.bodies()) == ([b"m0"], [b"m1"])
    assert [m.body for m in made.channel.memory] == [b"m2"]
    a.fin(made.channel, a.received[0], now)
    assert a.bodies() == [b"m0", b"m2"]
    assert made.channel.in_flight_count() == 2
    assert not made.channel.memory


def test_rdy_pulls_a_batch_from_memory_then_the_backend() -> None:
    made = Made(mem_queue_size=2)
    now = made.node.clock
    for i in range(5):
        made.channel.put(msg(i), now)
    client = made.consumer(1, rdy=4)
    assert client.bodies() == [b"m0", b"m1", b"m2", b"m3"]
    assert [m.attempts for m in client.received] == [1, 1, 1, 1]
    assert (made.channel.depth(), made.channel.backend_depth()) == (1, 1)
    assert client.in_flight_count == made.channel.in_flight_count() == 4


def test_fin_errors_and_e2e_latency() -> None:
    made = Made(e2e=True)
    a, b = made.consumer(1, rdy=1), made.consumer(2, rdy=1)
    m = msg(1)
    made.channel.put(m, made.node.clock)
    assert a.received == [m]
    assert made.channel.finish_messages(b, [m.id]) == [(m.id, "client does not own message")]
    assert made.channel.finish_messages(a, [msg(99).id]) == [(msg(99).id, "ID not in flight")]
    assert (a.in_flight_count, b.in_flight_count) == (1, 0)  # refused FINs count nothing out
    a.fin(made.channel, m, made.node.clock)
    assert made.channel.in_flight_count() == 0
    assert made.channel.e2e_latency is not None
    assert made.channel.e2e_latency.result().count == 1


def test_req_now_redelivers_and_req_later_defers() -> None:
    made = Made()
    client = made.consumer(1, rdy=1)
    now = made.node.clock
    made.channel.put(msg(1), now)
    client.req(made.channel, client.received[0], 0.0, now)
    assert client.bodies() == [b"m1", b"m1"]
    assert client.received[1].attempts == 2
    client.req(made.channel, client.received[1], 5.0, now)
    assert (made.channel.deferred_count(), made.channel.in_flight_count()) == (1, 0)
    assert made.channel.requeue_count == 2
    assert not made.channel.process_deferred(now + 4.9)
    assert made.channel.process_deferred(now + 5.02)
    assert client.bodies() == [b"m1", b"m1", b"m1"]
    assert client.received[2].attempts == 3
    assert made.channel.deferred_count() == 0


def test_touch_restarts_the_timeout_up_to_max_msg_timeout() -> None:
    made = Made(max_msg_timeout=100.0)
    client = made.consumer(1, rdy=1, msg_timeout=60.0)
    now = made.node.clock
    m = msg(1)
    made.channel.put(m, now)
    made.channel.touch_message(client, m.id, 60.0, now + 30.0)
    assert m.deadline == now + 90.0
    made.channel.touch_message(client, m.id, 60.0, now + 80.0)
    assert m.deadline == now + 100.0  # capped at delivery + max-msg-timeout
    assert made.channel.in_flight_count() == 1


def test_a_timed_out_message_is_requeued_and_redelivered() -> None:
    made = Made()
    slow = made.consumer(1, rdy=1, msg_timeout=10.0)
    now = made.node.clock
    made.channel.put(msg(1), now)
    assert not made.channel.process_in_flight(now + 9.9)
    assert made.channel.process_in_flight(now + 10.02)
    assert made.channel.timeout_count == 1
    # the same consumer had room again: it gets the message back
    assert slow.bodies() == [b"m1", b"m1"]
    assert slow.received[1].attempts == 2
    assert slow.in_flight_count == made.channel.in_flight_count() == 1


def test_put_deferred_waits_out_its_delay() -> None:
    made = Made()
    client = made.consumer(1, rdy=1)
    now = made.node.clock
    made.channel.put_deferred(msg(1), 2.0, now)
    assert (made.channel.message_count, made.channel.depth()) == (1, 0)
    assert made.channel.deferred_count() == 1
    assert client.received == []
    assert made.channel.process_deferred(now + 2.02)
    assert client.bodies() == [b"m1"]


def test_pause_holds_and_unpause_delivers() -> None:
    made = Made()
    client = made.consumer(1, rdy=5)
    made.channel.pause()
    made.channel.put(msg(1), made.node.clock)
    assert client.received == []
    assert made.channel.depth() == 1
    made.channel.unpause()
    assert client.bodies() == [b"m1"]
    assert made.node.persisted == 2


def test_empty_drops_everything_and_resets_consumers() -> None:
    made = Made(mem_queue_size=1)
    client = made.consumer(1, rdy=1)
    now = made.node.clock
    for i in range(4):
        made.channel.put(msg(i), now)
    made.channel.put_deferred(msg(9), 5.0, now)
    assert (made.channel.in_flight_count(), made.channel.depth()) == (1, 3)
    made.channel.empty()
    assert made.channel.depth() == made.channel.in_flight_count() == 0
    assert made.channel.deferred_count() == 0
    assert client.in_flight_count == 0
    made.channel.put(msg(5), now)
    assert client.bodies() == [b"m0", b"m5"]


def test_delete_closes_consumers_drops_messages_and_notifies() -> None:
    made = Made()
    client = made.consumer(1, rdy=1)
    made.channel.put(msg(1), made.node.clock)
    made.channel.delete()
    assert client.closed
    assert made.node.backends["t:c"].deleted
    assert made.notified == [made.channel]
    assert made.channel.exiting
    assert made.channel.in_flight_count() == 0
    with pytest.raises(ChannelError, match="exiting"):
        made.channel.add_client(FakeConsumer(2))
    made.channel.delete()  # twice is harmless
    assert made.notified == [made.channel]


def test_an_ephemeral_channel_asks_to_go_with_its_last_consumer() -> None:
    made = Made("c#ephemeral")
    a, b = made.consumer(1, rdy=1), made.consumer(2)
    made.channel.remove_client(a)
    assert made.deleted == []
    assert not a.in_ring
    made.channel.remove_client(b)
    assert made.deleted == [made.channel]
    durable = Made("c")
    durable.channel.remove_client(durable.consumer(1))
    assert durable.deleted == []


def test_max_channel_consumers() -> None:
    made = Made(max_channel_consumers=1)
    made.consumer(1)
    with pytest.raises(ChannelError, match="consumers for t:c exceeds limit of 1"):
        made.channel.add_client(FakeConsumer(2))
    made.channel.add_client(FakeConsumer(1))  # the same client again is no error
    assert list(made.channel.clients) == [1]


def test_a_full_output_buffer_stops_delivery_until_written() -> None:
    made = Made()
    now = made.node.clock
    for i in range(10):
        made.channel.put(msg(i, b"x" * 70), now)  # 86 bytes of data, 116 per frame
    client = made.consumer(1, rdy=100, out_limit=300)
    assert len(client.received) == 3  # the third starts with room 68 > 0 and overfills
    assert not client.can_take()
    assert made.channel.depth() == 7
    client.written()
    made.channel.client_ready(client, now)
    assert len(client.received) == 6
    assert made.channel.depth() == 4


def test_sampling_drops_what_it_does_not_deliver() -> None:
    made = Made()
    client = made.consumer(1, rdy=1000, sample_rate=50)
    now = made.node.clock
    for i in range(200):
        made.channel.put(msg(i), now)
    got = len(client.received)
    assert 0 < got < 200
    assert made.channel.in_flight_count() == client.in_flight_count == got
    assert made.channel.depth() == 0


def test_close_flushes_memory_in_flight_and_deferred() -> None:
    made = Made()
    client = made.consumer(1, rdy=1)
    now = made.node.clock
    made.channel.put(msg(1), now)
    made.channel.put(msg(2), now)
    made.channel.put_deferred(msg(3), 9.0, now)
    made.channel.close()
    assert client.closed
    assert made.node.flushed["t:c"] == [b"m2", b"m1", b"m3"]
    assert made.node.saved_deferred == [("t", "c", [b"m3"], {})]
    assert made.node.backends["t:c"].closed


def test_close_of_an_ephemeral_channel_keeps_nothing() -> None:
    made = Made("c#ephemeral")
    made.channel.put(msg(1), made.node.clock)
    made.channel.close()
    assert made.node.flushed["t:c#ephemeral"] == []
    assert made.node.saved_deferred == []


def test_a_restored_deadline_defers_a_message_read_back() -> None:
    node = FakeNode(mem_queue_size=0)
    future = TS * 2  # far ahead of the wall clock
    node.restored[("t", "c")] = {msg(1).id: future}
    channel = Channel("t", "c", node, notify=lambda c: None, on_delete=lambda c: None)
    channel.put(msg(1), node.clock)
    channel.put(msg(2), node.clock)
    client = FakeConsumer(1)
    channel.add_client(client)
    client.rdy(channel, 10, node.clock)
    assert client.bodies() == [b"m2"]
    assert channel.deferred_count() == 1
    assert channel.restored_deadlines == {}


def held_by(channel: Channel, client: FakeConsumer) -> int:
    """The consumer's messages in the channel's in-flight queue: the one book."""
    return sum(1 for m in channel.in_flight if m.client_id == client.id)


def test_a_consumers_in_flight_count_is_the_channels_book_through_every_change() -> None:
    # The fake consumer counts nothing itself: every number below is the channel's tally.
    made = Made(mem_queue_size=2, msg_timeout=10.0)
    ch = made.channel
    now = made.node.clock
    a, b = made.consumer(1, rdy=3, msg_timeout=10.0), made.consumer(2, rdy=2, msg_timeout=20.0)

    def books() -> tuple[int, int]:
        assert (a.in_flight_count, b.in_flight_count) == (held_by(ch, a), held_by(ch, b))
        assert a.in_flight_count + b.in_flight_count == ch.in_flight_count()
        return a.in_flight_count, b.in_flight_count

    for i in range(4):  # one at a time, straight to a ready consumer (round robin)
        ch.put(msg(i), now)
    assert books() == (2, 2)
    ch.put_batch([msg(i) for i in range(4, 8)], now)  # one to a, the rest queued
    assert books() == (3, 2)
    a.fin(ch, a.received[0], now)  # a pulls the next from memory
    assert books() == (3, 2)
    assert ch.finish_messages(a, [b.received[0].id, msg(99).id]) != []  # refused: no change
    assert books() == (3, 2)
    b.req(ch, b.received[0], 5.0, now)  # deferred; b pulls the last queued one
    assert books() == (3, 2)
    ch.touch_message(b, b.received[1].id, 20.0, now + 1.0)  # still in flight
    assert books() == (3, 2)
    a.ready_count = 0  # a takes no more: its timed-out messages go to b, or wait
    assert ch.process_in_flight(now + 10.02)  # a's three time out
    assert books() == (0, 2)
    assert ch.process_in_flight(now + 21.02)  # b's run out too; b takes two back
    assert books() == (0, 2)
    ch.empty()
    assert books() == (0, 0)
