import asyncio
import json

import nsq
import pytest
import trio
from orders_app import TransientError, bill, publish_order_gnsq, publish_order_http

from nsqbox.client import Config, open_consumer
from nsqbox.client.blocking import Publisher


@pytest.fixture(scope="module")
def publisher(nsqbox_proc):
    with Publisher(nsqbox_proc.nsqd_tcp_address) as publisher:
        yield publisher


def test_http_publisher(nsqbox):
    with nsqbox.capture("orders") as published:
        publish_order_http(nsqbox.nsqd_http_address.url, 1)
    assert published.bodies == [b'{"id": 1}']
    assert nsqbox.stats().topic("orders").channels == {}  # the capture made no channel


def test_a_capture_creates_nothing(nsqbox):
    with nsqbox.capture("orders") as published:
        pass
    assert (published.bodies, nsqbox.stats().topics) == ([], {})


def test_gnsq_publisher(nsqbox, gevent_hub):
    with nsqbox.capture("orders") as published:
        publish_order_gnsq(nsqbox.nsqd_tcp_address, 2)
    assert published.bodies == [b'{"id": 2}']
    assert nsqbox.consume("orders", "billing", n=1) == [b'{"id": 2}']


def test_module_scoped_publisher_and_dpub(nsqbox, publisher):
    with nsqbox.capture("orders") as published:
        publisher.dpub("orders", b"later", delay=30.0)
    assert [m.defer_ms for m in published.messages] == [30_000]
    assert nsqbox.wait_for("orders", depth=1).message_count == 1


def test_pynsq_worker_requeues_transient_failures(nsqbox):
    nsqbox.publish("orders", [b'{"id": 1}', b'{"id": 2}'])
    billed = []

    def handler(message):
        try:
            billed.append(bill(json.loads(message.body), message.attempts))
        except TransientError:
            message.requeue(delay=0, backoff=False)
            return None
        return True

    async def main():
        reader = nsq.Reader(
            topic="orders",
            channel="billing",
            message_handler=handler,
            lookupd_http_addresses=[nsqbox.lookupd_http_address.url],
            lookupd_poll_jitter=0.0,
        )
        try:
            await nsqbox.await_for("orders", "billing", requeue_count=1, depth=0, in_flight=0)
        finally:
            reader.close()
            await asyncio.sleep(0)

    asyncio.run(main())
    assert sorted(billed) == ["billed 1", "billed 2"]


async def test_trio_worker_discovers_a_topic_the_app_created(nsqbox):
    publish_order_http(nsqbox.nsqd_http_address.url, 4)
    await nsqbox.await_for_producers("orders")
    billed = []

    def handle(message):
        billed.append(bill(json.loads(message.body), message.attempts))

    config = Config(lookupd_poll_interval=1.0, lookupd_poll_jitter=0.0)
    async with open_consumer(
        "orders",
        "billing",
        handle,
        lookupd_http_addresses=[nsqbox.lookupd_http_address],
        config=config,
    ):
        await nsqbox.await_for("orders", "billing", message_count=1, depth=0, in_flight=0)
    assert billed == ["billed 4"]
    assert trio.current_time() >= 0


def test_a_consumer_that_left_a_message_in_flight(nsqbox):
    nsqbox.publish("orders", b"unanswered")
    with Publisher(nsqbox.nsqd_tcp_address) as publisher:
        publisher.pub("orders", b"second")
    assert nsqbox.wait_for("orders", depth=2).message_count == 2


@pytest.mark.parametrize("run", [1, 2])
def test_each_test_starts_empty(nsqbox, run):
    assert nsqbox.stats().topics == {}
    nsqbox.publish("orders", str(run))
    assert nsqbox.consume("orders", "billing") == [str(run).encode()]
