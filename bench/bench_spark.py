"""Throughput of the PySpark connector, source and sink, in rows per second.

    python bench/bench_spark.py [--count 200000] [--size 100] [--batch 20000]

Starts an nsqd on 127.0.0.1 (or uses ``--nsqd``) and a ``local[2]`` Spark
session, then measures, each on a fresh topic:

- batch sink: ``spark.range(N)`` as ``--size``-byte bodies, ``df.write.format("nsq")``;
- streaming source: ``readStream.format("nsq")`` with ``availableNow`` into the
  ``noop`` sink, ``--batch`` messages per micro-batch, every batch FINished;
- batch source: ``spark.read.format("nsq")`` draining the topic;
- streaming sink: a Parquet directory through ``writeStream.format("nsq")``.

Each figure is N divided by the wall time of the whole Spark action (planning
and task start-up included). The streaming source also reports its steady
rate: rows over the time Spark spent in batches that had rows (no start-up,
no final idle poll). Needs ``pip install 'nsqbox[spark]'`` and Java 17.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from nsqbox.testing import ThreadedNSQD


def session(cores: int) -> Any:
    """A local SparkSession on this interpreter, loopback only, UI off."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    root = str(Path(__file__).resolve().parents[1])  # pyspark_nsq for auto-registration
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master(f"local[{cores}]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(cores))
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "2g")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def timed(label: str, rows: int, action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    elapsed = time.perf_counter() - start
    print(f"{label:<34} {rows:>9,} rows {elapsed:8.2f} s {rows / elapsed:>12,.0f} rows/s")
    return elapsed


def channel_depth(nsqd_http: str | None, topic: str, channel: str) -> str:
    if nsqd_http is None:
        return ""
    import json
    import urllib.request

    url = f"http://{nsqd_http}/stats?format=json&topic={topic}&channel={channel}"
    with urllib.request.urlopen(url, timeout=10) as response:
        stats = json.load(response)
    for entry in stats["topics"]:
        for chan in entry["channels"]:
            if entry["topic_name"] == topic and chan["channel_name"] == channel:
                return f"(depth {chan['depth']}, in flight {chan['in_flight_count']})"
    return ""


def bench(spark: Any, nsqd: str, nsqd_http: str | None, args: argparse.Namespace) -> None:
    from pyspark.sql import functions as F

    n, size, batch = args.count, args.size, args.batch
    work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
    padding = "x" * max(0, size - 12)

    def bodies(count: int) -> Any:
        return spark.range(count, numPartitions=args.partitions).select(
            F.concat(F.lpad(F.col("id").cast("string"), 12, "0"), F.lit(padding)).alias("value")
        )

    # -- batch sink ---------------------------------------------------------------------
    topic = f"bench_{uuid.uuid4().hex[:8]}"
    for channel in ("stream", "drain"):  # both get every message
        spark.read.format("nsq").option("nsqd", nsqd).option("topic", topic).option(
            "channel", channel
        ).option("maxMessages", 1).option("idleTimeout", "10ms").load().collect()
    df = bodies(n).cache()
    df.count()
    timed(
        "batch sink (df.write)",
        n,
        lambda: (
            df.write.format("nsq")
            .option("nsqd", nsqd)
            .option("topic", topic)
            .option("batchSize", args.mpub)
            .mode("append")
            .save()
        ),
    )

    # -- streaming source ---------------------------------------------------------------
    query: Any = None

    def stream() -> None:
        nonlocal query
        query = (
            spark.readStream.format("nsq")
            .option("nsqd", nsqd)
            .option("topic", topic)
            .option("channel", "stream")
            .option("maxMessagesPerBatch", batch)
            .option("pollTimeout", "500ms")
            .load()
            .writeStream.format("noop")
            .option("checkpointLocation", str(work / "checkpoint"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()

    timed("streaming source (availableNow)", n, stream)
    busy = [p for p in query.recentProgress if p["numInputRows"]]
    rows = sum(p["numInputRows"] for p in busy)
    seconds = sum(p["durationMs"]["triggerExecution"] for p in busy) / 1000
    print(
        f"{'  steady, in batches with rows':<34} {rows:>9,} rows {seconds:8.2f} s "
        f"{rows / seconds:>12,.0f} rows/s  ({len(busy)} batches)"
    )
    print(f"  after the stream: {channel_depth(nsqd_http, topic, 'stream')}")

    # -- batch source -------------------------------------------------------------------
    timed(
        "batch source (spark.read drain)",
        n,
        lambda: (
            spark.read.format("nsq")
            .option("nsqd", nsqd)
            .option("topic", topic)
            .option("channel", "drain")
            .option("maxMessages", n)
            .option("idleTimeout", "500ms")
            .load()
            .write.format("noop")
            .mode("overwrite")
            .save()
        ),
    )
    print(f"  after the drain: {channel_depth(nsqd_http, topic, 'drain')}")

    # -- streaming sink -----------------------------------------------------------------
    source = work / "parquet"
    bodies(n).write.parquet(str(source))
    sink_topic = f"bench_{uuid.uuid4().hex[:8]}"

    def stream_sink() -> None:
        (
            spark.readStream.schema("value STRING")
            .parquet(str(source))
            .writeStream.format("nsq")
            .option("nsqd", nsqd)
            .option("topic", sink_topic)
            .option("batchSize", args.mpub)
            .option("checkpointLocation", str(work / "sink-checkpoint"))
            .trigger(availableNow=True)
            .start()
            .awaitTermination()
        )

    timed("streaming sink (writeStream)", n, stream_sink)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nsqd", help="an nsqd TCP address (default: start one here)")
    parser.add_argument("--count", type=int, default=200_000, help="rows per measurement")
    parser.add_argument("--size", type=int, default=100, help="body size in bytes")
    parser.add_argument("--batch", type=int, default=20_000, help="maxMessagesPerBatch")
    parser.add_argument("--mpub", type=int, default=500, help="messages per MPUB (batchSize)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the sink input")
    parser.add_argument("--cores", type=int, default=2, help="local[N]")
    args = parser.parse_args()
    spark = session(args.cores)
    print(f"pyspark {spark.version}, local[{args.cores}], {args.size}-byte bodies")
    try:
        if args.nsqd:
            bench(spark, args.nsqd, None, args)
        else:
            with ThreadedNSQD() as box:
                bench(spark, box.tcp_address, box.http_address, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
