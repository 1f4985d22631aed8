"""Latency and stalls through ``nsqbox.faults``, seen by real clients (gnsq, nsqbox's own).

Under latency a consumer still gets everything (later; nothing here measures how much).
Under a stall its heartbeats stop, so a read timeout (the client's, or nsqd's when the
client stops answering heartbeats it never got) ends its connection; it connects again,
and gets its messages once the stall is lifted. Servers on 127.0.0.1 port 0.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from nsqbox.client import Config
from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing import NSQBox, ThreadBox
from tests.helpers import wait_until

from .conftest import TIMEOUT
from .fault_clients import client_ids, gevent_wait, gnsq_consumer, trio_consumer

BODIES = [f"m{i}".encode() for i in range(20)]


def test_under_latency_a_blocking_consumer_gets_everything(handle: NSQBox) -> None:
    topic = handle.name("orders")
    with handle.faults.latency(0.02, jitter=0.01, topic=topic) as fault:
        (listed,) = handle.faults.active()
        assert listed == fault.info
        assert (listed.kind, listed.topic, listed.delay, listed.jitter) == (
            "latency",
            topic,
            0.02,
            0.01,
        )
        handle.publish(topic, BODIES)
        got: list[bytes] = []
        with BlockingConsumer(
            handle.nsqd_tcp_address, topic, "work", config=Config(max_in_flight=5)
        ) as consumer:
            while len(got) < len(BODIES):
                batch = consumer.receive(timeout=TIMEOUT)
                assert batch, f"only {len(got)} of {len(BODIES)} arrived"
                for message in batch:
                    got.append(message.body)
                    message.finish()
        assert sorted(got) == sorted(BODIES)
    assert handle.faults.active() == []


def test_gnsq_consumer_gets_everything_under_latency(handle: NSQBox, gevent_hub: Any) -> None:
    topic = handle.name("orders")
    with (
        handle.faults.latency(0.01, user_agent="gnsq", count=50),
        gnsq_consumer(handle, topic, max_in_flight=4) as got,
    ):
        handle.publish(topic, BODIES)
        gevent_wait(lambda: len(got) == len(BODIES), f"the {len(BODIES)} messages")
    assert sorted(got) == sorted(BODIES)


def test_gnsq_consumer_is_cut_off_by_a_stall_and_recovers(
    handle: NSQBox, thread_box: ThreadBox, gevent_hub: Any
) -> None:
    topic = handle.name("orders")
    with gnsq_consumer(
        handle,
        topic,
        max_backoff_duration=0.1,
        heartbeat_interval=1,  # seconds; nsqd's read timeout is two of them
        timeout=2.0,  # gnsq's socket read timeout
    ) as got:
        first = client_ids(thread_box)
        with handle.faults.stall(topic=topic):
            # no heartbeat reaches it: a read timeout ends the connection
            gevent_wait(lambda: not first & client_ids(thread_box), "the stalled one to close")
        handle.wait_for(topic, "work", clients=1, sleep=gevent_hub.sleep)
        handle.publish(topic, b"after the stall")
        gevent_wait(lambda: got, "a message")
    assert got == [b"after the stall"]


async def test_trio_consumer_read_timeout_fires_under_a_stall(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="nsqbox.client")
    async with trio_consumer(
        tmp_path,
        heartbeat_interval=1.0,
        read_timeout=1.5,  # before nsqd's own read timeout (2 heartbeats)
        user_agent="app/1.0",
    ) as (box, got):
        await box.publish("orders", b"before")
        await wait_until(lambda: got)  # connected, subscribed, receiving
        first = set(box.nsqds[0].clients)
        stall = box.faults.stall(user_agent="app/")
        await wait_until(lambda: not first & set(box.nsqds[0].clients))
        # its own read timeout (server and client share this loop's clock: nsqd's,
        # two heartbeats after the last NOP, comes later)
        assert "connection closed: nothing received for 1.5s" in caplog.text
        await box.publish("orders", b"held")
        assert got == [b"before"]  # the new connection is stalled too, until the lift
        assert stall.lift()
        await wait_until(lambda: len(got) == 2)
    assert got == [b"before", b"held"]
