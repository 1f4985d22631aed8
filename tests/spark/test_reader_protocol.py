"""The readers and the writer driven directly, the way Spark calls them, against a real nsqd.

No SparkSession here: these tests call ``read``/``commit``/``partitions``/
``write`` themselves, which makes the at-least-once rules exact and fast to
check. Server state is read from ``/stats`` or, for in-flight deadlines, on
the server's own thread.
"""

from __future__ import annotations

import json
import pickle
import socket
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pyspark")
pa = pytest.importorskip("pyarrow")

from nsqbox.client.blocking import BlockingConsumer  # noqa: E402
from nsqbox.nsqd.domain.options import TLS_REQUIRED_EXCEPT_HTTP, NSQDOptions  # noqa: E402
from nsqbox.spark.batch_reader import NSQBatchReader, NSQPartition  # noqa: E402
from nsqbox.spark.fetch import discover_nsqd  # noqa: E402
from nsqbox.spark.options import parse_read_options, parse_write_options  # noqa: E402
from nsqbox.spark.rows import ARROW_SCHEMA, READ_COLUMNS  # noqa: E402
from nsqbox.spark.stream_reader import NSQStreamReader  # noqa: E402
from nsqbox.spark.writer import publish  # noqa: E402
from nsqbox.testing import NSQBox, ThreadedNSQD  # noqa: E402
from nsqbox.testing.waiting import poll  # noqa: E402
from nsqbox.wire.errors import NSQError  # noqa: E402

from .conftest import channel_stats, create_channel  # noqa: E402
from .conftest import publish as mpub  # noqa: E402

CHANNEL = "spark"
WAIT = 20.0


def wait_for(condition: Callable[[], bool], what: str) -> None:
    """Poll server state until ``condition`` holds (bounded: fails after WAIT seconds)."""
    poll(lambda: (condition(), None), WAIT, lambda _: f"timed out waiting for {what}")


def rows(result: Iterator[Any]) -> list[dict[str, Any]]:
    batches = list(result)
    assert all(isinstance(b, pa.RecordBatch) and b.schema == ARROW_SCHEMA for b in batches)
    return [row for b in batches for row in b.to_pylist()]


def finished(nsqbox: NSQBox, topic: str) -> int:
    stats = channel_stats(nsqbox, topic, CHANNEL)
    return sum(c["finish_count"] for c in stats["clients"])


@pytest.fixture
def stream_reader(nsqbox: NSQBox, topic: str) -> Iterator[Callable[..., NSQStreamReader]]:
    made: list[NSQStreamReader] = []

    def make(**options: str) -> NSQStreamReader:
        opts = {"nsqd": nsqbox.nsqd_tcp_address, "topic": topic, "channel": CHANNEL, **options}
        reader = NSQStreamReader(parse_read_options(opts))
        made.append(reader)
        return reader

    yield make
    for reader in made:
        reader.stop()


