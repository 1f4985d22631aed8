"""Per-node stop/start/restart, waiting for nsqlookupd, and what cleanup leaves behind.

Thread boxes on 127.0.0.1 port 0; every wait is bounded by the handle's timeout.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Iterator

import pytest

from nsqbox.testing import NSQBox, ThreadBox
from nsqbox.testing.cluster import NodeStopped
from nsqbox.testing.config import ClusterSpec

from .conftest import TIMEOUT


@pytest.fixture
def pair(tmp_path_factory: pytest.TempPathFactory) -> Iterator[NSQBox]:
    """Two nsqds and one nsqlookupd, for this test only."""
    box = ThreadBox(ClusterSpec(nsqd=2), str(tmp_path_factory.mktemp("pair")))
    try:
        with NSQBox(box, timeout=TIMEOUT) as handle:
            yield handle
    finally:
        box.stop()


def test_the_session_box_has_the_handles_address_names(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        for name in (
            "nsqd_tcp_address",
            "nsqd_http_address",
            "lookupd_tcp_address",
            "lookupd_http_address",
            "nsqd_tcp_addresses",
            "nsqd_http_addresses",
            "lookupd_tcp_addresses",
            "lookupd_http_addresses",
        ):
            assert getattr(thread_box, name) == getattr(handle, name), name
    assert thread_box.nsqd_http_address.url.startswith("http://127.0.0.1:")


def test_restart_keeps_ports_and_messages(pair: NSQBox) -> None:
    pair.publish("orders", [b"a", b"b"], node=1)
    pair.wait_for("orders", depth=2, node=1)
    before = pair.nsqd_tcp_addresses
    pair.stop_nsqd(1)
    with pytest.raises(NodeStopped, match="nsqd 1 is stopped"):
        pair.stats(node=1)
    assert pair.stats().topics == {}  # the running nodes only: node 0 has no such topic
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(pair.nsqd_tcp_addresses[1].pair, timeout=TIMEOUT).close()
    pair.start_nsqd(1)
    assert pair.nsqd_tcp_addresses == before
    restarted = pair.stats(node=1).topic("orders")
    assert restarted is not None
    # the messages persisted; the counters start again, as real nsqd's do
    assert (restarted.depth, restarted.message_count) == (2, 0)
    # registered again: nsqlookupd lists the node as a producer of the topic
    assert pair.wait_for_producers("orders") == [pair.nsqd_tcp_addresses[1]]
    assert pair.consume("orders", "billing", 2, node=1) == [b"a", b"b"]


def test_restart_keeps_a_capture_tapping(pair: NSQBox) -> None:
    with pair.capture("orders") as published:
        pair.publish("orders", b"before")
        pair.restart_nsqd(0)
        pair.publish("orders", b"after")
    assert published.bodies == [b"before", b"after"]


def test_a_stopped_node_is_back_for_the_next_test(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        handle.publish("t", b"x")
        handle.stop_nsqd()
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        assert handle.stats().topics == {}
        handle.publish("t", b"y")
        assert handle.consume("t", "c") == [b"y"]


def test_wait_for_producers_sees_a_topic_the_app_created_on_node_1(pair: NSQBox) -> None:
    # the app publishes to node 1 itself (PUB over TCP), not through the handle
    with socket.create_connection(pair.nsqd_tcp_addresses[1].pair, timeout=TIMEOUT) as conn:
        conn.sendall(b"  V2PUB orders\n" + len(b"x").to_bytes(4, "big") + b"x")
        assert conn.recv(64).endswith(b"OK")
    assert pair.wait_for_producers("orders") == [pair.nsqd_tcp_addresses[1]]
    with pytest.raises(AssertionError, match=r"to list 2 producer\(s\) of topic 'orders'"):
        pair.wait_for_producers("orders", 2, timeout=0.05)


def test_cleanup_logs_no_warning(thread_box: ThreadBox, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="nsqbox")
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        handle.publish("orders", [b"a", b"b"])
        assert handle.consume("orders", "billing") == [b"a"]
    # cleanup returned once nsqlookupd had acknowledged every UNREGISTER
    assert "REGISTER category:channel key:orders subkey:billing" in caplog.text
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_an_unfinished_message_does_not_reach_the_next_test(thread_box: ThreadBox) -> None:
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        handle.publish("orders", b"left in flight")
        conn = socket.create_connection(handle.nsqd_tcp_address.pair, timeout=TIMEOUT)
        conn.sendall(b"  V2SUB orders billing\nRDY 1\n")
        handle.wait_for("orders", "billing", in_flight=1)
        conn.close()  # disconnected without FIN: nsqd keeps it in flight until msg-timeout
        handle.wait_for("orders", "billing", clients=0, in_flight=1)
    with NSQBox(thread_box, timeout=TIMEOUT) as handle:
        handle.publish("orders", b"new")
        assert handle.consume("orders", "billing") == [b"new"]
        state = handle.wait_for("orders", "billing", depth=0, in_flight=0)
        assert (state.message_count, state.timeout_count) == (1, 0)
