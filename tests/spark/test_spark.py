"""format("nsq") through a real SparkSession: streaming and batch reads and writes.

Every test shares the session-scoped ``spark`` fixture and the ``nsqbox`` nsqd;
each uses topics of its own. No test registers the source except
``test_register``: the others rely on Spark's auto-registration of
``pyspark_nsq.DefaultSource``.
"""

from __future__ import annotations

import pkgutil
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")

from nsqbox.client.blocking import BlockingConsumer
from nsqbox.testing import NSQBox

from .conftest import TIMEOUT, channel_stats, publish, read_available_into_memory
from .session import needs_available_now

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


CHANNEL = "spark"


def consume(nsqbox: NSQBox, topic: str, count: int) -> list[bytes]:
    """Read ``count`` messages back with the blocking client (FIN each)."""
    from nsqbox.client import Config

    got: list[bytes] = []
    with BlockingConsumer(
        nsqbox.nsqd_tcp_address, topic, "check", config=Config(max_in_flight=500)
    ) as consumer:
        for message in consumer.messages(timeout=10.0):
            got.append(message.body)
            message.finish()
            if len(got) == count:
                break
    return got


@needs_available_now
def test_stream_available_now_into_memory_sink(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    n = 3000
    bodies = [b"message-%05d" % i for i in range(n)]
    publish(nsqbox, topic, bodies)
    query, rows = read_available_into_memory(
        spark,
        nsqbox,
        topic,
        CHANNEL,
        tmp_path / "checkpoint",
        maxMessagesPerBatch=1000,
        pollTimeout="2s",
    )
    assert sorted(bytes(r.body) for r in rows) == bodies  # all of them, each once
    assert all(r.topic == topic and r.channel == CHANNEL and r.attempts == 1 for r in rows)
    assert {r.nsqd_address for r in rows} == {nsqbox.nsqd_tcp_address}
    assert len({r.id for r in rows}) == n
    assert sum(p["numInputRows"] for p in query.recentProgress) == n
    assert max(p["numInputRows"] for p in query.recentProgress) <= 1000
    # every batch was FINished before the run ended: nothing in flight, nothing requeued
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["depth"] == stats["in_flight_count"] == 0
    assert stats["requeue_count"] == stats["timeout_count"] == 0
    assert stats["message_count"] == n


def test_write_dataframe_and_consume_it_back(
    spark: SparkSession, nsqbox: NSQBox, topic: str
) -> None:
    other = topic + "_other"
    data = [(f"row-{i}", other if i % 4 == 0 else None) for i in range(1000)]
    df = spark.createDataFrame(data, "value STRING, topic STRING").repartition(3)
    (
        df.write.format("nsq")
        .option("nsqd", nsqbox.nsqd_tcp_address)
        .option("topic", topic)
        .option("batchSize", 100)
        .mode("append")
        .save()
    )
    expected = sorted(v.encode() for v, t in data if t is None)
    expected_other = sorted(v.encode() for v, t in data if t is not None)
    assert sorted(consume(nsqbox, topic, len(expected))) == expected
    assert sorted(consume(nsqbox, other, len(expected_other))) == expected_other


def test_overwrite_and_bad_columns_are_refused(
    spark: SparkSession, nsqbox: NSQBox, topic: str
) -> None:
    df = spark.createDataFrame([(1,)], "body INT")
    writer = df.write.format("nsq").option("nsqd", nsqbox.nsqd_tcp_address).option("topic", topic)
    with pytest.raises(Exception, match="must be binary or string"):
        writer.mode("append").save()
    ok = spark.createDataFrame([(b"x",)], "body BINARY")
    with pytest.raises(Exception, match="cannot be overwritten"):
        ok.write.format("nsq").option("nsqd", nsqbox.nsqd_tcp_address).option("topic", topic).mode(
            "overwrite"
        ).save()


def test_batch_read_drains(spark: SparkSession, nsqbox: NSQBox, topic: str) -> None:
    bodies = [b"b%d" % i for i in range(500)]
    publish(nsqbox, topic, bodies)
    reader = (
        spark.read.format("nsq")
        .option("nsqd", nsqbox.nsqd_tcp_address)
        .option("topic", topic)
        .option("channel", CHANNEL)
        .option("idleTimeout", "500ms")
    )
    first = reader.option("maxMessages", 200).load()
    assert [f.name for f in first.schema.fields] == [
        "id",
        "body",
        "timestamp",
        "attempts",
        "topic",
        "channel",
        "nsqd_address",
    ]
    taken = first.collect()
    assert len(taken) == 200
    rest = reader.option("maxMessages", 10_000).load().collect()  # option() sets, not copies
    assert sorted(bytes(r.body) for r in taken + rest) == sorted(bodies)
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["depth"] == stats["in_flight_count"] == 0


def test_stream_write_from_parquet(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    source = tmp_path / "parquet"
    data = [(f"p{i}".encode(),) for i in range(300)]
    spark.createDataFrame(data, "body BINARY").repartition(2).write.parquet(str(source))
    query = (
        spark.readStream.schema("body BINARY")
        .parquet(str(source))
        .writeStream.format("nsq")
        .option("nsqd", nsqbox.nsqd_tcp_address)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(TIMEOUT)
    assert query.exception() is None
    assert sorted(consume(nsqbox, topic, len(data))) == sorted(b for (b,) in data)


def test_register(spark: SparkSession, nsqbox: NSQBox, topic: str) -> None:
    from nsqbox.spark import register

    register(spark)  # replaces the auto-registered source with the same class
    publish(nsqbox, topic, [b"one"])
    df = (
        spark.read.format("nsq")
        .option("nsqd", nsqbox.nsqd_tcp_address)
        .option("topic", topic)
        .option("channel", CHANNEL)
        .option("idleTimeout", "300ms")
        .load()
    )
    assert [bytes(r.body) for r in df.collect()] == [b"one"]
    with pytest.raises(Exception, match="needs the options 'topic' and 'channel'"):
        spark.read.format("nsq").option("nsqd", nsqbox.nsqd_tcp_address).load().collect()


def test_auto_registration_module() -> None:
    from pyspark.sql.datasource import DataSource

    import pyspark_nsq
    from nsqbox.spark import NSQDataSource

    # what pyspark.sql.worker.lookup_data_sources looks for on the workers' path
    assert "pyspark_nsq" in {m.name for m in pkgutil.iter_modules()}
    assert issubclass(pyspark_nsq.DefaultSource, DataSource)
    assert pyspark_nsq.DefaultSource is NSQDataSource
    assert NSQDataSource.name() == "nsq"
