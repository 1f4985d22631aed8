"""Fixtures for the PySpark connector tests: one SparkSession for the whole session.

The nsqd is the one of nsqbox's pytest plugin (the ``nsqbox`` fixture: servers
for the session, every topic deleted after each test). The SparkSession
(``local[2]``, UI off, every socket on 127.0.0.1, Python workers on this
interpreter) takes seconds to start, so every Spark test shares it. The
repository root goes on the workers' ``PYTHONPATH`` so that Spark's
auto-registration finds ``pyspark_nsq`` even in an editable install; no test
calls ``register()`` except the one that tests it.

pyspark is optional: these fixtures import it lazily, and the test modules
that need it start with ``pytest.importorskip("pyspark")``.
"""

from __future__ import annotations

import json
import queue
import threading
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from nsqbox.client.blocking import Publisher
from nsqbox.testing import NSQBox

from .session import build_session, spark_env

if TYPE_CHECKING:
    from pyspark.sql import Row, SparkSession
    from pyspark.sql.streaming import StreamingQuery

#: Bound on every wait (a query, a subprocess line); only reached when something is broken.
TIMEOUT = 120.0

#: Spark gives a Python worker a fixed 10 s to connect back to the JVM (PythonWorkerFactory's
#: accept timeout, which no setting changes). On a machine loaded past that (the suite beside
#: ``stress-ng`` and other jobs) a query can fail this way before it has read anything; such a
#: test runs once more, and only for this error.
SLOW_PYTHON_WORKER = "Python worker failed to connect back"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if item.path.is_relative_to(here):
            item.add_marker(pytest.mark.flaky(reruns=1, only_rerun=[SLOW_PYTHON_WORKER]))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The one SparkSession of the test session."""
    pytest.importorskip("pyspark")
    with pytest.MonkeyPatch.context() as patch:
        for key, value in spark_env().items():
            patch.setenv(key, value)
        session = build_session("nsqbox-tests")
        try:
            yield session
        finally:
            for query in session.streams.active:
                query.stop()
            session.stop()


@pytest.fixture
def topic() -> str:
    """A fresh topic name."""
    return f"spark_{uuid.uuid4().hex[:12]}"


def publish(box: NSQBox, topic: str, bodies: list[bytes], chunk: int = 500) -> None:
    """MPUB ``bodies`` to ``topic`` in chunks, over TCP as an app would."""
    with Publisher(box.nsqd_tcp_address) as publisher:
        for i in range(0, len(bodies), chunk):
            publisher.mpub(topic, bodies[i : i + chunk])


def channel_stats(box: NSQBox, topic: str, channel: str) -> dict[str, Any]:
    """The channel's entry in nsqd's ``/stats?format=json`` (with its clients' counts)."""
    url = f"http://{box.nsqd_http_address}/stats?format=json&topic={topic}&channel={channel}"
    with urllib.request.urlopen(url, timeout=10) as response:
        stats = json.load(response)
    for entry in stats["topics"]:
        if entry["topic_name"] == topic:
            for chan in entry["channels"]:
                if chan["channel_name"] == channel:
                    return dict(chan)
    raise LookupError(f"no channel {topic}/{channel} in /stats")


def read_available_into_memory(
    spark: SparkSession, box: NSQBox, topic: str, channel: str, checkpoint: Path, **options: object
) -> tuple[StreamingQuery, list[Row]]:
    """Stream ``topic`` through ``channel`` with the nsq source (``options`` added) into a
    memory table until what was there at the start is in (``availableNow``); the query, ended
    without error, and the table's rows."""
    reader = (
        spark.readStream.format("nsq")
        .option("nsqd", box.nsqd_tcp_address)
        .option("topic", topic)
        .option("channel", channel)
    )
    for key, value in options.items():
        reader = reader.option(key, value)  # type: ignore[arg-type]
    query = (
        reader.load()
        .writeStream.format("memory")
        .queryName(topic)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    assert query.awaitTermination(TIMEOUT)
    assert query.exception() is None
    return query, spark.sql(f"SELECT * FROM {topic}").collect()


def create_channel(box: NSQBox, topic: str, channel: str) -> None:
    """``POST /topic/create`` and ``/channel/create``: the channel gets every message from now."""
    for path in (f"topic/create?topic={topic}", f"channel/create?topic={topic}&channel={channel}"):
        request = urllib.request.Request(f"http://{box.nsqd_http_address}/{path}", method="POST")
        with urllib.request.urlopen(request, timeout=10) as response:
            response.read()


def read_line(stream: IO[str], timeout: float) -> str:
    """The next line of a subprocess's output, or AssertionError after ``timeout``."""
    lines: queue.Queue[str] = queue.Queue()
    threading.Thread(target=lambda: lines.put(stream.readline()), daemon=True).start()
    try:
        return lines.get(timeout=timeout).strip()
    except queue.Empty:
        raise AssertionError(f"no output from the query process in {timeout}s") from None


@pytest.fixture(scope="session")
def s3_endpoint() -> Iterator[str]:
    """An S3 server on 127.0.0.1 (moto's, in a thread), for the session: ``host:port``."""
    import logging

    server_module = pytest.importorskip("moto.server")
    requests = logging.getLogger("werkzeug")  # one line per request otherwise
    level = requests.level
    requests.setLevel(logging.WARNING)
    server = server_module.ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"{host}:{port}"
    finally:
        server.stop()
        requests.setLevel(level)


@pytest.fixture
def s3_wal_url(s3_endpoint: str) -> str:
    """A fresh bucket on the S3 server; the URL of a ``wal`` prefix in it for ``walPath``.

    The credentials are moto's dummies, in the URL (pyarrow reads them from its user
    part), so that Spark's executors need no environment of their own.
    """
    import pyarrow.fs as pafs

    bucket = f"wal-{uuid.uuid4().hex[:12]}"
    query = f"endpoint_override={s3_endpoint}&scheme=http&region=us-east-1"
    filesystem, _ = pafs.FileSystem.from_uri(
        f"s3://testing:testing@{bucket}?{query}&allow_bucket_creation=true"
    )
    filesystem.create_dir(bucket)
    return f"s3://testing:testing@{bucket}/wal?{query}"
