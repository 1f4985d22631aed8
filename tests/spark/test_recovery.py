"""Crash recovery: kill a streaming query between a read and its commit, restart it, lose nothing.

A subprocess runs the query (its own SparkSession, the source found by
auto-registration) and blocks inside micro-batch 2, after reading it and
before Spark commits it. At that moment nsqd's ``/stats`` must show exactly
the committed rows as finished and the rest in flight. The process group is
then killed (SIGKILL: no clean-up of any kind), and the query restarts from
its checkpoint in the test session: the uncommitted batch replays empty, its
messages come back from nsqd after the dead connection's ``msg_timeout``
(1 s), and every message ends up in the output. Duplicates are allowed.
"""

from __future__ import annotations

import functools
import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

pytest.importorskip("pyspark")

from nsqbox.testing import NSQBox

from .conftest import TIMEOUT, channel_stats, publish, read_line
from .query_process import STREAM_OPTIONS, write_batch
from .session import ROOT, needs_available_now, spark_env

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


CHANNEL = "spark"
BATCH = 50
N = 3 * BATCH


def batch_files(out: Path) -> dict[int, list[str]]:
    return {
        int(p.stem.removeprefix("batch-")): json.loads(p.read_text())
        for p in out.glob("batch-*.json")
    }


def committed_batches(checkpoint: Path) -> set[int]:
    """The batch ids in Spark's commit log."""
    return {int(p.name) for p in (checkpoint / "commits").iterdir() if p.name.isdigit()}


@needs_available_now
def test_killed_query_restarts_without_losing_messages(
    spark: SparkSession, nsqbox: NSQBox, topic: str, tmp_path: Path
) -> None:
    bodies = [f"crash-{i:03d}" for i in range(N)]
    publish(nsqbox, topic, [b.encode() for b in bodies])
    checkpoint, out = tmp_path / "checkpoint", tmp_path / "out"
    out.mkdir()
    log = tmp_path / "query.log"
    args = [nsqbox.nsqd_tcp_address, topic, CHANNEL, str(checkpoint), str(out), "2", str(BATCH)]
    with log.open("w") as stderr:
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.spark.query_process", *args],
            cwd=ROOT,
            env={**os.environ, **spark_env()},
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            start_new_session=True,  # its own process group: the JVM and workers die with it
        )
    try:
        assert proc.stdout is not None
        line = read_line(proc.stdout, TIMEOUT)
        assert line == "BLOCKED 2", log.read_text()[-3000:]
        # Batch 2 is read and written, not committed; batches 0 and 1 are committed.
        committed = committed_batches(checkpoint)
        assert committed == {0, 1}
        files = batch_files(out)
        committed_rows = sum(len(files[i]) for i in committed)
        stats = channel_stats(nsqbox, topic, CHANNEL)
        (client,) = stats["clients"]
        assert client["finish_count"] == committed_rows
        assert len(files[2]) >= 1
        assert stats["in_flight_count"] >= len(files[2])
        assert stats["in_flight_count"] + stats["depth"] + committed_rows == N
        held = stats["in_flight_count"]
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(TIMEOUT)
        if proc.stdout is not None:
            proc.stdout.close()

    restarted = (
        spark.readStream.format("nsq")
        .option("nsqd", nsqbox.nsqd_tcp_address)
        .option("topic", topic)
        .option("channel", CHANNEL)
        .option("maxMessagesPerBatch", BATCH)
        .options(**STREAM_OPTIONS)
        .load()
        .writeStream.foreachBatch(functools.partial(write_batch, out))
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert restarted.awaitTermination(TIMEOUT)
    assert restarted.exception() is None

    files = batch_files(out)
    assert files[2] == []  # the uncommitted batch replays empty: NSQ cannot replay
    seen = [body for rows in files.values() for body in rows]
    assert set(seen) == set(bodies)  # none lost (duplicates would be allowed)
    stats = channel_stats(nsqbox, topic, CHANNEL)
    assert stats["depth"] == stats["in_flight_count"] == 0
    # what the dead process held came back when its msg_timeout ran out
    assert stats["timeout_count"] >= held
