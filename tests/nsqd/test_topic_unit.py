"""Topic on its own: a fake node and fake consumers, no sockets, no disk."""

from __future__ import annotations

import pytest

from nsqbox.nsqd.domain.message import GUIDFactory, Message
from nsqbox.nsqd.domain.topic import Topic, TopicError

from .domain_fakes import FakeConsumer, FakeNode


def test_a_topic_without_channels_holds_messages_until_one_exists() -> None:
    node = FakeNode()
    topic = node.topic()
    topic.put_messages([b"a", b"bb"])
    assert (topic.depth(), topic.message_count, topic.message_bytes) == (2, 2, 3)
    channel = topic.get_channel("c")
    assert topic.depth() == 0
    assert [m.body for m in channel.memory] == [b"a", b"bb"]
    assert node.notified == [("Channel(t:c)", False)]


def test_a_topic_not_started_holds_until_start() -> None:
    node = FakeNode()
    topic = Topic("t", node, notify=node.notify, on_delete=lambda t: None)
    channel = topic.get_channel("c")
    topic.put_message(b"x")
    assert (topic.depth(), channel.depth()) == (1, 0)
    topic.start()
    assert (topic.depth(), channel.depth()) == (0, 1)


def test_fan_out_gives_the_first_channel_the_original_and_others_copies() -> None:
    node = FakeNode()
    topic = node.topic()
    c1, c2 = topic.get_channel("c1"), topic.get_channel("c2")
    a, b = FakeConsumer(1), FakeConsumer(2)
    c1.add_client(a)
    c2.add_client(b)
    a.rdy(c1, 1, node.clock)
    b.rdy(c2, 1, node.clock)
    topic.put_message(b"hello")
    (ma,), (mb,) = a.received, b.received
    assert ma.id == mb.id
    assert ma.body == mb.body == b"hello"
    assert ma is not mb
    assert ma.data is mb.data  # one body, shared
    a.req(c1, ma, 0.0, node.clock)
    assert (a.received[1].attempts, mb.attempts) == (2, 1)


def test_ids_increase_and_one_batch_shares_a_timestamp() -> None:
    node = FakeNode()
    topic = node.topic()
    channel = topic.get_channel("c")
    topic.put_messages([b"1", b"2", b"3"])
    msgs = list(channel.memory)
    assert [m.id for m in msgs] == sorted(m.id for m in msgs)
    assert len({m.id for m in msgs}) == 3
    assert len({m.timestamp for m in msgs}) == 1


def test_a_batch_past_a_ticks_4096_ids_borrows_the_next_tick() -> None:
    factory = GUIDFactory(7)
    first = [m.id for m in factory.messages([b"first"] * 10, 1)]
    bodies = [b"%d" % i for i in range(5000)]  # more than one tick's 4,096: two at least
    msgs = factory.messages(bodies, 1)
    ids = first + [m.id for m in msgs] + [m.id for m in factory.messages([b"last"] * 5, 1)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids) == 5015
    assert [m.body for m in msgs] == bodies
    assert all(int(i, 16) >> 12 & 0x3FF == 7 for i in ids)  # the node id's 10 bits


def test_single_ids_follow_batches_and_borrow_past_a_used_up_tick() -> None:
    factory = GUIDFactory(7)
    ids = [m.id for m in factory.messages([b"x"] * 4096, 1)]  # a whole tick, or more
    ids += [factory.message(b"%d" % i, 1).id for i in range(5000)]
    ids += [m.id for m in factory.messages([b"y"] * 3, 1)]
    assert ids == sorted(ids)
    assert len(set(ids)) == len(ids) == 9099
    last = factory.message(b"body", 5)
    assert (last.id > ids[-1], last.body, last.timestamp, last.attempts) == (True, b"body", 5, 0)
    assert all(int(i, 16) >> 12 & 0x3FF == 7 for i in [*ids, last.id])  # the node id's 10 bits


