"""nsqd and nsqlookupd in subprocesses (``python -m nsqbox nsqd``), as an operator runs them.

Fuzzing and load tests use it so that the server's memory can be measured on
its own, its crash is a visible exit, and nothing it does (threads, global
random state, file descriptors) mixes with the test process.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from types import TracebackType
from typing import Self

import pytest

from tests.reliability.blocking import wait_for

START_TIMEOUT = 30.0
STOP_TIMEOUT = 30.0
_NSQD_RUNNING = re.compile(
    r"running nsqd \(TCP (?P<tcp_host>\S+):(?P<tcp_port>\d+), "
    r"HTTP (?P<http_host>\S+):(?P<http_port>\d+)\)"
)
# nsqlookupd's order: HTTP first
_LOOKUPD_RUNNING = re.compile(
    r"HTTP: listening on (?P<http_host>\S+):(?P<http_port>\d+).*?"
    r"TCP: listening on (?P<tcp_host>\S+):(?P<tcp_port>\d+)",
    re.DOTALL,
)


class ServerProcess:
    """``with NSQDProcess(tmp_path, "--max-msg-size=1024") as nsqd:`` -> ``nsqd.tcp``, ``.http``.

    The server runs until the block ends; then it must stop cleanly on SIGTERM
    (exit status 0, no traceback in its log).
    """

    command: tuple[str, ...] = ()
    running: re.Pattern[str] = _NSQD_RUNNING

    def __init__(self, data_path: Path, *flags: str) -> None:
        self.data_path = data_path
        self.flags = flags
        self.log_path = data_path / "nsqd.log"
        self.tcp: tuple[str, int] = ("", 0)
        self.http: tuple[str, int] = ("", 0)
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        assert self._proc is not None
        return self._proc.pid

    @property
    def http_url(self) -> str:
        return f"http://{self.http[0]}:{self.http[1]}"

    def __enter__(self) -> Self:
        self.data_path.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self._proc = subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "nsqbox",
                    *self.command,
                    "--tcp-address=127.0.0.1:0",
                    "--http-address=127.0.0.1:0",
                    *self.flags,
                ],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=log,
            )
        found: list[re.Match[str]] = []

        def started() -> bool:
            match = self.running.search(self.log())
            if match is not None:
                found.append(match)
                return True
            assert self.alive(), f"{self.command[0]} exited at start:\n{self.log()}"
            return False

        try:
            wait_for(started, timeout=START_TIMEOUT)
        except BaseException:
            self.kill()
            raise
        match = found[0]
        self.tcp = (match["tcp_host"], int(match["tcp_port"]))
        self.http = (match["http_host"], int(match["http_port"]))
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.stop()
        else:
            self.kill()

    def log(self) -> str:
        """What the server wrote to stderr so far."""
        return self.log_path.read_text(errors="replace")

    def alive(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def check_alive(self, cause: object) -> None:
        """Stop the test if the server died, naming ``cause`` (hypothesis reports it)."""
        if not self.alive():
            pytest.fail(f"{self.command[0]} died after {cause!r}:\n{self.log()[-3000:]}")

    def rss(self) -> tuple[int, int]:
        """(current, peak) resident set size in bytes, from /proc."""
        fields = {}
        for line in Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            fields[key] = value
        return _kib(fields["VmRSS"]), _kib(fields["VmHWM"])

    def stop(self) -> None:
        """SIGTERM, then check it shut down cleanly and never logged a traceback."""
        assert self._proc is not None
        name = self.command[0]
        assert self.alive(), f"{name} died:\n{self.log()[-4000:]}"
        self._proc.send_signal(signal.SIGTERM)
        try:
            code = self._proc.wait(STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            self.kill()
            raise AssertionError(f"{name} did not stop on SIGTERM") from None
        log = self.log()
        assert code == 0, f"{name} exited {code}:\n{log[-4000:]}"
        assert "Traceback" not in log, log[-4000:]

    def kill(self) -> None:
        if self._proc is not None and self._proc.poll() is None:
            os.kill(self._proc.pid, signal.SIGKILL)
            self._proc.wait()


class NSQDProcess(ServerProcess):
    """``python -m nsqbox nsqd``, logging warnings and errors only."""

    running = _NSQD_RUNNING

    def __init__(self, data_path: Path, *flags: str) -> None:
        super().__init__(data_path, f"--data-path={data_path}", "--log-level=warn", *flags)
        self.command = ("nsqd",)


class LookupdProcess(ServerProcess):
    """``python -m nsqbox lookupd``."""

    running = _LOOKUPD_RUNNING

    def __init__(self, data_path: Path, *flags: str) -> None:
        super().__init__(data_path, *flags)
        self.command = ("lookupd",)


def _kib(value: str) -> int:
    number, unit = value.split()
    assert unit == "kB"
    return int(number) * 1024
