"""Faults on demand through the test handle (``nsqbox.faults``), observed by real clients.

Each fault is seen by a client over a real socket (nsqbox's own client, pynsq) and each
client recovers once it is lifted or has acted. Servers: 127.0.0.1 port 0, in a thread
(conftest's ``thread_box``) or in the test's trio nursery.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer, Publisher
from nsqbox.client.errors import ConnectionClosed
from nsqbox.client.message import Message
from nsqbox.testing import NSQBox, ThreadBox
from nsqbox.wire.errors import NSQError
from tests.helpers import wait_until

from .conftest import TIMEOUT
from .fault_clients import client_ids, gevent_wait, gnsq_consumer, trio_consumer

# -- fail publishes ----------------------------------------------------------------------


def test_fail_publishes_fails_exactly_count_commands(handle: NSQBox) -> None:
    topic = handle.name("orders")
    handle.faults.fail_publishes(topic=topic, count=3)
    codes = []
    with Publisher(handle.nsqd_tcp_address) as producer:
        for i in range(3):
            with pytest.raises(NSQError) as info:
                producer.pub(topic, f"m{i}".encode())
            codes.append((info.value.code, info.value.fatal, str(info.value)))
        producer.pub(topic, b"ok")  # reconnects: nsqd closed the connection on the error
        producer.mpub(topic, [b"a", b"b"])
    assert (
        codes
        == [("E_PUB_FAILED", True, "E_PUB_FAILED PUB failed fault injected: publish failed")] * 3
    )
    assert handle.wait_for(topic, depth=3).message_count == 3
    assert handle.faults.active() == []


def test_fail_publishes_scoped_to_a_topic_and_lifted_by_the_with_block(handle: NSQBox) -> None:
    topic, other = handle.name("orders"), handle.name("audit")
    url = f"http://{handle.nsqd_http_address}"
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        with handle.faults.fail_publishes(topic=topic, error="boom") as fault:
            assert http.post("/pub", params={"topic": topic}, content=b"x").status_code == 503
            mpub = http.post("/mpub", params={"topic": topic}, content=b"x\ny")
            assert (mpub.status_code, mpub.text) == (503, '{"message":"EXITING"}')
            assert http.post("/pub", params={"topic": other}, content=b"x").status_code == 200
            with Publisher(handle.nsqd_tcp_address) as producer, pytest.raises(NSQError) as info:
                producer.mpub(topic, [b"a", b"b"])
            assert str(info.value) == "E_MPUB_FAILED MPUB failed boom"
            (listed,) = handle.faults.active()
            assert (listed.kind, listed.topic, listed.remaining) == ("fail_publishes", topic, None)
            assert listed == fault.info
        assert handle.faults.active() == []
        assert http.post("/pub", params={"topic": topic}, content=b"x").status_code == 200
    assert handle.wait_for(topic, depth=1).depth == 1


def test_faults_left_active_are_lifted_with_the_handle(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box, timeout=TIMEOUT) as first:
        first.faults.disk_full()
        first.faults.fail_publishes(count=5)
        assert len(first.faults.active()) == 2
    with NSQBox(thread_box, timeout=TIMEOUT) as second:
        assert second.faults.active() == []
        assert second.faults.lift_all() == 0


# -- disk full ---------------------------------------------------------------------------


def test_disk_full_fails_publishes_and_ping_until_lifted(handle: NSQBox) -> None:
    topic = handle.name("orders")
    url = f"http://{handle.nsqd_http_address}"
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        assert http.get("/ping").text == "OK"
        fault = handle.faults.disk_full()
        ping = http.get("/ping")
        assert (ping.status_code, ping.text) == (500, "NOK - write: no space left on device")
        assert http.post("/pub", params={"topic": topic}, content=b"x").status_code == 503
        with Publisher(handle.nsqd_tcp_address) as producer:
            with pytest.raises(NSQError, match="PUB failed write: no space left on device"):
                producer.pub(topic, b"x")
            assert fault.lift()
            assert not fault.lift()
            producer.pub(topic, b"x")
        assert (http.get("/ping").status_code, http.get("/ping").text) == (200, "OK")
    assert handle.wait_for(topic, depth=1).depth == 1


# -- time out in flight now ----------------------------------------------------------------


def test_time_out_in_flight_redelivers_with_attempts_plus_one(handle: NSQBox) -> None:
    topic = handle.name("orders")
    handle.publish(topic, [b"a", b"b"])
    config = Config(max_in_flight=2, msg_timeout=60.0)
    with BlockingConsumer(handle.nsqd_tcp_address, topic, "work", config=config) as consumer:
        first = _receive(consumer, 2)
        assert sorted((m.body, m.attempts) for m in first) == [(b"a", 1), (b"b", 1)]
        for m in first:
            m.disable_auto_response()
        assert handle.faults.time_out_in_flight(topic, "work") == 2
        again = _receive(consumer, 2)
        assert sorted((m.body, m.attempts) for m in again) == [(b"a", 2), (b"b", 2)]
        for m in again:
            m.finish()
        consumer.flush()
        channel = handle.wait_for(topic, "work", in_flight=0, depth=0)
        assert channel.timeout_count == 2


def _receive(consumer: BlockingConsumer, count: int) -> list[Message]:
    got: list[Message] = []
    while len(got) < count:
        batch = consumer.receive(timeout=TIMEOUT)
        assert batch, f"timed out waiting for {count} messages (got {len(got)})"
        got.extend(batch)
    return got


# -- drop connections --------------------------------------------------------------------


@pytest.mark.parametrize("reset", [False, True])
def test_drop_connections_by_topic(handle: NSQBox, reset: bool) -> None:
    topic, other = handle.name("orders"), handle.name("audit")
    address = handle.nsqd_tcp_address
    with (
        BlockingConsumer(address, topic, "work") as dropped,
        BlockingConsumer(address, other, "work") as kept,
    ):
        handle.wait_for(topic, "work", clients=1)
        assert handle.faults.drop_connections(topic=topic, reset=reset) == 1
        handle.wait_for(topic, "work", clients=0)
        # a FIN reads as end of stream; an RST as "connection reset by peer"
        seen = "reset by peer" if reset else "closed the connection"
        with pytest.raises(ConnectionClosed, match=seen):
            dropped.receive(timeout=TIMEOUT)
        handle.publish(other, b"still here")
        assert [m.body for m in _receive(kept, 1)] == [b"still here"]


def test_drop_connections_by_user_agent(handle: NSQBox) -> None:
    topic = handle.name("orders")
    config = Config(user_agent="victim/1.0")
    with (
        BlockingConsumer(handle.nsqd_tcp_address, topic, "a", config=config),
        BlockingConsumer(handle.nsqd_tcp_address, topic, "b"),
    ):
        handle.wait_for(topic, "b", clients=1)
        assert handle.faults.drop_connections(user_agent="victim") == 1
        handle.wait_for(topic, "a", clients=0)
        assert handle.stats().channel(topic, "b").clients == 1  # type: ignore[union-attr]


# -- trio mode -----------------------------------------------------------------------------


async def test_trio_mode_consumer_reconnects_after_drop(tmp_path: Path) -> None:
    async with trio_consumer(tmp_path) as (box, got):
        await box.wait_for("orders", "work", clients=1)
        assert box.faults.drop_connections(reset=True) == 1
        await box.wait_for("orders", "work", clients=1)  # it came back
        url = f"http://{box.nsqd_http_address}/pub?topic=orders"
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            with box.faults.fail_publishes("orders", count=1):
                assert (await http.post(url, content=b"lost")).status_code == 503
                assert (await http.post(url, content=b"kept")).status_code == 200
        await wait_until(lambda: got)
        await box.wait_for("orders", "work", message_count=1, depth=0, in_flight=0)
    assert got == [b"kept"]


async def test_trio_mode_fault_as_async_with_is_lifted_on_leaving(tmp_path: Path) -> None:
    async with trio_consumer(tmp_path) as (box, got):
        url = f"http://{box.nsqd_http_address}/pub?topic=orders"
        async with httpx.AsyncClient(timeout=TIMEOUT) as http:
            async with box.faults.fail_publishes("orders") as fault:
                assert box.faults.active() == [fault.info]
                assert (await http.post(url, content=b"lost")).status_code == 503
            assert box.faults.active() == []
            assert (await http.post(url, content=b"kept")).status_code == 200
        await box.wait_for("orders", "work", message_count=1, depth=0, in_flight=0)
    assert got == [b"kept"]


async def test_thread_mode_fault_as_async_with_in_an_async_test(handle: NSQBox) -> None:
    topic = handle.name("orders")
    url = f"{handle.nsqd_http_address.url}/pub"
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        async with handle.faults.disk_full(topic) as fault:
            assert handle.faults.active() == [fault.info]
            failed = await http.post(url, params={"topic": topic}, content=b"lost")
            assert (failed.status_code, failed.text) == (503, '{"message":"EXITING"}')
        assert handle.faults.active() == []
        assert (await http.post(url, params={"topic": topic}, content=b"kept")).status_code == 200
    assert (await handle.await_for(topic, depth=1)).message_count == 1


# -- third-party clients: gnsq (gevent) --------------------------------------------------


def test_gnsq_producer_sees_pub_failed_then_publishes(handle: NSQBox, gevent_hub: Any) -> None:
    import gnsq
    from gnsq import errors as gnsq_errors

    topic = handle.name("orders")
    producer = gnsq.Producer(handle.nsqd_tcp_address)
    try:
        producer.start()
        with handle.faults.fail_publishes(topic=topic, count=2):
            for _ in range(2):
                result = producer.publish(topic, b"x", timeout=TIMEOUT, raise_error=False)
                with pytest.raises(gnsq_errors.NSQPubFailed, match="PUB failed fault injected"):
                    result.get(timeout=TIMEOUT)
            # gnsq reconnects after nsqd closed the connection; the third one goes through
            result = producer.publish(topic, b"x", timeout=TIMEOUT, raise_error=False)
            assert result.get(timeout=TIMEOUT) == b"OK"
    finally:
        producer.close()
        producer.join(timeout=TIMEOUT)
    assert handle.wait_for(topic, depth=1, sleep=gevent_hub.sleep).message_count == 1


def test_gnsq_consumer_reconnects_after_a_drop(
    handle: NSQBox, thread_box: ThreadBox, gevent_hub: Any
) -> None:
    topic = handle.name("orders")
    with gnsq_consumer(handle, topic, max_backoff_duration=0.1) as got:
        before = client_ids(thread_box)
        assert handle.faults.drop_connections(topic=topic, channel="work") == 1
        # gnsq subscribed again, on a new connection
        gevent_wait(lambda: client_ids(thread_box) - before, "a new connection")
        handle.publish(topic, b"after the drop")
        gevent_wait(lambda: got, "a message")
    assert got == [b"after the drop"]


def test_gnsq_consumer_gets_a_timed_out_message_again_with_attempts_plus_one(
    handle: NSQBox, gevent_hub: Any
) -> None:
    topic = handle.name("orders")
    got: list[tuple[bytes, int]] = []

    def handler(_consumer: Any, message: Any) -> None:
        got.append((message.body, message.attempts))
        if message.attempts == 1:
            message.enable_async()  # left in flight: neither FIN nor REQ
        # a later delivery is FINished by gnsq when the handler returns

    handle.publish(topic, b"slow")
    with gnsq_consumer(handle, topic, handler):
        gevent_wait(lambda: got, "the first delivery")
        handle.wait_for(topic, "work", in_flight=1, sleep=gevent_hub.sleep)
        assert handle.faults.time_out_in_flight(topic, "work") == 1
        gevent_wait(lambda: len(got) == 2, "the second delivery")
        channel = handle.wait_for(topic, "work", in_flight=0, depth=0, sleep=gevent_hub.sleep)
    assert got == [(b"slow", 1), (b"slow", 2)]
    assert channel.timeout_count == 1
