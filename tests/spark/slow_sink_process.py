"""A streaming query with a slow sink, in a process of its own (for ``test_slow_sink.py``).

``python -m tests.spark.slow_sink_process LOOKUPD TOPIC CHANNEL CHECKPOINT OUT BATCH SLEEP``
reads ``TOPIC`` through lookupd with ``msgTimeout`` 6 s and an ``availableNow``
trigger into JSON files, one per micro-batch (``OUT/batch-<id>.json``); the
sink sleeps ``SLEEP`` seconds in each batch, longer than ``msgTimeout``. It
prints ``JAVA_HOME <value>`` (what the session's JVM runs on) and, once the run
is over, ``DONE``. The session is built by the test helper, which calls
:func:`nsqbox.spark.ensure_java` as any application should.
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from .query_process import write_batch
from .session import build_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The reader's msg_timeout; the sink takes longer than this in every batch.
MSG_TIMEOUT = "6s"


def main(argv: list[str]) -> None:
    lookupd, topic, channel, checkpoint, out_dir, batch, sleep = argv
    out = Path(out_dir)
    spark = build_session("nsqbox-slow-sink")
    print(f"JAVA_HOME {os.environ.get('JAVA_HOME', '')}", flush=True)

    def sink(df: DataFrame, batch_id: int) -> None:
        write_batch(out, df, batch_id)
        time.sleep(float(sleep))  # a slow sink: the batch outlives msg_timeout

    query = (
        spark.readStream.format("nsq")
        .option("lookupd", lookupd)
        .option("topic", topic)
        .option("channel", channel)
        .option("maxMessagesPerBatch", batch)
        .option("msgTimeout", MSG_TIMEOUT)
        .option("pollTimeout", "2s")
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .trigger(availableNow=True)
        .start()
    )
    query.awaitTermination()
    if query.exception() is not None:
        raise SystemExit(f"query failed: {query.exception()}")
    spark.stop()
    print("DONE", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