def test_a_batch_is_finished_only_once_spark_moves_past_it(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    bodies = [b"m%d" % i for i in range(10)]
    mpub(nsqbox, topic, bodies)
    reader = stream_reader(maxMessagesPerBatch="4", pollTimeout="10s")
    start = reader.initialOffset()
    assert start == {"messages": 0}

    first, end = reader.read(start)
    assert end == {"messages": 4}
    got = rows(first)
    assert [r["body"] for r in got] == bodies[:4]
    assert set(got[0]) == set(READ_COLUMNS)
    assert (got[0]["topic"], got[0]["channel"]) == (topic, CHANNEL)
    assert (got[0]["nsqd_address"], got[0]["attempts"]) == (nsqbox.nsqd_tcp_address, 1)
    assert len(got[0]["id"]) == 16
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["in_flight_count"] == 8  # RDY is twice the batch size
    assert finished(nsqbox, topic) == 0

    # Spark asks for the next batch only after batch 0 is in its commit log.
    second, end2 = reader.read(end)
    assert [r["body"] for r in rows(second)] == bodies[4:8]
    assert end2 == {"messages": 8}
    wait_for(lambda: finished(nsqbox, topic) == 4, "FIN of batch 0")

    # commit() (one batch late in Spark) finishes too, whichever comes first.
    reader.commit(end2)
    wait_for(lambda: finished(nsqbox, topic) == 8, "FIN of batch 1")
    third, end3 = reader.read(end2)
    assert [r["body"] for r in rows(third)] == bodies[8:]
    reader.commit(end3)
    wait_for(lambda: finished(nsqbox, topic) == 10, "FIN of batch 2")
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"]) == (0, 0, 0)


def test_a_batch_spark_never_took_goes_back_to_nsqd(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    mpub(nsqbox, topic, [b"a", b"b"])
    reader = stream_reader(maxMessagesPerBatch="2", pollTimeout="10s")
    untaken, end = reader.read({"messages": 0})
    assert end == {"messages": 2}
    # Spark planned 0..2 but read it some other way (pyspark 4.0 can, after a restart):
    # the batch is committed, its rows were never taken from the reader. REQ, not FIN.
    reader.commit(end)
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["requeue_count"] == 2, "REQ")
    assert finished(nsqbox, topic) == 0
    again, _ = reader.read(end)
    assert sorted(r["body"] for r in rows(again)) == [b"a", b"b"]
    assert list(untaken) != []  # still a valid iterator (Spark may copy it later)


def test_big_batches_use_several_connections(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    bodies = [b"m%05d" % i for i in range(7000)]
    mpub(nsqbox, topic, bodies)
    # 2 x 3000 in flight needs three connections at nsqd's max RDY of 2500
    reader = stream_reader(maxMessagesPerBatch="3000", pollTimeout="10s")
    got: list[bytes] = []
    end = {"messages": 0}
    for expected_end in (3000, 6000, 7000):
        batch, end = reader.read(end)
        assert end == {"messages": expected_end}
        got += [r["body"] for r in rows(batch)]  # Spark takes each batch before the next
    assert sorted(got) == bodies
    assert end == {"messages": 7000}
    reader.commit(end)
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["client_count"] == 3
    wait_for(lambda: finished(nsqbox, topic) == 7000, "FIN over every connection")


def test_an_empty_read_keeps_the_offset(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    reader = stream_reader(pollTimeout="50ms")
    result, end = reader.read({"messages": 7})
    assert list(result) == []
    assert end == {"messages": 7}


def test_going_back_requeues_the_batches_after_start(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    mpub(nsqbox, topic, [b"a", b"b", b"c"])
    reader = stream_reader(maxMessagesPerBatch="2", pollTimeout="10s")
    first, _ = reader.read({"messages": 0})
    assert len(rows(first)) == 2
    # Spark plans from 0 again: batch 0..2 was never committed, so it goes back to nsqd.
    again, end_again = reader.read({"messages": 0})
    assert end_again == {"messages": 2}
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["requeue_count"] == 2, "REQ")
    assert finished(nsqbox, topic) == 0
    assert len(rows(again)) == 2


def test_stop_hands_everything_back(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    mpub(nsqbox, topic, [b"m%d" % i for i in range(6)])
    reader = stream_reader(maxMessagesPerBatch="2", pollTimeout="10s")
    reader.read({"messages": 0})
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["in_flight_count"] == 4, "deliveries")
    reader.stop()
    # the pending batch and the buffered messages are REQ'd at once, not left to time out
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["depth"] == 6, "requeued messages")
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert (stats["in_flight_count"], stats["timeout_count"]) == (0, 0)


def test_held_messages_are_touched_past_msg_timeout(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    mpub(nsqbox, topic, [b"x", b"y"])
    reader = stream_reader(maxMessagesPerBatch="1", pollTimeout="10s", msgTimeout="1s")
    first, _ = reader.read({"messages": 0})
    assert len(rows(first)) == 1

    session = reader._session
    assert session is not None
    assert session.interval == pytest.approx(1 / 3)
    # Four keep-alive rounds take longer than msg_timeout (and nsqd's 100 ms scan):
    # untouched, both messages would have timed out by then.
    wait_for(lambda: session.keepalive_rounds >= 4, "four keep-alive rounds")
    state = nsqbox.stats().topics[topic].channels[CHANNEL]
    assert (state.in_flight, state.timeout_count) == (2, 0)


def test_available_now_stops_at_messages_published_after_it_began(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    create_channel(nsqbox, topic, CHANNEL)
    mpub(nsqbox, topic, [b"old1", b"old2"])
    reader = stream_reader(pollTimeout="10s")
    reader.prepareForTriggerAvailableNow()
    cutoff_ns = time.time_ns()
    mpub(nsqbox, topic, [b"new"])
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["message_count"] == 3, "publish")
    first, end = reader.read({"messages": 0})
    got = rows(first)
    assert all(r["timestamp"].timestamp() * 1e9 <= cutoff_ns for r in got)
    assert {r["body"] for r in got} <= {b"old1", b"old2"}
    # once past the cutoff (or idle) the run is over: no more data, however long it runs
    done, same = reader.read(end)
    while list(done):  # the older messages may have come in two receives
        end = same
        done, same = reader.read(end)
    assert same == end
    wait_for(lambda: finished(nsqbox, topic) == 2, "FIN of the older messages")
    reader.stop()
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["depth"] == 1, "the new message back")
    stats = channel_stats(nsqbox, topic, CHANNEL)
    # REQ'd, not left to time out (maybe twice: nsqd can hand it back before it sees CLS)
    assert (stats["in_flight_count"], stats["timeout_count"]) == (0, 0)
    assert stats["requeue_count"] >= 1


def test_replay_is_empty_and_readers_pickle_without_connections(
    nsqbox: NSQBox, topic: str, stream_reader: Callable[..., NSQStreamReader]
) -> None:
    mpub(nsqbox, topic, [b"a"])
    reader = stream_reader(pollTimeout="10s")
    reader.read({"messages": 0})
    copy = pickle.loads(pickle.dumps(reader))
    assert list(copy.readBetweenOffsets({"messages": 0}, {"messages": 1})) == []
    with pytest.raises(ValueError, match="not an offset"):
        reader.read({"offset": 1})


def test_batch_reader_drains_up_to_max_messages(nsqbox: NSQBox, topic: str) -> None:
    mpub(nsqbox, topic, [b"m%d" % i for i in range(30)])
    opts = {"nsqd": nsqbox.nsqd_tcp_address, "topic": topic, "channel": CHANNEL}
    reader = NSQBatchReader(parse_read_options({**opts, "maxMessages": "20"}))
    (partition,) = reader.partitions()
    assert isinstance(partition, NSQPartition)
    assert (partition.address, partition.max_messages) == (nsqbox.nsqd_tcp_address, 20)
    got = rows(reader.read(partition))
    assert [r["body"] for r in got] == [b"m%d" % i for i in range(20)]
    # the rest stays queued (or is handed back at once if nsqd had already sent it)
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["depth"] == 10, "the rest queued")
    assert channel_stats(nsqbox, topic, CHANNEL)["in_flight_count"] == 0

    rest = NSQBatchReader(parse_read_options({**opts, "idleTimeout": "200ms"}))
    (partition,) = rest.partitions()
    assert sorted(r["body"] for r in rows(rest.read(partition))) == sorted(
        b"m%d" % i for i in range(20, 30)
    )
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["depth"] == 0, "drained")


