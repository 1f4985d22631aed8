"""gnsq (gevent ``Producer`` and ``Consumer``) against nsqbox's nsqd.

gnsq uses gevent's own sockets, so it needs no monkey patching: the test's thread
runs gevent's hub (only while the test waits on it), the nsqd runs on trio in its
own thread. No ``gevent.monkey`` call happens in this process. Each test destroys
the hub it created, so no gevent state outlives it.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator

import pytest

gevent = pytest.importorskip("gevent")
gnsq = pytest.importorskip("gnsq")

from gnsq import errors as gnsq_errors  # noqa: E402
from gnsq import protocol as gnsq_protocol  # noqa: E402

TOPIC = "gnsq_topic"
CHANNEL = "gnsq_channel"
TIMEOUT = 20.0
REQUEUE_DELAY_MS = 20


def publish(producer: gnsq.Producer, topic: str, body: bytes, defer: int | None = None) -> bytes:
    """PUB (or DPUB with ``defer`` ms); waits, bounded, for nsqd's answer (raises its error)."""
    result = producer.publish(topic, body, defer=defer, timeout=TIMEOUT, raise_error=False)
    return result.get(timeout=TIMEOUT)


def multipublish(producer: gnsq.Producer, topic: str, bodies: list[bytes]) -> bytes:
    """MPUB; waits, bounded, for nsqd's answer (raises its error)."""
    result = producer.multipublish(topic, bodies, timeout=TIMEOUT, raise_error=False)
    return result.get(timeout=TIMEOUT)


@pytest.fixture(autouse=True)
def gevent_hub() -> Iterator[None]:
    """Run each test with a fresh hub in this thread, destroyed afterwards."""
    yield
    hub = gevent.get_hub()
    hub.destroy(destroy_loop=True)


def test_publish_multipublish_defer_and_consume_with_requeues(
    threaded_nsqd, probe, workload, wait
) -> None:
    address = threaded_nsqd.tcp_address

    def handler(consumer: gnsq.Consumer, message: gnsq.Message) -> None:
        if not workload.handle(message.body, message.attempts):
            message.requeue(REQUEUE_DELAY_MS, backoff=False)
        # otherwise the consumer finishes it when the handler returns

    consumer = gnsq.Consumer(
        TOPIC,
        CHANNEL,
        address,
        message_handler=handler,
        max_in_flight=50,
        max_tries=0,  # never give up (and auto-finish) a message
        max_backoff_duration=0.1,
    )
    producer = gnsq.Producer(address)
    try:
        consumer.start(block=False)
        wait(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB", sleep=gevent.sleep)
        producer.start()

        for body in workload.pub:
            assert publish(producer, TOPIC, body) == b"OK"
        for batch in workload.mpub:
            assert multipublish(producer, TOPIC, batch) == b"OK"
        # DPUBs pipelined: all sent before the first answer is awaited
        pending = [
            producer.publish(TOPIC, body, defer=delay, timeout=TIMEOUT, raise_error=False)
            for body, delay in workload.dpub
        ]
        assert [result.get(timeout=TIMEOUT) for result in pending] == [b"OK"] * len(pending)

        wait(lambda: workload.done, "all messages finished", sleep=gevent.sleep)
        # FINs are asynchronous: wait until the server has seen them all
        wait(lambda: probe.drained(TOPIC, CHANNEL), "channel drained", sleep=gevent.sleep)
    finally:
        consumer.close()
        producer.close()
        consumer.join(timeout=TIMEOUT)
        producer.join(timeout=TIMEOUT)

    workload.check()
    state = probe.channel(TOPIC, CHANNEL)
    assert state is not None
    assert (state.depth, state.in_flight, state.deferred) == (0, 0, 0)
    assert state.topic_message_count == workload.total
    assert state.requeue_count == workload.expected_requeues
    assert state.timeout_count == 0


def test_backoff_on_requeue(threaded_nsqd, probe, wait) -> None:
    """Requeue with backoff (the default) takes the consumer through BACKOFF/THROTTLED."""
    total = 200
    bodies = [b"backoff-%04d" % i for i in range(total)]
    received: dict[bytes, int] = {}
    attempts_seen: list[int] = []

    def handler(consumer: gnsq.Consumer, message: gnsq.Message) -> None:
        attempts_seen.append(message.attempts)
        if message.body.endswith(b"7") and message.attempts == 1:
            raise gnsq_errors.NSQRequeueMessage()  # requeue with backoff
        received[message.body] = received.get(message.body, 0) + 1

    consumer = gnsq.Consumer(
        TOPIC,
        CHANNEL,
        threaded_nsqd.tcp_address,
        message_handler=handler,
        max_in_flight=20,
        max_tries=0,
        max_backoff_duration=0.05,
    )
    producer = gnsq.Producer(threaded_nsqd.tcp_address)
    try:
        consumer.start(block=False)
        wait(lambda: probe.channel_exists(TOPIC, CHANNEL), "SUB", sleep=gevent.sleep)
        producer.start()
        assert multipublish(producer, TOPIC, bodies) == b"OK"
        wait(lambda: len(received) == total, "all messages finished", sleep=gevent.sleep)
        wait(lambda: probe.drained(TOPIC, CHANNEL), "channel drained", sleep=gevent.sleep)
    finally:
        consumer.close()
        producer.close()
        consumer.join(timeout=TIMEOUT)
        producer.join(timeout=TIMEOUT)

    assert received == dict.fromkeys(bodies, 1)
    assert attempts_seen.count(2) == total // 10
    state = probe.channel(TOPIC, CHANNEL)
    assert state is not None
    assert state.requeue_count == total // 10


def test_bad_message_raises_nsq_bad_message(start_threaded_nsqd) -> None:
    """An oversized PUB raises gnsq's ``NSQBadMessage`` from ``Producer.publish``."""
    box = start_threaded_nsqd(max_msg_size=1024)
    producer = gnsq.Producer(box.tcp_address)
    try:
        producer.start()
        with pytest.raises(gnsq_errors.NSQBadMessage, match="PUB message too big"):
            publish(producer, "fine_topic", b"x" * 1025)
    finally:
        producer.close()
        producer.join(timeout=TIMEOUT)


def test_bad_topic_maps_to_nsq_bad_topic(start_threaded_nsqd) -> None:
    """gnsq refuses bad topic names itself; nsqd's E_BAD_TOPIC still maps to NSQBadTopic.

    ``Producer.publish`` validates the name before sending (``ValueError``), so the
    raw PUB goes over gnsq's own ``NsqdTCPClient`` to reach the server.
    """
    box = start_threaded_nsqd()
    producer = gnsq.Producer(box.tcp_address)
    try:
        producer.start()
        with pytest.raises(ValueError, match="invalid topic name"):
            publish(producer, "bad!topic", b"x")
    finally:
        producer.close()
        producer.join(timeout=TIMEOUT)

    host, port = box.tcp_address.split(":")
    conn = gnsq.NsqdTCPClient(host, int(port), timeout=TIMEOUT)
    try:
        conn.connect()
        conn.identify()
        body = b"x"
        conn.send(b"PUB bad!topic\n" + struct.pack(">l", len(body)) + body)
        frame, error = conn.read_response()
        assert frame == gnsq_protocol.FRAME_TYPE_ERROR
        assert isinstance(error, gnsq_errors.NSQBadTopic)
        assert "bad!topic" in str(error)
        # gnsq knows E_BAD_TOPIC is fatal and drops the connection (nsqd closes it too)
        assert not conn.is_connected
    finally:
        conn.close_stream()
