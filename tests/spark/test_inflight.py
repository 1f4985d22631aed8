"""The stream reader's in-flight bound and keep-alive, on two nsqd nodes found through lookupd.

The reader is driven directly, the way Spark calls it (as in
``test_reader_protocol.py``). It may hold at most twice ``maxMessagesPerBatch``
in flight over all nodes together, and nothing it holds, read off the socket
or not, may reach ``msg_timeout`` while a micro-batch runs longer than that.
nsqd's ``/stats`` on each node is the judge.
"""

from __future__ import annotations

import json
import logging
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest

pytest.importorskip("pyspark")

from nsqbox.spark.options import parse_read_options
from nsqbox.spark.stream_reader import NSQStreamReader
from nsqbox.testing import NSQBox, NSQBoxFactory
from nsqbox.testing.waiting import poll

CHANNEL = "spark"
WAIT = 30.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll server state until ``condition`` holds (bounded: fails after WAIT seconds)."""
    poll(lambda: (condition(), None), WAIT, lambda _: f"timed out waiting for {what}")


def node_channel(http_address: str, topic: str) -> dict[str, Any]:
    """The channel's ``/stats`` entry on one node (empty when the node has no such channel
    or is down).
    """
    url = f"http://{http_address}/stats?format=json&topic={topic}&channel={CHANNEL}"
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            stats = json.load(response)
    except urllib.error.URLError as exc:
        if not isinstance(exc.reason, ConnectionRefusedError):
            raise
        return {"in_flight_count": 0, "timeout_count": 0, "clients": []}  # a stopped node
    for entry in stats["topics"] or []:  # null when the node has no topic yet
        for chan in entry["channels"]:
            if entry["topic_name"] == topic and chan["channel_name"] == CHANNEL:
                return dict(chan)
    return {"in_flight_count": 0, "timeout_count": 0, "clients": []}


def channels(box: NSQBox, topic: str) -> list[dict[str, Any]]:
    return [node_channel(address, topic) for address in box.nsqd_http_addresses]


def in_flight(box: NSQBox, topic: str) -> int:
    return sum(c["in_flight_count"] for c in channels(box, topic))


def finished(box: NSQBox, topic: str) -> int:
    return sum(client["finish_count"] for c in channels(box, topic) for client in c["clients"])


@pytest.fixture
def two_nodes(nsqbox_factory: NSQBoxFactory) -> NSQBox:
    return nsqbox_factory(nsqd=2, lookupd=1)


@pytest.fixture
def topic() -> str:
    return f"inflight_{uuid.uuid4().hex[:12]}"


@pytest.fixture
def reader(two_nodes: NSQBox, topic: str) -> Iterator[Callable[..., NSQStreamReader]]:
    made: list[NSQStreamReader] = []

    def make(**options: str) -> NSQStreamReader:
        lookupd = two_nodes.lookupd_http_address
        assert lookupd is not None
        opts = {"lookupd": lookupd, "topic": topic, "channel": CHANNEL, **options}
        made.append(NSQStreamReader(parse_read_options(opts)))
        return made[-1]

    yield make
    for each in made:
        each.stop()


def read_all(
    reader: NSQStreamReader,
    box: NSQBox,
    topic: str,
    count: int,
    bound: int,
    *,
    start: dict[str, Any],
) -> list[dict[str, Any]]:
    """Read batches as Spark does (each committed before the next) until ``count`` rows.

    Checks the in-flight bound on the nodes after every batch.
    """
    got: list[dict[str, Any]] = []
    end = start
    while len(got) < count:
        batch, end = reader.read(end)  # FINs the batch before: Spark committed it
        got += [row for b in batch for row in b.to_pylist()]  # Spark takes the rows
        assert in_flight(box, topic) <= bound
    reader.commit(end)  # Spark's commit of the last batch FINs it
    return got


def test_a_slow_batch_on_two_nodes_holds_twice_a_batch_and_nothing_times_out(
    two_nodes: NSQBox,
    topic: str,
    reader: Callable[..., NSQStreamReader],
    caplog: pytest.LogCaptureFixture,
) -> None:
    per_node, batch = 600, 100
    # 8 KiB bodies: what nsqd sends for the next batch fills several socket reads, so
    # most of it is still unread (and in flight on nsqd) when the reader returns a batch
    for node in (0, 1):
        two_nodes.publish(
            topic, [b"%d-%04d-" % (node, i) + b"x" * 8192 for i in range(per_node)], node=node
        )
    stream = reader(maxMessagesPerBatch=str(batch), msgTimeout="2s", pollTimeout="10s")
    caplog.set_level(logging.WARNING)

    first, end = stream.read({"messages": 0})
    rows = [row for b in first for row in b.to_pylist()]
    assert len(rows) == batch
    # the batch and the next one, over both nodes together (not per node)
    wait_for(lambda: in_flight(two_nodes, topic) == 2 * batch, "the in-flight bound reached")
    session = stream._session
    assert session is not None
    assert len(session.fetcher.addresses) == 2
    # Spark runs this batch for four times msg_timeout: the keep-alive must read and
    # TOUCH everything nsqd sent meanwhile.
    rounds = session.keepalive_rounds
    wait_for(lambda: session.keepalive_rounds >= rounds + 12, "12 keep-alive rounds (8 s)")
    assert [c["timeout_count"] for c in channels(two_nodes, topic)] == [0, 0]
    assert in_flight(two_nodes, topic) == 2 * batch

    rows += read_all(stream, two_nodes, topic, 2 * per_node - batch, 2 * batch, start=end)
    bodies = [row["body"][:7] for row in rows]
    assert len(bodies) == len(set(bodies)) == 2 * per_node  # every message, once
    wait_for(lambda: finished(two_nodes, topic) == 2 * per_node, "every FIN")
    assert [c["timeout_count"] for c in channels(two_nodes, topic)] == [0, 0]
    assert [c["in_flight_count"] for c in channels(two_nodes, topic)] == [0, 0]
    failed = [r.getMessage() for r in caplog.records if "FAILED" in r.getMessage()]
    assert failed == []  # no E_FIN_FAILED or E_TOUCH_FAILED


def test_a_node_that_joins_gets_its_share_within_the_bound(
    two_nodes: NSQBox, topic: str, reader: Callable[..., NSQStreamReader]
) -> None:
    batch = 50
    two_nodes.publish(topic, [b"a%03d" % i for i in range(300)], node=0)
    stream = reader(maxMessagesPerBatch=str(batch), pollTimeout="10s", lookupdPollInterval="100ms")
    first, end = stream.read({"messages": 0})
    rows = [row for b in first for row in b.to_pylist()]
    wait_for(lambda: in_flight(two_nodes, topic) == 2 * batch, "node 0 holding the bound")

    # node 1 gets the topic: the reader finds it at its next look and splits RDY, giving
    # node 1 only what node 0's answered messages free
    two_nodes.publish(topic, [b"b%03d" % i for i in range(300)], node=1)
    rows += read_all(stream, two_nodes, topic, 600 - len(rows), 2 * batch, start=end)
    bodies = sorted(row["body"] for row in rows)
    assert bodies == sorted([b"a%03d" % i for i in range(300)] + [b"b%03d" % i for i in range(300)])
    assert {row["nsqd_address"] for row in rows} == set(two_nodes.nsqd_tcp_addresses)
    wait_for(lambda: finished(two_nodes, topic) == 600, "every FIN")
    assert [c["timeout_count"] for c in channels(two_nodes, topic)] == [0, 0]


def test_three_nodes_joining_and_leaving_stay_within_the_bound(
    nsqbox_factory: NSQBoxFactory, topic: str
) -> None:
    box = nsqbox_factory(nsqd=3, lookupd=1)
    batch, bound = 40, 80
    lookupd = box.lookupd_http_address
    assert lookupd is not None
    options = {"lookupd": lookupd, "topic": topic, "channel": CHANNEL}
    options |= {"maxMessagesPerBatch": str(batch), "pollTimeout": "10s"}
    stream = NSQStreamReader(parse_read_options(options | {"lookupdPollInterval": "100ms"}))
    sent = {node: [b"%d-%03d" % (node, i) for i in range(150)] for node in range(3)}
    seen: set[bytes] = set()
    end: dict[str, Any] = {"messages": 0}

    def read_until(done: Callable[[], bool]) -> None:
        nonlocal end
        for _ in range(200):  # bounded: far more batches than there are messages
            if done():
                return
            rows, end = stream.read(end)  # FINs the batch before: Spark committed it
            seen.update(row["body"] for b in rows for row in b.to_pylist())
            assert in_flight(box, topic) <= bound
        pytest.fail(f"read {len(seen)} distinct messages, not what was waited for")

    def has(node: int) -> Callable[[], bool]:
        return lambda: any(body.startswith(b"%d-" % node) for body in seen)

    try:
        box.publish(topic, sent[0], node=0)
        read_until(has(0))
        wait_for(lambda: in_flight(box, topic) == bound, "node 0 holding the bound")
        box.publish(topic, sent[1], node=1)  # node 1 joins
        read_until(has(1))
        box.publish(topic, sent[2], node=2)  # node 2 joins
        read_until(has(2))
        box.stop_nsqd(1)  # node 1 leaves: what it held goes back to its queue, on disk
        read_until(lambda: set(sent[0]) | set(sent[2]) <= seen)
        box.start_nsqd(1)  # and comes back with what it persisted
        read_until(lambda: set(sent[1]) <= seen)
        stream.commit(end)
    finally:
        stream.stop()
    assert seen == set(sent[0]) | set(sent[1]) | set(sent[2])  # every message, at least once
    assert all(c["in_flight_count"] == 0 for c in channels(box, topic))


def test_without_msg_timeout_the_reader_takes_nsqds(nsqbox_factory: NSQBoxFactory) -> None:
    # A default of 60 s failed IDENTIFY on an nsqd whose --max-msg-timeout is shorter; unset,
    # the reader asks for nothing, takes nsqd's --msg-timeout and TOUCHes within a third of it
    box = nsqbox_factory(nsqd=1, msg_timeout=3.0, max_msg_timeout=30.0)
    box.publish("short", [b"a", b"b"])
    stream = NSQStreamReader(
        parse_read_options({"nsqd": box.nsqd_tcp_address, "topic": "short", "channel": CHANNEL})
    )
    try:
        batch, end = stream.read(stream.initialOffset())
        assert sorted(row["body"] for b in batch for row in b.to_pylist()) == [b"a", b"b"]
        stream.commit(end)
        session = stream._session
        assert session is not None
        assert session.interval == 1.0  # a third of nsqd's 3 s
    finally:
        stream.stop()
