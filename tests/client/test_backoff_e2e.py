"""Backoff end to end: the exact commands a Consumer sends, recorded by a proxy in front of nsqd."""

from __future__ import annotations

import trio

from nsqbox.client import Config, Message, open_consumer, open_producer
from nsqbox.nsqd.server import NSQDAddresses
from tests.client.helpers import RecordingProxy, tcp, wait_for


async def test_failure_backs_off_then_tests_the_waters_then_returns_to_full(
    nsqd: NSQDAddresses, nursery: trio.Nursery, autojump_clock: trio.testing.MockClock
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    async with open_producer(tcp(nsqd)) as producer:
        await producer.pub("t", b"flaky")
    calls: list[tuple[int, float]] = []

    def handler(message: Message) -> None:
        calls.append((message.attempts, trio.current_time()))
        if message.attempts == 1:
            raise RuntimeError("downstream is down")

    config = Config(max_in_flight=2, requeue_delay=1.0, backoff_multiplier=1.0)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[proxy.address], config=config
    ) as consumer:
        await wait_for(lambda: consumer.stats().finished == 1)
        await wait_for(lambda: consumer.total_rdy == 2)
        assert not consumer.in_backoff
    sent = proxy.commands()
    msg_id = sent[4].split()[1]
    assert sent == [
        b"IDENTIFY",
        b"SUB t c",
        b"RDY 1",  # the initial RDY
        b"RDY 2",  # first message: up to the full share
        b"REQ " + msg_id + b" 1000",  # the handler failed: requeue_delay * attempts
        b"RDY 0",  # back off for 1s * 2**1
        b"RDY 1",  # then test the waters
        b"FIN " + msg_id,  # the retry succeeded
        b"RDY 2",  # back to full throttle
        b"CLS",
    ]
    (first, t1), (second, t2) = calls
    assert (first, second) == (1, 2)
    assert t2 - t1 >= 2.0  # the backoff, not just the 1s REQ delay