def test_batch_reader_hands_back_what_spark_did_not_take(nsqbox: NSQBox, topic: str) -> None:
    mpub(nsqbox, topic, [b"a", b"b", b"c"])
    opts = {"nsqd": nsqbox.nsqd_tcp_address, "topic": topic, "channel": CHANNEL}
    reader = NSQBatchReader(parse_read_options(opts))
    (partition,) = reader.partitions()
    chunks = reader.read(partition)
    next(chunks)
    chunks.close()  # a LIMIT: Spark stops asking
    wait_for(lambda: channel_stats(nsqbox, topic, CHANNEL)["depth"] == 3, "requeue")


def _dead_address() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"


def test_writer_batches_by_count_bytes_and_topic(nsqbox: NSQBox, topic: str) -> None:
    other = topic + "_b"
    opts = parse_write_options(
        # the first address refuses connections: the writer moves on to the next
        {
            "nsqd": f"{_dead_address()},{nsqbox.nsqd_tcp_address}",
            "batchSize": "3",
            "batchBytes": "8",
        }
    )
    bodies = [b"aaaa", b"b", b"c", b"d", b"eeeeeee", b"f"]
    result = publish(opts, [(topic, body) for body in bodies] + [(other, b"x")])
    assert result.messages == 7
    # by count: [aaaa b c]; by bytes (8): [d eeeeeee]; what is left: [f]; the other topic: [x]
    assert result.commands == 4
    with BlockingConsumer(nsqbox.nsqd_tcp_address, topic, CHANNEL) as consumer:
        got = []
        for message in consumer.messages(timeout=2.0):
            got.append(message.body)
            message.finish()
            if len(got) == len(bodies):
                break
    assert got == bodies


