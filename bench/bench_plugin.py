"""What the pytest plugin costs: session start-up and per-test overhead (medians of 20).

    python bench/bench_plugin.py              # thread mode (the default)
    python bench/bench_plugin.py --subprocess # also subprocess mode start-up
    python bench/bench_plugin.py --pytest     # also the overhead seen through pytest itself

Measured:

* plugin import: ``import nsqbox.testing.plugin`` in a fresh interpreter (pytest already
  imported), and whether that pulled in trio, httpx or textual;
* session start, cold: a fresh interpreter's first box (server modules imported then);
* session start, warm: starting a box (nsqd + nsqlookupd, registered) in a process that
  has started one before; and stopping it;
* per test: creating the ``nsqbox`` handle and closing it (its cleanup), for a test that
  does nothing and for one that publishes a message to a new topic (whose cleanup
  deletes the topic and unregisters it from nsqlookupd);
* with ``--pytest``: the per-test cost as pytest sees it (its fixture machinery
  included): setup + teardown of 1000 generated tests, with and without ``nsqbox``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PY = sys.executable
RUNS = 20


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.2f} ms"


def median_of(runs: int, fn: Callable[[], float]) -> float:
    return statistics.median(fn() for _ in range(runs))


def in_fresh_interpreter(code: str) -> dict[str, object]:
    out = subprocess.run(
        [PY, "-c", textwrap.dedent(code)], capture_output=True, text=True, check=True, cwd=ROOT
    ).stdout
    result: dict[str, object] = json.loads(out.strip().splitlines()[-1])
    return result


IMPORT_PROBE = """
    import json, sys, time
    import pytest
    t = time.perf_counter()
    import nsqbox.testing.plugin
    elapsed = time.perf_counter() - t
    heavy = [m for m in ("trio", "httpx", "textual", "pyspark") if m in sys.modules]
    print(json.dumps({"seconds": elapsed, "heavy": heavy}))
"""

COLD_START = """
    import json, os, shutil, tempfile, time
    from nsqbox.testing.boxes import start_box
    from nsqbox.testing.config import ClusterSpec, Mode
    shm = "/dev/shm" if os.path.isdir("/dev/shm") else None
    root = tempfile.mkdtemp(prefix="nsqbox-bench-", dir=shm)
    t = time.perf_counter()
    box = start_box(ClusterSpec(), root, mode=Mode.%s)
    elapsed = time.perf_counter() - t
    box.stop()
    shutil.rmtree(root)
    print(json.dumps({"seconds": elapsed}))
