"""The partitioned reader on a Spark standalone cluster, with an executor and the driver killed.

A master and two one-core workers run from the pyspark installation (every
executor in its own JVM, with its own Python workers); the driver runs in a
subprocess (``cluster_query``) so that it can be killed. Two nsqd nodes
registered with nsqlookupd hold the messages; the query finds them through
lookupd and archives every micro-batch to Parquet.

The run: publish half the messages to node 0 and one to node 1, whose channel
is paused, start the query; when batch 1 starts, SIGKILL the executor Python
worker that reads node 1 (its depth of one gets it a partition, and nsqd
delivers nothing from a paused channel, so the task waits there), then unpause
the channel and publish the rest of the other half to node 1; when batch 3 has
been written (read, staged,
FINished, not committed), SIGKILL the driver's process group. Restart the query
from its checkpoint (``availableNow``): batch 3 is replayed from the write-ahead
log and must hold the very messages of its first attempt, and the output must
hold every published message. A message may appear twice only where
``docs/spark.md`` says: a copy that nsqd delivered again (``attempts`` > 1)
because a staged segment's FIN never reached it.

The write-ahead log is a local directory, or a bucket of an S3 server (moto's)
in the S3 variant. The message count is ``NSQBOX_CLUSTER_MESSAGES`` (100,000
by default).

Selected with ``-m spark_cluster``; runs in CI with the rest of the suite.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import urllib.request
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from .session import pyspark_version

pytest.importorskip("pyspark")
if pyspark_version() < (4, 2):
    pytest.skip("the partitioned reader needs pyspark >= 4.2", allow_module_level=True)

import pyarrow.parquet as pq

from nsqbox.client.blocking import Publisher
from nsqbox.spark.wal import WriteAheadLog
from nsqbox.testing import NSQBoxFactory
from nsqbox.testing.waiting import poll

from .conftest import read_line
from .standalone import StandaloneCluster, free_port

pytestmark = [
    pytest.mark.spark_cluster,
    # the test finds the executors' Python workers and their sockets in /proc
    pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux's /proc"),
]

NSQ_BIN = Path(os.environ.get("NSQ_BIN", "/work/shared/nsq/bin"))
CHANNEL = "archive"
#: Bound on every wait for the driver's next line.
STEP = 240.0
#: Messages published per run of the nsqbox variants (half to each node).
MESSAGES = int(os.environ.get("NSQBOX_CLUSTER_MESSAGES", "100000"))


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[StandaloneCluster]:
    spark_cluster = StandaloneCluster(tmp_path_factory.mktemp("spark-cluster"))
    try:
        spark_cluster.start()
        yield spark_cluster
    finally:
        spark_cluster.stop()


class Driver:
    """One run of ``cluster_query`` in its own process group."""

    def __init__(self, cluster: StandaloneCluster, work: Path, name: str, config: dict[str, Any]):
        path = work / f"{name}.json"
        path.write_text(json.dumps(config))
        self.log = work / f"{name}.log"
        with self.log.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "tests.spark.cluster_query", str(path)],
                cwd=Path(__file__).resolve().parents[2],
                env=cluster.env,
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                start_new_session=True,  # the driver's JVM dies with it
            )
        assert self.proc.stdout is not None
        self.stdout: IO[str] = self.proc.stdout

    def until(self, wanted: str) -> list[str]:
        """Lines up to and including ``wanted``; fails with the driver's log otherwise."""
        lines = []
        while True:
            try:
                line = read_line(self.stdout, STEP)
            except AssertionError:
                raise AssertionError(self.log.read_text()[-5000:]) from None
            if not line and self.proc.poll() is not None:
                raise AssertionError(f"driver exited: {self.log.read_text()[-5000:]}")
            lines.append(line)
            if line == wanted:
                return lines

    def kill(self) -> None:
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(60)
        self.stdout.close()


def _found(pid: int | None) -> tuple[bool, int]:
    return pid is not None, pid or 0


def batch_ids(out: Path, batch: int) -> list[str]:
    return [str(i) for i in pq.read_table(out / f"batch={batch}").column("id").to_pylist()]


