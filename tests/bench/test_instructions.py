"""bench/instructions.py counts the server's waits for a read in a callgrind profile, and
bench/http_pub_load.py's paced load sees when a server sleeps waiting for its sockets."""

from __future__ import annotations

import platform
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

# A profile as callgrind writes it: names compressed to "(id)" after their first mention,
# as the function (fn=) or as the one called (cfn=); each call's count on its calls= line.
PROFILE = """\
# callgrind format
events: Ir
summary: 1000

fn=(1) pyepoll_modify
cfn=(2) epoll_ctl
calls=3 120
5 40
cfn=(3) epoll_wait
calls=7 30
6 70

fn=(4) pyepoll_register
cfn=(2)
calls=2 120
7 20
cfn=(5) epoll_ctl_helper
calls=11 10
8 5

fn=(2)
120 9
"""


@pytest.fixture
def bench(monkeypatch: pytest.MonkeyPatch) -> tuple[ModuleType, ModuleType]:
    """bench/instructions.py and bench/http_pub_load.py, imported as side_by_side does."""
    monkeypatch.syspath_prepend(str(BENCH))
    import http_pub_load
    import instructions

    return instructions, http_pub_load


def test_calls_of_counts_every_callers_calls_through_compressed_names(
    bench: tuple[ModuleType, ModuleType],
) -> None:
    instructions, _ = bench
    assert instructions.calls_of(PROFILE, "epoll_ctl") == 5
    assert instructions.calls_of(PROFILE, "epoll_wait") == 7
    assert instructions.calls_of(PROFILE, "epoll_ctl_helper") == 11
    assert instructions.calls_of(PROFILE, "sock_recv") == 0


@contextmanager
def asleep(call: str) -> Iterator[int]:
    """A process that says "ready", then sleeps in ``call`` until killed: its pid."""
    code = f"import select, time; e = select.epoll(); print('ready', flush=True); {call}"
    with subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE) as proc:
        try:
            assert proc.stdout is not None
            assert proc.stdout.readline() == b"ready\n"
            yield proc.pid
        finally:
            proc.kill()


SAYS_WAITS = Path("/proc/self/syscall").exists() and platform.machine() in ("x86_64", "aarch64")


@pytest.mark.skipif(not SAYS_WAITS, reason="no /proc/PID/syscall, or its numbers not known")
def test_pace_waits_for_a_process_asleep_in_epoll(bench: tuple[ModuleType, ModuleType]) -> None:
    _, http_pub_load = bench
    with asleep("e.poll(60)") as pid:
        assert http_pub_load.Pace(pid, 1).wait(bound=30.0) is True


@pytest.mark.skipif(not SAYS_WAITS, reason="no /proc/PID/syscall, or its numbers not known")
def test_pace_does_not_take_another_sleep_for_epoll(bench: tuple[ModuleType, ModuleType]) -> None:
    _, http_pub_load = bench
    with asleep("time.sleep(60)") as pid:
        assert http_pub_load.Pace(pid, 1).wait(bound=0.2) is False