def test_overflow_goes_to_the_backend_and_a_failing_one_refuses() -> None:
    node = FakeNode(mem_queue_size=2)
    topic = node.topic()
    topic.put_messages([b"1", b"2", b"3"])
    assert (len(topic.memory), topic.backend_depth()) == (2, 1)
    node.backends["t"].failing = True
    with pytest.raises(TopicError, match="No space left on device"):
        topic.put_message(b"4")
    assert node.health_error is not None
    node.backends["t"].failing = False
    channel = topic.get_channel("c")  # drains memory, then the backend
    assert [m.body for m in channel.memory] == [b"1", b"2"]
    assert channel.backend_depth() == 1
    assert topic.depth() == 0


def test_pause_holds_and_unpause_delivers() -> None:
    node = FakeNode()
    topic = node.topic()
    channel = topic.get_channel("c")
    topic.pause()
    topic.put_message(b"x")
    assert (topic.depth(), channel.depth()) == (1, 0)
    topic.unpause()
    assert (topic.depth(), channel.depth()) == (0, 1)
    assert node.persisted == 2


def test_dpub_defers_in_every_channel() -> None:
    node = FakeNode()
    topic = node.topic()
    c1, c2 = topic.get_channel("c1"), topic.get_channel("c2")
    topic.put_message(b"later", defer=3.0)
    assert (c1.deferred_count(), c2.deferred_count()) == (1, 1)
    assert c1.depth() == c2.depth() == 0
    assert c1.process_deferred(node.clock + 3.02)
    assert [m.body for m in c1.memory] == [b"later"]
    assert c2.deferred_count() == 1


def test_taps_see_every_published_message_and_its_publisher() -> None:
    class Tap(list[tuple[bytes, object]]):
        def tapped(self, msgs: list[Message], publisher: object) -> None:
            self.extend((m.body, publisher) for m in msgs)

    class Client:
        def publisher_fields(self) -> dict[str, str]:
            return {"protocol": "tcp"}

    node = FakeNode()
    topic = node.topic()
    tap = Tap()
    topic.taps.append(tap)
    client = Client()
    topic.put_messages([b"a", b"b"], 0.0, None, client)
    topic.put_message(b"c")
    assert tap == [(b"a", client), (b"b", client), (b"c", None)]


def test_delete_existing_channel_and_the_ephemeral_topic_goes_with_its_last() -> None:
    node = FakeNode()
    durable = node.topic("t")
    durable.get_channel("c")
    assert durable.delete_existing_channel("c")
    assert not durable.delete_existing_channel("c")
    assert ("Channel(t:c)", True) in node.notified
    assert node.deleted_topics == []
    eph = node.topic("e#ephemeral")
    eph.get_channel("c1")
    eph.get_channel("c2")
    eph.delete_existing_channel("c1")
    assert node.deleted_topics == []
    eph.delete_existing_channel("c2")
    assert node.deleted_topics == ["e#ephemeral"]
    assert eph.exiting


def test_an_ephemeral_channel_leaves_its_topic_with_its_last_consumer() -> None:
    node = FakeNode()
    topic = node.topic()
    channel = topic.get_channel("c#ephemeral")
    client = FakeConsumer(1)
    channel.add_client(client)
    channel.remove_client(client)
    assert topic.get_existing_channel("c#ephemeral") is None
    assert channel.exiting
    assert node.notified[-1] == ("Channel(t:c#ephemeral)", True)


def test_delete_drops_channels_and_messages_and_refuses_publishes() -> None:
    node = FakeNode()
    topic = node.topic()
    channel = topic.get_channel("c")
    client = FakeConsumer(1)
    channel.add_client(client)
    topic.pause()
    topic.put_message(b"x")
    topic.delete()
    assert client.closed
    assert topic.channels == {}
    assert topic.depth() == 0
    assert node.backends["t"].deleted
    assert node.backends["t:c"].deleted
    assert ("Topic(t)", True) in node.notified
    with pytest.raises(TopicError, match="exiting"):
        topic.put_message(b"y")


def test_close_flushes_the_topic_and_its_channels() -> None:
    node = FakeNode()
    topic = node.topic()
    channel = topic.get_channel("c")
    channel.pause()
    topic.put_message(b"in channel")
    topic.pause()
    topic.put_message(b"in topic")
    topic.close()
    assert node.flushed == {"t:c": [b"in channel"], "t": [b"in topic"]}
    assert node.backends["t"].closed
    assert node.backends["t:c"].closed
    assert channel.exiting
    assert topic.exiting