def topic_messages(http: str, topic: str) -> int:
    """How many messages the nsqd at ``http`` took for ``topic`` (0 when it has no such topic)."""
    with urllib.request.urlopen(f"http://{http}/stats?format=json", timeout=10) as response:
        stats = json.load(response)
    return sum(t["message_count"] for t in stats["topics"] if t["topic_name"] == topic)


def _post(http: str, path: str) -> None:
    request = urllib.request.Request(f"http://{http}/{path}", method="POST")
    urllib.request.urlopen(request, timeout=10).close()


def archive_with_kills(
    cluster: StandaloneCluster,
    work: Path,
    lookupd: str,
    nsqd_http: list[str],
    nsqd_tcp: list[str],
    publish: Callable[[str, list[bytes], int], None],
    count: int,
    batch: int,
    wal: str | None = None,
) -> None:
    """The scenario of the module docstring; ``publish(topic, bodies, node)``; the log in
    ``wal`` (a URL) or a directory of ``work``."""
    topic = f"archive_{os.getpid()}_{free_port()}"
    bodies = [b"msg-%07d" % i for i in range(count)]
    # Node 1 has the topic, the channel, paused, and one message until its Python worker
    # is killed: its depth gets it a partition, and till then its partition waits
    # pollTimeout in every batch, in the open, where the test can find it. Node 0 has its
    # half from the start.
    channel = f"topic={topic}&channel={CHANNEL}"
    for path in (f"topic/create?topic={topic}", f"channel/create?{channel}"):
        _post(nsqd_http[1], path)
    _post(nsqd_http[1], f"channel/pause?{channel}")
    odd = bodies[1::2]
    publish(topic, odd[:1], 1)
    publish(topic, bodies[0::2], 0)
    out = work / "out"
    wal = wal or str(work / "wal")
    config: dict[str, Any] = {
        "master": cluster.url,
        "lookupd": lookupd,
        "topic": topic,
        "channel": CHANNEL,
        "wal": wal,
        "checkpoint": str(work / "checkpoint"),
        "out": str(out),
        "batch": batch,
        "block_at": 3,
    }
    first = Driver(cluster, work, "first", config)
    try:
        first.until("START 1")
        # SIGKILL a Python worker of an executor while it reads from node 1: its task fails
        # and Spark runs it again, on a new worker
        port = int(nsqd_tcp[1].rpartition(":")[2])
        victim = poll(
            lambda: _found(cluster.python_worker_reading({port})),
            STEP,
            lambda _: "no executor Python worker ever read from nsqd node 1",
        )
        os.kill(victim, signal.SIGKILL)
        _post(nsqd_http[1], f"channel/unpause?{channel}")
        publish(topic, odd[1:], 1)
        lines = first.until("BLOCKED 3")
        first_attempt = sorted(batch_ids(out, 3))
        assert first_attempt
    finally:
        first.kill()
    assert not Path(f"/proc/{victim}").exists()
    assert "BLOCKED 3" in lines
    # the killed worker was running a task: Spark lost it and ran it again
    assert "Python worker exited unexpectedly" in first.log.read_text()

    sink_topic = topic + "_sink"
    second = Driver(
        cluster,
        work,
        "second",
        {
            **config,
            "block_at": -1,
            "available_now": True,
            "sink": {"nsqd": ",".join(nsqd_tcp), "topic": sink_topic, "count": 1000},
        },
    )
    try:
        second.until("FINISHED")
    finally:
        second.kill()

    # The replayed batch is the first attempt's batch, read back from the log.
    assert sorted(batch_ids(out, 3)) == first_attempt
    table = pq.read_table(out)
    seen = Counter(bytes(b) for b in table.column("body").to_pylist())
    assert set(seen) == set(bodies)  # every published message
    again = {
        bytes(b)
        for b, attempts in zip(
            table.column("body").to_pylist(), table.column("attempts").to_pylist(), strict=True
        )
        if attempts > 1
    }
    duplicated = {b for b, n in seen.items() if n > 1}
    # a message appears twice only when nsqd delivered it again (docs/spark.md, Duplicates)
    assert duplicated <= again
    # committed batches are gone from the log: what is left is the last run's last batch
    assert len(WriteAheadLog(wal).sequences()) <= 1
    # the sink ran on the executors: each published its partition to one of the nodes
    published = sum(topic_messages(http, sink_topic) for http in nsqd_http)
    assert published == 1000


