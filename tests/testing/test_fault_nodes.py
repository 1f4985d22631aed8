"""Restarting and crashing a node through ``nsqbox.faults``, seen by real clients.

A crash loses what a SIGKILL loses: the crash tests publish over TCP (every message
acknowledged with ``OK``) and count exactly which messages come back. The simulated
crash (thread mode) and a real SIGKILL of ``nsqbox up`` (subprocess mode) must lose
the same. Servers on 127.0.0.1 port 0; every wait is bounded.
"""

from __future__ import annotations

import socket
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqbox.client.blocking import Publisher
from nsqbox.testing import NoProcBox, NSQBox, SubprocessBox, ThreadBox
from nsqbox.testing.boxes import Box
from nsqbox.testing.cluster import NodeStopped
from nsqbox.testing.config import ClusterSpec
from nsqbox.testing.faults import FaultsUnsupported
from tests.helpers import wait_until

from .conftest import TIMEOUT
from .fault_clients import gevent_wait, gnsq_consumer, trio_consumer

BODIES = [f"order {i}".encode() for i in range(10)]


def _publish_acknowledged(handle: NSQBox, topic: str) -> None:
    """Five PUBs and one MPUB of five, each answered OK, into a channel that exists."""
    url = handle.nsqd_http_address.url
    with httpx.Client(base_url=url, timeout=TIMEOUT) as http:
        http.post("/topic/create", params={"topic": topic}).raise_for_status()
        http.post("/channel/create", params={"topic": topic, "channel": "work"}).raise_for_status()
    with Publisher(handle.nsqd_tcp_address) as producer:
        for body in BODIES[:5]:
            producer.pub(topic, body)
        producer.mpub(topic, BODIES[5:])


def _box(mode: str, tmp_path: Path, mem_queue_size: int) -> Box:
    spec = ClusterSpec(nsqd_options={"mem_queue_size": mem_queue_size})
    if mode == "subprocess":
        return SubprocessBox(spec, str(tmp_path), python=sys.executable, start_timeout=30)
    return ThreadBox(spec, str(tmp_path))


@pytest.mark.parametrize("mode", ["thread", "subprocess"])
@pytest.mark.parametrize(
    ("mem_queue_size", "survivors"),
    [(0, len(BODIES)), (10000, 0)],
    ids=["on-disk-all-survive", "in-memory-none-survive"],
)
def test_a_crash_keeps_exactly_what_is_on_disk(
    tmp_path: Path, mode: str, mem_queue_size: int, survivors: int
) -> None:
    box = _box(mode, tmp_path, mem_queue_size)
    try:
        with NSQBox(box, timeout=TIMEOUT) as handle:
            topic = handle.name("orders")
            _publish_acknowledged(handle, topic)
            assert handle.wait_for(topic, "work", depth=len(BODIES)).depth == len(BODIES)
            handle.faults.crash()
            with pytest.raises(ConnectionRefusedError):
                socket.create_connection(handle.nsqd_tcp_address.pair, timeout=TIMEOUT).close()
            handle.faults.start()
            # the channel was persisted when it was made; its messages only if on disk
            channel = handle.wait_for(topic, "work", in_flight=0)
            got = handle.consume(topic, "work", channel.depth) if channel.depth else []
            assert set(got) == set(BODIES[:survivors])
            # once each, but for a record read from a disk queue since its last sync:
            # read again, never lost. The first PUB can be one: it is put while nsqd
            # still announces the new topic to nsqlookupd, before the topic starts, so
            # it waits in the topic's queue until the start hands it to the channel.
            assert len(got) - survivors in (0, 1)
    finally:
        box.stop()


def test_a_crash_loses_in_flight_and_a_restart_keeps_it(tmp_path: Path) -> None:
    box = ThreadBox(ClusterSpec(nsqd=2, lookupd=0), str(tmp_path))
    try:
        with NSQBox(box, timeout=TIMEOUT) as handle:
            for node in (0, 1):
                handle.publish("orders", [b"a", b"b", b"c"], node=node)
                conn = socket.create_connection(handle.nsqd_tcp_addresses[node].pair)
                conn.sendall(b"  V2SUB orders work\nRDY 1\n")  # one message in flight
                handle.wait_for("orders", "work", in_flight=1, depth=2, node=node)
                conn.close()
            handle.faults.restart(node=0)
            handle.faults.crash(node=1)
            with pytest.raises(NodeStopped, match="nsqd 1 is crashed"):
                handle.stats(node=1)
            handle.faults.start(node=1)
            # a clean shutdown persisted the in-flight message with the others
            assert handle.wait_for("orders", "work", depth=3, node=0).in_flight == 0
            assert handle.wait_for("orders", "work", depth=0, node=1).in_flight == 0
    finally:
        box.stop()


def test_a_node_left_crashed_is_back_for_the_next_test(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        handle.publish("t", b"lost")
        handle.faults.crash()
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        assert handle.stats().topics == {}  # the memory queue went with the crash
        handle.publish("t", b"y")
        assert handle.consume("t", "c") == [b"y"]


def test_noproc_cannot_restart_nodes(handle: NSQBox) -> None:
    with NSQBox(NoProcBox(handle.addresses, timeout=TIMEOUT), timeout=TIMEOUT) as other:
        with pytest.raises(FaultsUnsupported, match="restarts and crashes are not supported"):
            other.faults.crash()
        with pytest.raises(NotImplementedError):
            other.faults.restart()


def test_subprocess_mode_restarts_only_a_box_of_one_nsqd(remote: NSQBox) -> None:
    with pytest.raises(NotImplementedError, match="one nsqd of several"):
        remote.faults.restart(node=1)


# -- clients reconnect --------------------------------------------------------------------


@pytest.mark.parametrize("how", ["restart", "crash"])
def test_gnsq_consumer_reconnects_after_a_restart_or_a_crash(
    handle: NSQBox, thread_box: ThreadBox, gevent_hub: Any, how: str
) -> None:
    topic = handle.name("orders")
    with gnsq_consumer(handle, topic, max_backoff_duration=0.1) as got:
        if how == "restart":
            handle.faults.restart()
        else:
            handle.faults.crash(restart=True)
        # gnsq dials the same address again and subscribes on the new node
        handle.wait_for(topic, "work", clients=1, sleep=gevent_hub.sleep)
        handle.publish(topic, b"after")
        gevent_wait(lambda: got, "a message")
    assert got == [b"after"]


async def test_trio_consumer_reconnects_after_a_crash(tmp_path: Path) -> None:
    async with trio_consumer(tmp_path) as (box, got):
        await box.wait_for("orders", "work", clients=1)
        before = box.nsqds[0]
        await box.faults.crash()
        assert box.faults.active() == []
        await box.faults.start()
        assert box.nsqds[0] is not before
        await box.wait_for("orders", "work", clients=1)
        await box.publish("orders", b"after")
        await wait_until(lambda: got)
    assert got == [b"after"]
