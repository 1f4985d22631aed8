"""The driver of the cluster test: a partitioned stream archived to Parquet, on a standalone master.

``python -m tests.spark.cluster_query CONFIG.json`` where the JSON holds
``master``, ``lookupd``, ``topic``, ``channel``, ``wal``, ``checkpoint``,
``out``, ``batch`` (maxMessagesPerBatch), ``block_at`` (a batch id or -1) and,
for the run that should end by itself, ``available_now`` and ``sink`` (nsqd
addresses and a topic that the sink check publishes to from the executors).

Every micro-batch goes to ``OUT/batch=<id>/`` (Parquet, replaced when a batch
is replayed: each directory holds the last attempt of its batch). The process
prints ``START <id>`` when a batch begins and ``DONE <id>`` once it is
written; in batch ``block_at`` it prints ``BLOCKED <id>`` after the write and
waits to be killed (the batch is read, staged and written, never committed).
"""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

#: The columns archived per message.
COLUMNS = ("id", "body", "attempts", "nsqd_address")


def cluster_session(master: str, app: str) -> SparkSession:
    """A driver on ``master``: two one-core executors of 512m, everything on 127.0.0.1."""
    from pyspark.sql import SparkSession

    from .session import ROOT

    jvm = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    spark = (
        SparkSession.builder.master(master)
        .appName(app)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.driver.extraJavaOptions", jvm)
        .config("spark.executor.memory", "512m")
        .config("spark.executor.cores", "1")
        .config("spark.cores.max", "2")
        .config("spark.executor.extraJavaOptions", jvm)
        .config("spark.executorEnv.PYTHONPATH", str(ROOT))
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.task.maxFailures", "4")
        .getOrCreate()
    )
    # WARN: the test reads the lost task of the Python worker it killed from the log
    spark.sparkContext.setLogLevel("WARN")
    return spark


def say(line: str) -> None:
    print(line, flush=True)


def main(config: dict[str, Any]) -> None:
    spark = cluster_session(config["master"], "nsqbox-cluster-test")
    out = Path(config["out"])
    block_at = int(config["block_at"])

    def sink(df: DataFrame, batch_id: int) -> None:
        say(f"START {batch_id}")
        df.select(*COLUMNS).write.mode("overwrite").parquet(str(out / f"batch={batch_id}"))
        say(f"DONE {batch_id}")
        if batch_id == block_at:
            say(f"BLOCKED {batch_id}")
            threading.Event().wait()  # until the test kills this process

    writer = (
        spark.readStream.format("nsq")
        .option("lookupd", config["lookupd"])
        .option("topic", config["topic"])
        .option("channel", config["channel"])
        .option("reader", "partitioned")
        .option("walPath", config["wal"])
        .option("maxMessagesPerBatch", config["batch"])
        .option("pollTimeout", "1s")
        .option("msgTimeout", "5s")
        .option("lookupdPollInterval", "1s")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", config["checkpoint"])
    )
    if config.get("available_now"):
        writer = writer.trigger(availableNow=True)
    query = writer.start()
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    sink_check = config.get("sink")
    if sink_check:
        # The writer on the executors: MPUB from two tasks, one per executor.
        spark.range(sink_check["count"], numPartitions=2).selectExpr(
            "CAST(id AS STRING) AS body"
        ).write.format("nsq").option("nsqd", sink_check["nsqd"]).option(
            "topic", sink_check["topic"]
        ).mode("append").save()
    say("FINISHED")
    spark.stop()


if __name__ == "__main__":
    main(json.loads(Path(sys.argv[1]).read_text()))
