"""``nsqbox up`` (and the tools) as real child processes, for synchronous tests.

Rules: localhost only, port 0 everywhere (``--ephemeral-ports``), a timeout on every wait.
"""

from __future__ import annotations

import json
import select
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from nsqbox import cli

TIMEOUT = 20.0
NSQBOX = [sys.executable, "-m", "nsqbox"]


def nsqbox(
    *args: str, stdin: bytes | None = None, timeout: float = TIMEOUT
) -> subprocess.CompletedProcess[bytes]:
    """Run ``nsqbox <args>`` to completion."""
    return subprocess.run(
        [*NSQBOX, *args], input=stdin, capture_output=True, timeout=timeout, check=False
    )


class ToolProcess:
    """``nsqbox TOOL ARGS`` as a child (``trace``, ``record``), started and waited for until
    it says on stderr that it follows: :attr:`ready` is that line."""

    def __init__(self, tool: str, *args: str) -> None:
        self.process = subprocess.Popen(
            [*NSQBOX, tool, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        assert self.process.stderr is not None
        readable, _, _ = select.select([self.process.stderr], [], [], TIMEOUT)
        if not readable:
            self.process.kill()
            raise TimeoutError(f"nsqbox {tool} did not say it follows")
        self.ready = self.process.stderr.readline().decode()

    def wait(self) -> tuple[int, str, str]:
        """Its exit status, stdout and stderr, once it ends."""
        out, err = self.process.communicate(timeout=TIMEOUT)
        return self.process.returncode, out.decode(), err.decode()

    def kill(self) -> None:
        """Kill it if it still runs."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.communicate(timeout=TIMEOUT)


class BoxProcess:
    """``nsqbox up --ephemeral-ports --ready-json`` as a child; :attr:`ready` is its JSON line."""

    def __init__(self, directory: Path, *args: str) -> None:
        self.directory = directory
        self.stderr_path = directory / "box-stderr.txt"
        with self.stderr_path.open("wb") as stderr:
            self.process = subprocess.Popen(
                [*NSQBOX, "up", "--ephemeral-ports", "--ready-json", *args],
                stdout=subprocess.PIPE,
                stderr=stderr,
                cwd=directory,
            )
        try:
            self.ready: dict[str, Any] = json.loads(self._read_line())
        except BaseException:
            self.process.kill()
            self.process.wait(TIMEOUT)
            raise

    def _read_line(self) -> bytes:
        assert self.process.stdout is not None
        readable, _, _ = select.select([self.process.stdout], [], [], TIMEOUT)
        if not readable:
            raise TimeoutError(f"no ready line; stderr: {self.stderr}")
        line = self.process.stdout.readline()
        if not line:
            raise EOFError(f"nsqbox up exited; stderr: {self.stderr}")
        return line

    @property
    def stderr(self) -> str:
        """Everything the box wrote to stderr so far."""
        return self.stderr_path.read_text()

    def url(self, key: str, path: str) -> str:
        """``http://<ready[key]><path>``."""
        return f"http://{self.ready[key]}{path}"

    def get(self, key: str, path: str, **params: str) -> Any:
        """GET JSON from one of the box's HTTP services."""
        response = httpx.get(self.url(key, path), params=params, timeout=TIMEOUT)
        response.raise_for_status()
        return response.json()

    def stop(self, signum: signal.Signals = signal.SIGTERM) -> int:
        """Send ``signum`` and wait for the exit status."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
        try:
            return self.process.wait(TIMEOUT)
        finally:
            if self.process.stdout is not None:
                self.process.stdout.close()

    def kill(self) -> None:
        """Make sure the child is gone (teardown)."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(TIMEOUT)
        if self.process.stdout is not None:
            self.process.stdout.close()


def running_box(tmp_path_factory: pytest.TempPathFactory, *args: str) -> Iterator[BoxProcess]:
    """A box for a fixture (``yield from``): ``nsqbox up <args>``, stopped cleanly afterwards
    (exit status 0), killed if it would not stop."""
    process = BoxProcess(tmp_path_factory.mktemp("box"), *args)
    try:
        yield process
        assert process.stop() == 0, process.stderr
    finally:
        process.kill()


def admin_command(
    box: BoxProcess, capsys: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """``nsqbox <args>`` in this process against the box's admin service: status, out, err."""
    status = cli.main([*args, f"--admin-http-address={box.ready['admin_http_address']}"])
    out, err = capsys.readouterr()
    return status, out, err
