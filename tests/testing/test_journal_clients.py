"""One message's journey through three clients in turn: gnsq, pynsq, nsqbox's own (issue #33).

gnsq takes the message first and REQs it for 90 s, then pynsq takes it and REQs it for
90 s, then nsqbox's blocking consumer takes it and FINs it. The box's clock is manual, so
each REQ's delay ends only when the test moves the clock, after the client that sent it has
gone: each delivery goes to the client the test meant. The journal names each of them by
its own user agent, and lists the message as given up (finished at attempt 3) with its body.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing import NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec
from tests.compat.loop_wait import wait_for

from .conftest import TIMEOUT
from .fault_clients import gevent_wait, gnsq_consumer

nsq = pytest.importorskip("nsq")

#: Each REQ's delay (seconds): over only when the clock is moved.
DELAY = 90
CHANNEL = "work"  # the channel gnsq_consumer subscribes to


@pytest.fixture
def box(tmp_path: Path) -> Iterator[NSQBox]:
    spec = ClusterSpec(clock="manual")
    thread_box = ThreadBox(spec, str(tmp_path))
    try:
        with NSQBox(thread_box, timeout=TIMEOUT) as handle:
            yield handle
    finally:
        thread_box.stop()


def gnsq_requeues_it(box: NSQBox, topic: str, gevent: Any) -> None:
    """A gnsq consumer takes the message (attempt 1) and REQs it; then it closes."""
    got: list[int] = []

    def handle(_consumer: Any, message: Any) -> None:
        got.append(message.attempts)
        message.requeue(DELAY * 1000, backoff=False)

    with gnsq_consumer(box, topic, handle):
        gevent_wait(lambda: got, "gnsq's delivery")
        box.wait_for(topic, CHANNEL, deferred=1, requeue_count=1, sleep=gevent.sleep)
    assert got == [1]


def pynsq_requeues_it(box: NSQBox, topic: str) -> None:
    """A pynsq reader takes it when the clock passes gnsq's REQ (attempt 2) and REQs it."""
    got: list[int] = []

    def handle(message: Any) -> None:
        got.append(message.attempts)
        message.requeue(backoff=False, delay=DELAY)

    def channel_state() -> Any:
        return box.stats().channel(topic, CHANNEL)

    async def scenario() -> None:
        reader = nsq.Reader(
            topic=topic,
            channel=CHANNEL,
            message_handler=handle,
            nsqd_tcp_addresses=[box.nsqd_tcp_address],
            max_in_flight=1,
        )
        try:
            await wait_for(lambda: channel_state().clients == 1, "pynsq's SUB")
            await asyncio.to_thread(box.clock.advance, DELAY)
            await wait_for(lambda: channel_state().requeue_count == 2, "pynsq's REQ")
        finally:
            reader.close()

    asyncio.run(scenario())
    assert got == [2]
    box.wait_for(topic, CHANNEL, deferred=1, clients=0)


def nsqbox_finishes_it(box: NSQBox, topic: str) -> bytes:
    """nsqbox's consumer takes it when the clock passes pynsq's REQ (attempt 3) and FINs it."""
    config = Config(max_in_flight=1)
    with BlockingConsumer(box.nsqd_tcp_address, topic, CHANNEL, config=config) as consumer:
        box.wait_for(topic, CHANNEL, clients=1)
        box.clock.advance(DELAY)
        (message,) = consumer.receive(timeout=TIMEOUT)
        assert (message.body, message.attempts) == (b"twice refused", 3)
        message.finish()
        box.wait_for(topic, CHANNEL, in_flight=0, deferred=0, depth=0)
        return message.id


def test_three_clients_in_turn_each_named_by_its_user_agent(box: NSQBox, gevent_hub: Any) -> None:
    topic = box.name("three")
    box.consume(topic, CHANNEL, n=0)  # the channel, so the message waits in it
    box.publish(topic, b"twice refused")
    gnsq_requeues_it(box, topic, gevent_hub)
    gevent_hub.get_hub().destroy(destroy_loop=True)  # pynsq's loop next, in this thread
    pynsq_requeues_it(box, topic)
    msg_id = nsqbox_finishes_it(box, topic).decode()

    journey = box.journey(msg_id)
    assert [e["kind"] for e in journey] == [
        "published",
        "queued",
        "delivered",
        "requeued",
        "due",  # the REQ's delay ended when the clock moved
        "delivered",
        "requeued",
        "due",
        "delivered",
        "finished",
    ]
    delivered = [e for e in journey if e["kind"] == "delivered"]
    agents = [e["user_agent"] for e in delivered]
    assert [e["attempt"] for e in delivered] == [1, 2, 3]
    assert agents[0].startswith("gnsq/")
    assert agents[1].startswith("pynsq/")
    assert agents[2].startswith("nsqbox/")
    requeued = [e for e in journey if e["kind"] == "requeued"]
    assert [(e["user_agent"], e["delay_ms"]) for e in requeued] == [
        (agents[0], DELAY * 1000),
        (agents[1], DELAY * 1000),
    ]
    assert (journey[-1]["user_agent"], journey[-1]["attempt"]) == (agents[2], 3)

    [given] = box.given_up(topic, CHANNEL)
    assert (given.id, given.attempts, given.requeues) == (msg_id, 3, 2)
    assert given.body == b"twice refused"
