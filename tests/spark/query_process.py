"""A streaming query in a process of its own, for the crash-recovery test.

``python -m tests.spark.query_process NSQD TOPIC CHANNEL CHECKPOINT OUT BLOCK_AT BATCH``
streams ``TOPIC`` into JSON files, one per micro-batch (``OUT/batch-<id>.json``),
and blocks forever inside batch ``BLOCK_AT`` after writing its file (printing
``BLOCKED <id>``): that batch has been read but never reaches Spark's commit
log, and the test kills the process there. The source is found through
Spark's auto-registration: this process never calls ``register()``.
"""

from __future__ import annotations

import json
import os
import sys
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from .session import build_session

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

#: The options of both runs: a short msg_timeout, so the killed run's messages come
#: back within a second of its death (TOUCH keeps them in flight while it lives).
STREAM_OPTIONS = {"msgTimeout": "1s", "pollTimeout": "3s"}


def write_batch(out: Path, df: DataFrame, batch_id: int) -> None:
    """The sink: the batch's bodies as one JSON file, replaced atomically (idempotent)."""
    bodies = [row.body.decode() for row in df.select("body").collect()]
    tmp = out / f".batch-{batch_id}.json"
    tmp.write_text(json.dumps(bodies))
    os.replace(tmp, out / f"batch-{batch_id}.json")


def main(argv: list[str]) -> None:
    nsqd, topic, channel, checkpoint, out_dir, block_at, batch = argv
    out = Path(out_dir)
    spark = build_session("nsqbox-crash-test")

    def sink(df: DataFrame, batch_id: int) -> None:
        write_batch(out, df, batch_id)
        if batch_id == int(block_at):
            print(f"BLOCKED {batch_id}", flush=True)
            threading.Event().wait()  # until the test kills this process

    query = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqd)
        .option("topic", topic)
        .option("channel", channel)
        .option("maxMessagesPerBatch", batch)
        .options(**STREAM_OPTIONS)
        .load()
        .writeStream.foreachBatch(sink)
        .option("checkpointLocation", checkpoint)
        .start()
    )
    query.awaitTermination()


if __name__ == "__main__":
    main(sys.argv[1:])
