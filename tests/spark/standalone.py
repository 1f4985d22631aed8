"""A Spark standalone cluster on this machine: a master and workers from the pyspark installation.

Each daemon is ``spark-class org.apache.spark.deploy.master.Master`` (or
``worker.Worker``), bound to 127.0.0.1, in a process group of its own, with
small memory; a worker has one core and starts its executor in its own JVM,
with Python workers on this interpreter. :meth:`StandaloneCluster.stop` kills
every process group it started (the workers' executors with them).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path

from nsqbox.testing.waiting import poll

from .session import spark_env

#: How long a daemon gets to come up (a cold JVM on a loaded 2-core machine).
START_TIMEOUT = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


def wait_for(predicate: Callable[[], bool], what: str, timeout: float = START_TIMEOUT) -> None:
    """Wait for ``predicate`` (a file a JVM writes: nothing to block on); fail naming ``what``."""
    poll(lambda: (predicate(), None), timeout, lambda _: f"timed out waiting for {what}")


def cluster_env() -> dict[str, str]:
    """The environment of the daemons, executors and drivers (Java, Python, loopback)."""
    from nsqbox.spark import ensure_java

    ensure_java()
    env = {**os.environ, **spark_env()}
    env["SPARK_HOME"] = str(spark_home())
    env["SPARK_DAEMON_MEMORY"] = "256m"
    # short-lived JVMs: C1 only starts faster and costs less CPU
    env["SPARK_DAEMON_JAVA_OPTS"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    env.pop("SPARK_CONF_DIR", None)
    return env


class StandaloneCluster:
    """A master and ``workers`` one-core workers, each in its own process group."""

    def __init__(self, work: Path, workers: int = 2, worker_memory: str = "768m") -> None:
        self.work = work
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.env = cluster_env()
        self._workers = workers
        self._worker_memory = worker_memory
        self._procs: list[subprocess.Popen[bytes]] = []

    def _daemon(self, name: str, cls: str, *args: str) -> Path:
        log = self.work / f"{name}.log"
        with log.open("wb") as out:
            proc = subprocess.Popen(
                [str(spark_home() / "bin" / "spark-class"), cls, *args],
                env=self.env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        self._procs.append(proc)
        return log

    def start(self) -> None:
        self.work.mkdir(parents=True, exist_ok=True)
        master = self._daemon(
            "master",
            "org.apache.spark.deploy.master.Master",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--webui-port",
            str(free_port()),
        )
        wait_for(lambda: "I have been elected leader" in master.read_text(), "the master")
        for i in range(self._workers):
            work_dir = self.work / f"worker{i}"
            work_dir.mkdir(exist_ok=True)
            self._daemon(
                f"worker{i}",
                "org.apache.spark.deploy.worker.Worker",
                self.url,
                "--host",
                "127.0.0.1",
                "--cores",
                "1",
                "--memory",
                self._worker_memory,
                "--webui-port",
                str(free_port()),
                "--work-dir",
                str(work_dir),
            )
        wait_for(
            lambda: master.read_text().count("Registering worker") >= self._workers,
            "the workers to register",
        )

    def executor_python_workers(self) -> list[int]:
        """PIDs of the Python workers forked by this cluster's executors' ``pyspark.daemon``.

        Executors stay in their worker's process group; ``pyspark.daemon`` makes a group of
        its own, so it is found as a child of an executor. Other Spark sessions on the
        machine are left alone.
        """
        groups = {proc.pid for proc in self._procs}
        table = []  # (pid, ppid, pgrp, is a pyspark.daemon)
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                stat = (entry / "stat").read_text().rpartition(")")[2].split()
            except OSError:
                continue
            table.append(
                (int(entry.name), int(stat[1]), int(stat[2]), b"pyspark.daemon" in cmdline)
            )
        ours = {pid for pid, _, pgrp, _ in table if pgrp in groups}  # the JVMs
        daemons = {pid for pid, ppid, _, daemon in table if daemon and ppid in ours}
        return [pid for pid, ppid, _, _ in table if ppid in daemons]

    def python_worker_reading(self, ports: set[int]) -> int | None:
        """An executor Python worker with a TCP connection to one of ``ports`` (a task pulling)."""
        sockets = _sockets_to(ports)
        for pid in self.executor_python_workers():
            try:
                fds = list(Path(f"/proc/{pid}/fd").iterdir())
            except OSError:
                continue
            for fd in fds:
                try:
                    if os.readlink(fd) in sockets:
                        return pid
                except OSError:
                    continue
        return None

    def stop(self) -> None:
        for proc in reversed(self._procs):
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait(30)
        self._procs.clear()
        # the workers' executors run in the workers' process groups, but an executor that
        # a worker started lives on if the worker died first: kill what is left by work dir
        for pid in _pids_with(str(self.work)):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass


def _pids_with(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and int(entry.name) != os.getpid():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                continue
    return found


def _sockets_to(ports: set[int]) -> set[str]:
    """``socket:[inode]`` of every established TCP connection to one of ``ports``."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rpartition(":")[2], 16)
            if fields[3] == "01" and remote_port in ports:  # 01: ESTABLISHED
                found.add(f"socket:[{fields[9]}]")
    return found