@pytest.mark.parametrize("store", ["local", "s3"])
def test_cluster_archives_every_message_through_kills(
    cluster: StandaloneCluster,
    nsqbox_factory: NSQBoxFactory,
    tmp_path: Path,
    request: pytest.FixtureRequest,
    store: str,
) -> None:
    wal = request.getfixturevalue("s3_wal_url") if store == "s3" else None
    box = nsqbox_factory(nsqd=2, lookupd=1)
    lookupd = str(box.lookupd_http_address)

    def publish(topic: str, bodies: list[bytes], node: int) -> None:
        for i in range(0, len(bodies), 5000):
            box.publish(topic, bodies[i : i + 5000], node=node)

    archive_with_kills(
        cluster,
        tmp_path,
        lookupd,
        [str(a) for a in box.nsqd_http_addresses],
        [str(a) for a in box.nsqd_tcp_addresses],
        publish,
        count=MESSAGES,
        batch=max(1, MESSAGES // 10),
        wal=wal,
    )


class RealNSQ:
    """nsqlookupd and two nsqd nodes from NSQ's own binaries, each in its own process group."""

    def __init__(self, work: Path) -> None:
        self.work = work
        self.procs: list[subprocess.Popen[bytes]] = []
        self.lookupd_tcp, self.lookupd_http = free_port(), free_port()
        self.nsqd = [(free_port(), free_port()) for _ in range(2)]

    def _run(self, program: str, log_name: str, *args: str) -> None:
        with (self.work / f"{log_name}.log").open("wb") as log:
            self.procs.append(
                subprocess.Popen(
                    [str(NSQ_BIN / program), *args],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            )

    def start(self) -> None:
        self._run(
            "nsqlookupd",
            "nsqlookupd",
            f"--tcp-address=127.0.0.1:{self.lookupd_tcp}",
            f"--http-address=127.0.0.1:{self.lookupd_http}",
            "--broadcast-address=127.0.0.1",
        )
        for index, (tcp, http) in enumerate(self.nsqd):
            data = self.work / f"nsqd{index}"
            data.mkdir()
            self._run(
                "nsqd",
                f"nsqd{index}",
                f"--tcp-address=127.0.0.1:{tcp}",
                f"--http-address=127.0.0.1:{http}",
                "--broadcast-address=127.0.0.1",
                f"--lookupd-tcp-address=127.0.0.1:{self.lookupd_tcp}",
                f"--data-path={data}",
                "--mem-queue-size=100000",
            )
        ports = [self.lookupd_http, *(http for _, http in self.nsqd)]
        poll(
            lambda: (all(_pings(port) for port in ports), None),
            STEP,
            lambda _: f"the real NSQ daemons did not answer /ping: {self.work}/*.log",
        )

    def stop(self) -> None:
        for proc in self.procs:
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)


def _pings(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=5) as response:
            return bool(response.status == 200)
    except OSError:
        return False


def test_cluster_against_real_nsqd(cluster: StandaloneCluster, tmp_path: Path) -> None:
    missing = [n for n in ("nsqd", "nsqlookupd") if not os.access(NSQ_BIN / n, os.X_OK)]
    if missing:
        pytest.skip(f"no real {', '.join(missing)} in {NSQ_BIN} (set NSQ_BIN)")
    real = RealNSQ(tmp_path)
    try:
        real.start()
        tcp = [f"127.0.0.1:{port}" for port, _ in real.nsqd]

        def publish(topic: str, bodies: list[bytes], node: int) -> None:
            with Publisher(tcp[node]) as publisher:
                for i in range(0, len(bodies), 1000):
                    publisher.mpub(topic, bodies[i : i + 1000])

        archive_with_kills(
            cluster,
            tmp_path,
            f"127.0.0.1:{real.lookupd_http}",
            [f"127.0.0.1:{http}" for _, http in real.nsqd],
            tcp,
            publish,
            count=20_000,
            batch=4_000,
        )
    finally:
        real.stop()
