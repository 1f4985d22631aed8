"""A clean stop hands every uncommitted message back to nsqd at once, none left to time out.

The simple reader keeps RDY open between micro-batches, so when the query stops
it holds a batch Spark has not committed, messages in its buffer, and messages
nsqd has sent that are still in the socket (in flight on nsqd all the same).
All of them must be REQ'd before the connection closes: real nsqd leaves the
in-flight messages of a client that went away in flight until ``msg_timeout``.
The reader is driven directly, the way Spark calls it, in this process
(``stop()``) and in a child process ended as Spark ends it (SIGTERM). nsqd's
``/stats`` is the judge, read well within ``msgTimeout`` (2 minutes; every wait
is bounded at 30 s) so a timeout cannot pass for a requeue.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from subprocess import PIPE, Popen
from typing import Any

import pytest

pytest.importorskip("pyspark")

from nsqbox.spark.options import parse_read_options
from nsqbox.spark.stream_reader import NSQStreamReader
from nsqbox.testing import NSQBox, NSQBoxFactory

from .test_inflight import CHANNEL, WAIT, channels, wait_for

TOTAL, BATCH = 4000, 1000

#: What a process reads as Spark's source process does (the second batch uncommitted).
READ = """
import json, sys
from nsqbox.spark.options import parse_read_options
from nsqbox.spark.stream_reader import NSQStreamReader
stream = NSQStreamReader(parse_read_options(json.loads(sys.argv[1])))
rows, end = stream.read({"messages": 0})
taken = sum(b.num_rows for b in rows)
stream.commit(end)
second, _ = stream.read(end)
print(taken, sum(b.num_rows for b in second), flush=True)
"""

#: A process that reads as Spark's source process does, then waits for its next call.
CHILD = READ + "sys.stdin.read()\n"

#: CHILD whose exit-time close first says "closing" and waits for a line on stdin, so a
#: second SIGTERM can be sent while it runs (as Spark's second one often arrives).
CHILD_PAUSED_CLOSE = (
    """
import sys
from nsqbox.spark import stream_reader
close = stream_reader._Session.close
def paused_close(session):
    print("closing", flush=True)
    sys.stdin.readline()
    close(session)
stream_reader._Session.close = paused_close
"""
    + READ
    + "import signal\nsignal.pause()\n"
)


def backlog(box: NSQBox) -> dict[str, str]:
    """A topic of TOTAL messages on the box's nsqd, and the reader's options for it."""
    topic = f"close_{uuid.uuid4().hex[:12]}"
    # 4 KiB bodies: much of what nsqd sends for the next batch is still in the socket
    box.publish(topic, [b"%05d-" % i + b"x" * 4096 for i in range(TOTAL)])
    return {
        "nsqd": ",".join(str(a) for a in box.nsqd_tcp_addresses),
        "nsqdHttp": ",".join(str(a) for a in box.nsqd_http_addresses),
        "topic": topic,
        "channel": CHANNEL,
        "maxMessagesPerBatch": str(BATCH),
        "msgTimeout": "2m",
        "pollTimeout": "10s",
    }


def stats(box: NSQBox, topic: str) -> dict[str, Any]:
    (chan,) = channels(box, topic)
    return {k: chan[k] for k in ("depth", "in_flight_count", "timeout_count", "requeue_count")}


def assert_all_handed_back(box: NSQBox, topic: str) -> None:
    """The first batch FINished; the second (uncommitted) and the prefetched one REQ'd."""
    wait_for(lambda: stats(box, topic)["in_flight_count"] == 0, "every held message requeued")
    assert stats(box, topic) == {
        "depth": TOTAL - BATCH,
        "in_flight_count": 0,
        "timeout_count": 0,
        "requeue_count": 2 * BATCH,
    }
    (chan,) = channels(box, topic)
    assert chan["clients"] == []  # the connections are closed


def wait_for_the_budget(box: NSQBox, topic: str) -> None:
    """nsqd refills the reader's budget: the second batch and the next one in flight."""
    wait_for(lambda: stats(box, topic)["in_flight_count"] == 2 * BATCH, "the budget")


@contextmanager
def source_process(box: NSQBox, code: str, options: dict[str, str]) -> Iterator[Popen[str]]:
    """``code`` (CHILD or CHILD_PAUSED_CLOSE) run as Spark runs its source process, once
    it has read two batches and holds its budget; killed if still running at the end."""
    # Spark marks the Python workers it starts so; the reader handles SIGTERM only there
    env = {**os.environ, "SPARK_PYTHON_RUNTIME": "PYTHON_WORKER"}
    command = [sys.executable, "-c", code, json.dumps(options)]
    with Popen(command, stdin=PIPE, stdout=PIPE, env=env, text=True) as child:
        try:
            assert child.stdout is not None
            assert child.stdout.readline().split() == [str(BATCH), str(BATCH)]
            wait_for_the_budget(box, options["topic"])
            yield child
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()


def test_stop_requeues_the_uncommitted_batch_the_buffer_and_the_socket(
    nsqbox_factory: NSQBoxFactory,
) -> None:
    box = nsqbox_factory(nsqd=1)
    options = backlog(box)
    topic = options["topic"]
    stream = NSQStreamReader(parse_read_options(options))
    try:
        rows, end = stream.read({"messages": 0})
        assert sum(b.num_rows for b in rows) == BATCH  # Spark takes the rows
        stream.commit(end)  # FIN the first batch
        second, _ = stream.read(end)  # planned, taken, never committed
        assert sum(b.num_rows for b in second) == BATCH
        wait_for_the_budget(box, topic)
    finally:
        stream.stop()
    assert_all_handed_back(box, topic)


def test_sigterm_as_spark_stops_the_source_process_requeues_everything_held(
    nsqbox_factory: NSQBoxFactory,
) -> None:
    box = nsqbox_factory(nsqd=1)
    options = backlog(box)
    with source_process(box, CHILD, options) as child:
        child.send_signal(signal.SIGTERM)  # what Spark's stopWorker does
        child.wait(WAIT)
    assert child.returncode == 128 + signal.SIGTERM
    assert_all_handed_back(box, options["topic"])


def test_a_second_sigterm_during_the_close_does_not_cut_it_short(
    nsqbox_factory: NSQBoxFactory,
) -> None:
    """Spark's source runner stop sends SIGTERM twice: stopWorker destroys the process,
    then the worker factory's stop destroys it again while it still runs. The second
    must not end the close (before it REQs anything, when it lands early)."""
    box = nsqbox_factory(nsqd=1)
    options = backlog(box)
    with source_process(box, CHILD_PAUSED_CLOSE, options) as child:
        assert child.stdout is not None
        assert child.stdin is not None
        child.send_signal(signal.SIGTERM)  # stopWorker
        assert child.stdout.readline() == "closing\n"
        child.send_signal(signal.SIGTERM)  # the factory's stop, during the close
        child.stdin.write("go on\n")
        child.stdin.flush()
        child.wait(WAIT)
    assert child.returncode == 128 + signal.SIGTERM
    assert_all_handed_back(box, options["topic"])
