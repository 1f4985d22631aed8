"""The partitioned stream reader: staged in the write-ahead log, then FINished; replays re-read.

The reader's methods are called here as Spark calls them (``latestOffset`` and
``partitions`` on the driver side, ``read`` in a task), against a real nsqd,
and once through a ``local[2]`` SparkSession. The cluster test
(``test_cluster.py``) runs it on executors of a standalone cluster.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from .session import pyspark_version

pytest.importorskip("pyspark")
if pyspark_version() < (4, 2):
    pytest.skip("the partitioned reader needs pyspark >= 4.2", allow_module_level=True)

from pyspark.sql.streaming.datasource import ReadAllAvailable

from nsqbox.spark.options import parse_read_options
from nsqbox.spark.partitioned import NSQPartitionedStreamReader, SegmentPartition, pull_segment
from nsqbox.spark.wal import WriteAheadLog
from nsqbox.testing import NSQBox, NSQBoxFactory

from .conftest import channel_stats, create_channel, publish, read_available_into_memory

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


CHANNEL = "spark"


def reader(nsqd: str, topic: str, wal: Path, **extra: str) -> NSQPartitionedStreamReader:
    options = {
        "nsqd": nsqd,
        "topic": topic,
        "channel": CHANNEL,
        "reader": "partitioned",
        "walPath": str(wal),
        "pollTimeout": "300ms",
        **extra,
    }
    return NSQPartitionedStreamReader(parse_read_options(options))


def ids(source: NSQPartitionedStreamReader, partition: SegmentPartition) -> list[str]:
    return [i for b in source.read(partition) for i in b.column(0).to_pylist()]


def test_a_batch_is_staged_before_it_is_finished_and_replays_from_the_log(
    nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    publish(nsqbox, topic, [b"m%03d" % i for i in range(100)])
    source = reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal", maxMessagesPerBatch="60")
    start = source.initialOffset()
    assert start == {"seq": 0, "slots": []}
    end = source.latestOffset(start, ReadAllAvailable())
    slot = f"{nsqbox.nsqd_tcp_address}/0"
    assert end == {"seq": 1, "slots": [slot], "quota": 60}
    (partition,) = source.partitions(start, end)
    assert isinstance(partition, SegmentPartition)

    first = ids(source, partition)
    assert len(first) == len(set(first)) == 60
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert (stats["depth"], stats["in_flight_count"]) == (40, 0)  # staged, then FINished
    assert WriteAheadLog(tmp_path / "wal").sequences() == [1]

    # The task runs again (a retry, a restarted query): the same rows, from the log.
    again = reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal")
    assert ids(again, again.partitions(start, end)[0]) == first
    assert channel_stats(nsqbox, topic, CHANNEL)["depth"] == 40  # nothing pulled

    # The next batch takes the rest; Spark's commit of the first removes its segment.
    following = source.latestOffset(end, ReadAllAvailable())
    assert following["seq"] == 2
    rest = [i for p in source.partitions(end, following) for i in ids(source, p)]
    assert len(rest) == 40
    assert not set(rest) & set(first)
    source.commit(end)
    assert WriteAheadLog(tmp_path / "wal").sequences() == [2]
    # a query started afresh on the same log begins after what is in it
    assert reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal").initialOffset()["seq"] == 2


def test_the_losing_attempt_hands_its_messages_back(
    nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    publish(nsqbox, topic, [b"r%02d" % i for i in range(20)])
    source = reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal")
    partition = SegmentPartition(7, f"{nsqbox.nsqd_tcp_address}/0", quota=10)
    winner = pull_segment(source.options, partition)
    assert winner.batch.num_rows == 10
    # A speculative copy of the same task pulls the other ten, loses the race to stage,
    # returns the winner's rows and requeues its own.
    loser = pull_segment(source.options, partition)
    assert loser.batch.column(0).to_pylist() == winner.batch.column(0).to_pylist()
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert (stats["depth"], stats["in_flight_count"], stats["requeue_count"]) == (10, 0, 10)


def test_an_unreachable_node_stages_an_empty_segment(
    nsqbox: NSQBox, topic: str, tmp_path: Path, free_tcp_port: int
) -> None:
    gone = f"127.0.0.1:{free_tcp_port}"
    source = reader(gone, topic, tmp_path / "wal", dialTimeout="1s")
    partition = SegmentPartition(1, f"{gone}/0", quota=10)
    assert ids(source, partition) == []
    staged = WriteAheadLog(tmp_path / "wal").read(1, f"{gone}/0")
    assert staged is not None
    assert staged.batch.num_rows == 0


def test_partitioned_stream_in_spark_reads_every_message_once(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    n = 3000
    bodies = [b"p%05d" % i for i in range(n)]
    create_channel(nsqbox, topic, CHANNEL)
    publish(nsqbox, topic, bodies)
    query, rows = read_available_into_memory(
        spark,
        nsqbox,
        topic,
        CHANNEL,
        tmp_path / "checkpoint",
        reader="partitioned",
        walPath=str(tmp_path / "wal"),
        partitionsPerNode=2,
        maxMessagesPerBatch=1000,
        pollTimeout="500ms",
    )
    assert sorted(bytes(r.body) for r in rows) == bodies  # all of them, each once
    assert max(p["numInputRows"] for p in query.recentProgress) <= 1000
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["depth"] == stats["in_flight_count"] == 0
    assert stats["requeue_count"] == stats["timeout_count"] == 0
    # committed batches are trimmed: only the last (empty) batch's sequence remains
    assert len(WriteAheadLog(tmp_path / "wal").sequences()) <= 1


def test_a_straggler_of_a_committed_batch_pulls_nothing(
    nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    publish(nsqbox, topic, [b"s%02d" % i for i in range(10)])
    source = reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal")
    source.commit({"seq": 3, "slots": []})
    # a speculative copy of a task of batch 3 that Spark has not stopped yet
    late = SegmentPartition(3, f"{nsqbox.nsqd_tcp_address}/0", quota=10)
    assert ids(source, late) == []
    assert WriteAheadLog(tmp_path / "wal").sequences() == []
    assert source.initialOffset()["seq"] == 3
    # the messages were never taken: the next batch gets them
    following = SegmentPartition(4, f"{nsqbox.nsqd_tcp_address}/0", quota=10)
    assert len(ids(source, following)) == 10


def test_available_now_stops_at_messages_published_after_it_began(
    nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    create_channel(nsqbox, topic, CHANNEL)
    publish(nsqbox, topic, [b"old-%d" % i for i in range(5)])
    source = reader(nsqbox.nsqd_tcp_address, topic, tmp_path / "wal")
    source.prepareForTriggerAvailableNow()
    publish(nsqbox, topic, [b"new-%d" % i for i in range(5)])
    start = source.initialOffset()
    end = source.latestOffset(start, ReadAllAvailable())
    assert end["seq"] == 1
    assert end["cutoff"] > 0
    (partition,) = source.partitions(start, end)
    rows = [bytes(b) for batch in source.read(partition) for b in batch.column(1).to_pylist()]
    assert sorted(rows) == [b"old-%d" % i for i in range(5)]
    # the newer ones went back to nsqd at once, and the run is over
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert (stats["depth"], stats["in_flight_count"]) == (5, 0)
    assert source.latestOffset(end, ReadAllAvailable()) == end


def test_partitions_follow_the_nodes_lookupd_knows(
    nsqbox_factory: NSQBoxFactory, topic: str, tmp_path: Path
) -> None:
    box = nsqbox_factory(nsqd=2, lookupd=1)
    first, second = (str(a) for a in box.nsqd_tcp_addresses)
    options = {
        "lookupd": str(box.lookupd_http_address),
        "topic": topic,
        "channel": CHANNEL,
        "reader": "partitioned",
        "walPath": str(tmp_path / "wal"),
        "partitionsPerNode": "2",
        "lookupdPollInterval": "1ms",
    }
    source = NSQPartitionedStreamReader(parse_read_options(options))
    start = source.initialOffset()
    assert source.latestOffset(start, ReadAllAvailable()) == start  # no node has the topic
    box.publish(topic, [b"a"], node=0)
    end = source.latestOffset(start, ReadAllAvailable())
    assert end["slots"] == [f"{first}/0", f"{first}/1"]
    box.publish(topic, [b"b"], node=1)
    later = source.latestOffset(end, ReadAllAvailable())
    assert later["slots"] == sorted([f"{first}/0", f"{first}/1", f"{second}/0", f"{second}/1"])
    assert later["quota"] == 1000 // 4
    parts = source.partitions(end, later)
    assert [(p.seq, p.address) for p in parts] == [
        (2, a.rpartition("/")[0]) for a in later["slots"]
    ]
