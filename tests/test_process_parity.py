"""What harnesses see of the processes: ``--version`` and the start-up and clean-stop log lines.

Client libraries' test harnesses start nsqd and nsqlookupd, parse their version
line and wait for their "listening on" lines. nsqbox's must read the same. The
expected lines are kept here; when real NSQ binaries are at hand (``NSQ_BIN``,
default ``../shared/nsq/bin`` beside the repository), the same checks run
against them too, which shows that the expected lines are real NSQ's.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path
from typing import Final

import httpx
import pytest

from tests.reliability.blocking import wait_for

REPO: Final = Path(__file__).resolve().parents[1]
NSQ_BIN: Final = Path(os.environ.get("NSQ_BIN", REPO.parent / "shared" / "nsq" / "bin"))
TIMEOUT: Final = 30.0

#: nsqd's lines from start to a clean stop with no topics, masked (see ``masked``).
NSQD_LINES: Final = [
    "INFO: nsqd v1.3.0 (built w/TOKEN)",
    "INFO: ID: N",
    "INFO: NSQ: persisting topic/channel metadata to DATA/nsqd.dat",
    "INFO: TCP: listening on ADDR",
    "INFO: HTTP: listening on ADDR",
    "INFO: TCP: closing ADDR",
    "INFO: HTTP: closing ADDR",
    "INFO: NSQ: persisting topic/channel metadata to DATA/nsqd.dat",
    "INFO: NSQ: closing topics",
    "INFO: NSQ: stopping subsystems",
    "INFO: LOOKUP: closing",
    "INFO: QUEUESCAN: closing",
    "INFO: NSQ: bye",
]
LOOKUPD_LINES: Final = [
    "INFO: nsqlookupd v1.3.0 (built w/TOKEN)",
    "INFO: HTTP: listening on ADDR",
    "INFO: TCP: listening on ADDR",
    "INFO: TCP: closing ADDR",
    "INFO: HTTP: closing ADDR",
]
_STAMP: Final = re.compile(r"^\[(nsqd|nsqlookupd)\] \d{4}/\d\d/\d\d \d\d:\d\d:\d\d\.\d{6} ")
_VERSION: Final = re.compile(r"^(nsqd|nsqlookupd) v1\.3\.0 \(built w/\S+\)$")


def nsqbox(program: str) -> list[str]:
    return [sys.executable, "-m", "nsqbox", "nsqd" if program == "nsqd" else "lookupd"]


def real(program: str) -> list[str]:
    binary = NSQ_BIN / program
    if not os.access(binary, os.X_OK):
        pytest.skip(f"no real {program} to run at {binary} (set NSQ_BIN to compare with it)")
    return [str(binary)]


def masked(log: str, program: str, data: Path) -> list[str]:
    """The program's own log lines, without timestamps, addresses, paths, ids or build token."""
    lines = []
    for line in log.splitlines():
        if not _STAMP.match(line):
            continue  # nsqbox's friendly banner, or anything that is not the program's log
        line = _STAMP.sub("", line)
        line = line.replace(str(data), "DATA")
        line = re.sub(r"127\.0\.0\.1:\d+", "ADDR", line)
        line = re.sub(r"^INFO: ID: \d+$", "INFO: ID: N", line)
        line = re.sub(r"\(built w/\S+\)", "(built w/TOKEN)", line)
        lines.append(line)
    return lines


def unordered(lines: list[str]) -> tuple[list[str], list[str]]:
    """Start-up lines (the "listening on" ones sorted) and the shutdown lines, sorted.

    Real NSQ logs "listening on" and "closing" from goroutines, in no fixed order
    relative to each other or to the shutdown's own lines.
    """
    first_stop = next(i for i, line in enumerate(lines) if "closing" in line)
    start, stop = lines[:first_stop], lines[first_stop:]
    listening = sorted(line for line in start if "listening on" in line)
    return [line for line in start if "listening on" not in line] + listening, sorted(stop)


def start(argv: list[str], program: str, data: Path) -> tuple[subprocess.Popen[bytes], Path]:
    """Start ``argv`` on free ports; return once it logged its last "listening on" line."""
    data.mkdir(exist_ok=True)
    log_path = data.parent / f"{data.name}.log"
    flags = ["--tcp-address=127.0.0.1:0", "--http-address=127.0.0.1:0"]
    if program == "nsqd":
        flags += [f"--data-path={data}", "--https-address=127.0.0.1:0"]
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [*argv, *flags], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log
        )
    last = "HTTP: listening on" if program == "nsqd" else "TCP: listening on"

    def listening() -> bool:
        assert proc.poll() is None, log_path.read_text(errors="replace")
        return last in log_path.read_text(errors="replace")

    try:
        wait_for(listening, timeout=TIMEOUT)
    except AssertionError:
        proc.kill()
        proc.wait()
        pytest.fail(f"{argv[0]} did not start:\n{log_path.read_text(errors='replace')}")
    return proc, log_path


def stop(proc: subprocess.Popen[bytes], *, signals: int = 1) -> int:
    for _ in range(signals):
        proc.send_signal(signal.SIGTERM)
    try:
        return proc.wait(TIMEOUT)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        raise


@pytest.mark.parametrize("program", ["nsqd", "nsqlookupd"])
@pytest.mark.parametrize("side", ["nsqbox", "real"])
def test_version_line_has_nsqs_shape(program: str, side: str) -> None:
    argv = nsqbox(program) if side == "nsqbox" else real(program)
    out = subprocess.run(
        [*argv, "--version"], capture_output=True, text=True, timeout=TIMEOUT, check=True
    ).stdout
    assert _VERSION.fullmatch(out.strip()), out


@pytest.mark.parametrize(
    ("program", "expected"), [("nsqd", NSQD_LINES), ("nsqlookupd", LOOKUPD_LINES)]
)
@pytest.mark.parametrize("side", ["nsqbox", "real"])
def test_start_and_clean_stop_log_lines(
    tmp_path: Path, program: str, expected: list[str], side: str
) -> None:
    argv = nsqbox(program) if side == "nsqbox" else real(program)
    for attempt in range(3):
        data = tmp_path / f"data{attempt}"
        proc, log_path = start(argv, program, data)
        status = stop(proc)
        # real NSQ installs its signal handler only after it logged "listening on"
        # (go-svc's Run: Start, then signal.Notify): a TERM in between kills it. That is
        # real NSQ's race, not what is compared here: start it again.
        if not (side == "real" and status == -signal.SIGTERM):
            break
    assert status == 0
    lines = masked(log_path.read_text(errors="replace"), program, data)
    if side == "nsqbox":
        assert lines == expected  # nsqbox keeps one order: nsqd's usual one
    else:
        assert unordered(lines) == unordered(expected)


def test_a_second_sigterm_does_not_cut_the_shutdown_short(tmp_path: Path) -> None:
    # supervisors and timeout(1) may send TERM twice; nsqd finishes its shutdown regardless
    data = tmp_path / "data"
    proc, log_path = start(nsqbox("nsqd"), "nsqd", data)
    log = log_path.read_text()
    http = re.findall(r"HTTP: listening on (127\.0\.0\.1:\d+)", log)[0]
    response = httpx.post(f"http://{http}/mpub?topic=t", content=b"\n".join([b"m"] * 1000))
    assert response.text == "OK"
    assert stop(proc, signals=3) == 0
    lines = masked(log_path.read_text(errors="replace"), "nsqd", data)
    assert lines[-1] == "INFO: NSQ: bye"
    meta = (data / "t.diskqueue.meta.dat").read_text().split("\n")
    assert meta[0] == "1000"  # every message written at shutdown
