"""Throughput of the PySpark connector, source and sink, in rows per second.

    python bench/bench_spark.py [--count 200000] [--size 100] [--batch 20000]
    python bench/bench_spark.py --readers [--nodes 1,2]

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
no final idle poll), and the same after the first batch (which also starts
the Python workers).

``--readers`` compares the two streaming readers instead: the simple one and
the partitioned one (``reader=partitioned``, ``partitionsPerNode`` so that
every core has a partition), each reading ``--count`` messages spread over 1
and 2 nsqd nodes (``--nodes``), every node an nsqbox nsqd in a process of its
own. Needs ``pip install 'nsqbox[spark]'`` and Java 17.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
import urllib.request
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

    n, size = args.count, args.size
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
    stream_source("streaming source (availableNow)", spark, nsqd, topic, "stream", work, args)
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


def stream_source(
    label: str,
    spark: Any,
    nsqd: str,
    topic: str,
    channel: str,
    work: Path,
    args: argparse.Namespace,
    **extra: Any,
) -> None:
    """Time reading ``args.count`` messages of ``topic`` with availableNow into the noop sink."""
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd)
        .option("topic", topic)
        .option("channel", channel)
        .option("maxMessagesPerBatch", args.batch)
        .option("pollTimeout", "500ms")
    )
    for key, value in extra.items():
        reader = reader.option(key, value)
    query = (
        reader.load()
        .writeStream.format("noop")
        .option("checkpointLocation", str(work / f"checkpoint-{channel}"))
        .trigger(availableNow=True)
    )
    started = query.start
    finished: list[Any] = []
    timed(label, args.count, lambda: finished.append(started()) or finished[0].awaitTermination())
    progress = finished[0].recentProgress
    busy = [p for p in progress if p["numInputRows"]]
    if not busy:
        print(f"  no batch with rows in {len(progress)} progress reports")
        return
    for label, batches in (("in batches with rows", busy), ("the same after the first", busy[1:])):
        if not batches:
            continue
        rows = sum(p["numInputRows"] for p in batches)
        seconds = sum(p["durationMs"]["triggerExecution"] for p in batches) / 1000
        print(
            f"  {label:<32} {rows:>9,} rows {seconds:8.2f} s "
            f"{rows / seconds:>12,.0f} rows/s  ({len(batches)} batches)"
        )


class RealNodes:
    """``count`` nsqd processes of NSQ's own ``nsqd`` binary on 127.0.0.1."""

    def __init__(self, binary: str, count: int, work: Path) -> None:
        import socket
        import subprocess

        def port() -> int:
            with socket.socket() as sock:
                sock.bind(("127.0.0.1", 0))
                return int(sock.getsockname()[1])

        self.nsqd_tcp_addresses: list[str] = []
        self.nsqd_http_addresses: list[str] = []
        self._procs = []
        for index in range(count):
            tcp, http = f"127.0.0.1:{port()}", f"127.0.0.1:{port()}"
            data = work / f"nsqd{index}"
            data.mkdir(parents=True)
            self._procs.append(
                subprocess.Popen(
                    [
                        binary,
                        f"--tcp-address={tcp}",
                        f"--http-address={http}",
                        f"--data-path={data}",
                        "--mem-queue-size=10000000",
                        "--log-level=warn",
                    ],
                )
            )
            self.nsqd_tcp_addresses.append(tcp)
            self.nsqd_http_addresses.append(http)
        for http in self.nsqd_http_addresses:
            for _ in range(200):
                try:
                    urllib.request.urlopen(f"http://{http}/ping", timeout=1).close()
                    break
                except OSError:
                    time.sleep(0.05)

    def stop(self) -> None:
        for proc in self._procs:
            proc.kill()
            proc.wait()


def compare_readers(spark: Any, args: argparse.Namespace) -> None:
    """The simple and the partitioned streaming reader over 1 and 2 nsqd processes."""
    from nsqbox.client.blocking import Publisher
    from nsqbox.testing.boxes import start_box
    from nsqbox.testing.config import ClusterSpec, Mode

    body = b"x" * args.size
    for nodes in (int(n) for n in args.nodes.split(",")):
        work = Path(tempfile.mkdtemp(prefix="bench-spark-"))
        box: Any
        if args.real:
            box = RealNodes(args.real, nodes, work / "data")
        else:
            box = start_box(
                ClusterSpec(
                    nsqd=nodes, lookupd=0, nsqd_options={"mem_queue_size": 10 * args.count}
                ),
                str(work / "data"),
                mode=Mode.SUBPROCESS,
            )
        try:
            addresses = [str(a) for a in box.nsqd_tcp_addresses]
            share = args.count // nodes
            topic = f"bench_{uuid.uuid4().hex[:8]}"
            for http in box.nsqd_http_addresses:  # both channels get every message
                for path in (
                    f"topic/create?topic={topic}",
                    *(
                        f"channel/create?topic={topic}&channel={c}"
                        for c in ("simple", "partitioned")
                    ),
                ):
                    request = urllib.request.Request(f"http://{http}/{path}", method="POST")
                    urllib.request.urlopen(request, timeout=10).close()
            for address in addresses:
                with Publisher(address) as publisher:
                    for i in range(0, share, 500):
                        publisher.mpub(topic, [body] * min(500, share - i))
            nsqd = ",".join(addresses)
            per_node = max(1, args.cores // nodes)
            stream_source(f"simple, {nodes} nsqd", spark, nsqd, topic, "simple", work, args)
            stream_source(
                f"partitioned, {nodes} nsqd x {per_node} partitions",
                spark,
                nsqd,
                topic,
                "partitioned",
                work,
                args,
                reader="partitioned",
                walPath=str(work / "wal"),
                partitionsPerNode=per_node,
            )
        finally:
            box.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--nsqd", help="an nsqd TCP address (default: start one here)")
    parser.add_argument("--count", type=int, default=200_000, help="rows per measurement")
    parser.add_argument("--size", type=int, default=100, help="body size in bytes")
    parser.add_argument("--batch", type=int, default=20_000, help="maxMessagesPerBatch")
    parser.add_argument("--mpub", type=int, default=500, help="messages per MPUB (batchSize)")
    parser.add_argument("--partitions", type=int, default=2, help="partitions of the sink input")
    parser.add_argument("--cores", type=int, default=2, help="local[N]")
    parser.add_argument(
        "--readers", action="store_true", help="compare the simple and the partitioned reader"
    )
    parser.add_argument("--nodes", default="1,2", help="--readers: nsqd node counts to try")
    parser.add_argument("--real", metavar="NSQD", help="--readers: run this nsqd binary instead")
    args = parser.parse_args()
    spark = session(args.cores)
    print(f"pyspark {spark.version}, local[{args.cores}], {args.size}-byte bodies")
    try:
        if args.readers:
            compare_readers(spark, args)
        elif args.nsqd:
            bench(spark, args.nsqd, None, args)
        else:
            with ThreadedNSQD() as box:
                bench(spark, box.tcp_address, box.http_address, args)
    finally:
        spark.stop()


if __name__ == "__main__":
    main()