"""


def bench_import() -> None:
    samples = [in_fresh_interpreter(IMPORT_PROBE) for _ in range(5)]
    seconds = statistics.median(float(s["seconds"]) for s in samples)  # type: ignore[arg-type]
    heavy = sorted({m for s in samples for m in s["heavy"]})  # type: ignore[attr-defined]
    print(f"plugin import (fresh interpreter, median of 5): {ms(seconds)}; heavy modules: {heavy}")


def bench_cold(mode: str, runs: int) -> None:
    seconds = statistics.median(
        float(in_fresh_interpreter(COLD_START % mode)["seconds"])  # type: ignore[arg-type]
        for _ in range(runs)
    )
    print(f"session start, cold, {mode.lower()} (median of {runs}): {ms(seconds)}")


def data_roots() -> list[tuple[str, str]]:
    """Where to keep the data: RAM (what ``nsqbox_data_path = auto`` picks) and disk."""
    roots = [("disk", tempfile.mkdtemp(prefix="nsqbox-bench-"))]
    if os.path.isdir("/dev/shm"):
        roots.insert(0, ("/dev/shm", tempfile.mkdtemp(prefix="nsqbox-bench-", dir="/dev/shm")))
    return roots


def bench_in_process(where: str, root: str) -> None:
    from nsqbox.testing.boxes import ThreadBox
    from nsqbox.testing.config import ClusterSpec
    from nsqbox.testing.handle import NSQBox

    print(f"-- data in {where}")
    ThreadBox(ClusterSpec(), f"{root}/warmup").stop()  # imports, first-run caches

    starts: list[float] = []
    stops: list[float] = []
    for i in range(RUNS):
        t = time.perf_counter()
        box = ThreadBox(ClusterSpec(), f"{root}/{i}")
        starts.append(time.perf_counter() - t)
        t = time.perf_counter()
        box.stop()
        stops.append(time.perf_counter() - t)
    print(f"session start, warm, thread (median of {RUNS}): {ms(statistics.median(starts))}")
    print(f"session stop, thread (median of {RUNS}): {ms(statistics.median(stops))}")

    box = ThreadBox(ClusterSpec(), f"{root}/per-test")
    try:

        def empty_test() -> float:
            t = time.perf_counter()
            NSQBox(box).close()
            return time.perf_counter() - t

        def publishing_test() -> float:
            handle = NSQBox(box)
            handle.publish("bench", b"x")  # the test's own work, not measured
            t = time.perf_counter()
            handle.close()
            return time.perf_counter() - t

        for fn in (empty_test, publishing_test):
            fn()  # warm-up
        print(f"per test, empty test (median of {RUNS}): {ms(median_of(RUNS, empty_test))}")
        print(
            "per test, cleanup of one published topic "
            f"(median of {RUNS}): {ms(median_of(RUNS, publishing_test))}"
        )
    finally:
        box.stop()


PYTEST_MODULE = """
import pytest

@pytest.mark.parametrize("i", range({count}))
def test_it({fixture}i):
    pass
"""

#: Times every test's setup and teardown (the fixture's work), skipping the first test's
#: (which starts the session box), and writes the median to ``timing.json``.
PYTEST_CONFTEST = """
import json, statistics, time
import pytest

spent = {}

@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item):
    t = time.perf_counter()
    try:
        return (yield)
    finally:
        spent[item.nodeid] = time.perf_counter() - t

@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    t = time.perf_counter()
    try:
        return (yield)
    finally:
        spent[item.nodeid] += time.perf_counter() - t

def pytest_sessionfinish(session):
    per_test = list(spent.values())[1:]
    with open("timing.json", "w") as f:
        json.dump(statistics.median(per_test), f)
"""


def bench_pytest() -> None:
    """The fixture's cost per test as pytest sees it (its fixture machinery included).

    Setup plus teardown of each of 1000 tests with the ``nsqbox`` fixture, less the same
    without it; medians over the tests (the first, which starts the box, left out).
    """

    def run(fixture: str) -> float:
        with tempfile.TemporaryDirectory() as tmp:
            Path(tmp, "test_overhead.py").write_text(
                PYTEST_MODULE.format(fixture=fixture, count=1000)
            )
            Path(tmp, "conftest.py").write_text(PYTEST_CONFTEST)
            plugin = ["-p", "nsqbox.testing.plugin", "-p", "no:cacheprovider"]
            subprocess.run(
                [PY, "-m", "pytest", "-q", *plugin], check=True, capture_output=True, cwd=tmp
            )
            return float(json.loads(Path(tmp, "timing.json").read_text()))

    overhead = run("nsqbox, ") - run("")
    print(
        f"pytest, per test: setup + teardown of the nsqbox fixture (median of 999): {ms(overhead)}"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--subprocess", action="store_true", help="also subprocess mode")
    parser.add_argument("--pytest", action="store_true", help="also through pytest")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    bench_import()
    bench_cold("THREAD", 5)
    for where, root in data_roots():
        try:
            bench_in_process(where, root)
        finally:
            shutil.rmtree(root, ignore_errors=True)
    if args.subprocess:
        bench_cold("SUBPROCESS", 5)
    if args.pytest:
        bench_pytest()


if __name__ == "__main__":
    main()
