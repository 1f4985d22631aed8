"""What start-up imports: ``nsqbox up`` and the fixture's first box answer before any HTTP client,
asyncio, UI or metrics library is loaded (issue 39: start-up time).

Each check runs in a fresh interpreter and reads ``sys.modules`` at the moment the box is ready;
what it names is loaded later, on first use (the admin service's first request, an nsqd's first
new topic, the first scrape, ``--web``). No timing here: ``bench/bench_startup.py`` measures.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

from tests.helpers import TIMEOUT

#: Loaded on first use only, never to get the box ready.
NOT_AT_START = (
    "httpx",
    "httpcore",
    "anyio",
    "asyncio",
    "textual",
    "textual_serve",
    "aiohttp",
    "rich",
    "prometheus_client",
    "re2",
    "pyspark",
    "nsqbox.metrics",  # the first scrape of /metrics
    "nsqbox.admin.peek",  # the first /api/messages
    "nsqbox.admin.journal",  # the first /api/journey, /api/journal, troubles, given_up
    "nsqbox.nsqd.tcp.auth",  # nsqd with --auth-http-address
    "html",  # the first redirect's body
    "nsqbox.process.terminal_text",  # the first NSQError
    "concurrent.futures",  # nsqd's disk-sync thread, made with its first disk queue
    "nsqbox.snapshot.files",  # the first snapshot or step replay route's request
    "nsqbox.snapshot.format",
    "nsqbox.snapshot.replay",
    "gzip",  # a snapshot's or a tap's .gz file
)

#: Loaded by ``nsqbox up`` (its command line), but not to start the fixture's box, whose
#: servers parse no flags (unless the spec gives some).
NOT_FOR_THE_FIXTURE = (
    "json",  # the command line's and the auth client's (the servers' JSON is msgspec)
    "nsqbox.go.flags",
    "nsqbox.go.options",
    "nsqbox.nsqd.config",
    "nsqbox.lookupd.config",
)

#: ``nsqbox up`` as the command line runs it; at its ready line, print the modules and stop
#: the box with SIGTERM as a user would.
UP = """\
import os, signal, sys

class ReadyLine:
    def write(self, text):
        if text.startswith("{"):
            sys.__stdout__.write(repr(sorted(sys.modules)) + "\\n")
            sys.__stdout__.flush()
            os.kill(os.getpid(), signal.SIGTERM)
        return len(text)

    def flush(self):
        pass

sys.stdout = ReadyLine()
from nsqbox.cli import main
sys.exit(main(["up", "--ephemeral-ports", "--ready-json", "--data-path", "data"]))
"""

#: The ``nsqbox`` fixture's first box (nsqd + nsqlookupd, registered, in a thread).
FIRST_BOX = """\
import sys
from nsqbox.testing.boxes import start_box
from nsqbox.testing.config import ClusterSpec

box = start_box(ClusterSpec(), "data")
print(repr(sorted(sys.modules)))
box.stop()
"""


def modules_at_ready(code: str, cwd: Path) -> list[str]:
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        cwd=cwd,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    modules: list[str] = ast.literal_eval(result.stdout.strip().splitlines()[-1])
    assert "nsqbox.nsqd.domain.nsqd" in modules  # the box did run
    return modules


def loaded_early(modules: list[str], early: tuple[str, ...] = NOT_AT_START) -> list[str]:
    """The names of ``early`` that ``modules`` holds (a package or a module in it)."""
    return [
        name
        for name in early
        if any(module == name or module.startswith(f"{name}.") for module in modules)
    ]


def test_up_is_ready_before_loading_what_runs_on_first_use(tmp_path: Path) -> None:
    modules = modules_at_ready(UP, tmp_path)
    assert "nsqbox.admin.server" in modules  # the admin service answered too
    assert loaded_early(modules) == []


def test_the_fixtures_first_box_loads_no_http_client(tmp_path: Path) -> None:
    modules = modules_at_ready(FIRST_BOX, tmp_path)
    assert "nsqbox.lookupd.server" in modules
    assert loaded_early(modules) == []
    assert loaded_early(modules, NOT_FOR_THE_FIXTURE) == []


def test_a_fixture_box_with_flags_parses_them(tmp_path: Path) -> None:
    # the flag machinery the plain box skips still reads a spec's flags, and refuses bad ones
    code = """\
import sys
from nsqbox.testing.boxes import start_box
from nsqbox.testing.config import ClusterSpec, SpecError

spec = ClusterSpec(nsqd_args=("--max-msg-size=1000",), lookupd_args=("-tombstone-lifetime=7s",))
box = start_box(spec, "data")
nsqd, lookupd = box.cluster.nsqds[0], box.cluster.lookupd[0].lookupd
print(box.call(lambda: (nsqd.options.max_msg_size, lookupd.options.tombstone_lifetime)))
box.stop()
for spec in (ClusterSpec(nsqd_args=("--nope",)), ClusterSpec(lookupd_args=("--nope",))):
    try:
        start_box(spec, "data2").stop()
    except SpecError as exc:
        print(exc)
print(repr(sorted(sys.modules)))
"""
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 3,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    options, nsqd_error, lookupd_error, modules = result.stdout.strip().splitlines()
    assert options == "(1000, 7.0)"
    assert nsqd_error.startswith("bad nsqd flags ['--nope']: flag provided but not defined")
    assert lookupd_error.startswith("bad nsqlookupd flags ['--nope']: flag provided but not")
    loaded = loaded_early(ast.literal_eval(modules), NOT_FOR_THE_FIXTURE)
    assert loaded == [name for name in NOT_FOR_THE_FIXTURE if name.startswith("nsqbox.")]