def test_lookupd_finds_the_nsqd_of_the_topic(nsqbox: NSQBox, topic: str) -> None:
    lookupd, nsqd = nsqbox.lookupd_http_address, nsqbox.nsqd_tcp_address
    assert lookupd is not None
    opts = {"lookupd": lookupd, "topic": topic, "channel": CHANNEL, "pollTimeout": "100ms"}
    # no nsqd has the topic yet: no data, no error
    empty = NSQStreamReader(parse_read_options(opts))
    try:
        result, end = empty.read({"messages": 0})
        assert (list(result), end) == ([], {"messages": 0})
    finally:
        empty.stop()

    nsqbox.publish(topic, [b"a", b"b"])  # returns once nsqlookupd knows the topic
    connection = parse_read_options(opts).connection
    assert discover_nsqd(connection, topic) == [nsqd]
    reader = NSQStreamReader(parse_read_options({**opts, "pollTimeout": "10s"}))
    try:
        got: list[dict[str, Any]] = []
        end = {"messages": 0}
        while len(got) < 2:
            batch, end = reader.read(end)
            got += rows(batch)
        assert sorted(r["body"] for r in got) == [b"a", b"b"]
        assert {r["nsqd_address"] for r in got} == {nsqd}
    finally:
        reader.stop()


def test_tls_and_compression_pass_through(tmp_path: Path, topic: str) -> None:
    trustme = pytest.importorskip("trustme")
    ca = trustme.CA()
    ca_file, server_file = tmp_path / "ca.pem", tmp_path / "server.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server_file))
    options = NSQDOptions(
        tcp_address="127.0.0.1:0",
        http_address="127.0.0.1:0",
        https_address="127.0.0.1:0",
        data_path=str(tmp_path),
        tls_cert=str(server_file),
        tls_key=str(server_file),
        tls_required=TLS_REQUIRED_EXCEPT_HTTP,  # nsqd refuses clients that do not upgrade
    )
    with ThreadedNSQD(options) as server:
        secure = {"nsqd": server.tcp_address, "tlsCaFile": str(ca_file)}
        sent = publish(parse_write_options({**secure, "compression": "snappy"}), [(topic, b"x")])
        assert sent.messages == 1
        reader = NSQStreamReader(
            parse_read_options(
                {**secure, "topic": topic, "channel": CHANNEL, "compression": "deflate"}
            )
        )
        try:
            batch, _ = reader.read({"messages": 0})
            assert [r["body"] for r in rows(batch)] == [b"x"]
            url = f"http://{server.http_address}/stats?format=json&topic={topic}"
            with urllib.request.urlopen(url, timeout=10) as response:
                (client,) = json.load(response)["topics"][0]["channels"][0]["clients"]
            assert (client["tls"], client["deflate"], client["snappy"]) == (True, True, False)
        finally:
            reader.stop()
        # without TLS nsqd refuses the reader
        plain = NSQStreamReader(
            parse_read_options({"nsqd": server.tcp_address, "topic": topic, "channel": CHANNEL})
        )
        with pytest.raises(NSQError, match="E_INVALID"):
            plain.read({"messages": 0})
