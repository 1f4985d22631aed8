"""Start-up time: ``nsqbox up`` to ready and the pytest fixture's first box, beside the floor.

    python bench/bench_startup.py                              # 10 rounds, this checkout
    python bench/bench_startup.py --other /work/wt-87a76ac     # and another checkout beside it
    python bench/bench_startup.py --other ../old --other ../older   # several
    python bench/bench_startup.py --rounds 20 --nsqd-count 3

Each round runs, one after another (the order flips every round, so neither checkout always
goes first on a machine whose load drifts):

* the floor, ``python -c "import trio"``: no nsqbox start-up can beat it;
* ``python -m nsqbox up --ephemeral-ports --ready-json --data-path <fresh tmp>``, timed to its
  ``--ready-json`` line on stdout and to the moment every service (each nsqd's, nsqlookupd's
  and the admin service's HTTP port, from that line) has answered ``GET /ping`` with ``200``;
  then SIGTERM;
* the fixture's first box: a fresh interpreter that imports ``nsqbox.testing.boxes`` and starts
  the box the ``nsqbox`` fixture starts by default (nsqd + nsqlookupd, registered, in a
  thread), timed from the spawn to its report, and in the process from the first import
  (what docs/testing.md quotes).

Clocks start just before the spawn, so interpreter start-up and imports count. Bytecode is
cached (in a temporary ``PYTHONPYCACHEPREFIX``, filled by a warm-up run of each command), as
for an installed package, even where ``PYTHONDONTWRITEBYTECODE`` is set. The CPU column is
the process's user + system time by then: it tells start-up work apart from waiting on a busy
machine. ``--other PATH`` (repeatable) runs the same commands from another checkout (a git
worktree): with ``PATH/.venv/bin/python`` if it has one, else this Python, and always with
``PYTHONPATH=PATH`` and ``PATH`` as the working directory, so its ``nsqbox`` is the one run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REQUEST = b"GET /ping HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
#: Give up on a run after this many seconds.
RUN_TIMEOUT = 60.0

#: The fixture's first box in a fresh interpreter; prints one JSON line once it is up.
FIRST_BOX = """\
import time
started = time.perf_counter()
import json, os, sys, tempfile
from nsqbox.testing.boxes import start_box
from nsqbox.testing.config import ClusterSpec
box = start_box(ClusterSpec(), sys.argv[1])
elapsed = time.perf_counter() - started
print(json.dumps({"in_process": elapsed, "cpu": time.process_time()}), flush=True)
box.stop()
"""


@dataclass(frozen=True)
class Checkout:
    """A source tree to time, and the Python that runs it."""

    label: str
    root: Path
    python: str
    env: dict[str, str]


@dataclass
class Series:
    """The samples of one measure: wall seconds and CPU seconds."""

    name: str
    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)

    def row(self) -> str:
        """``name  min  median  max  cpu`` in milliseconds."""
        if not self.wall:
            return f"{self.name:<44} (no runs)"
        ms = sorted(s * 1000 for s in self.wall)
        cpu = f"{statistics.median(self.cpu) * 1000:7.0f}" if self.cpu else "      -"
        return f"{self.name:<44} {ms[0]:6.0f} {statistics.median(ms):7.0f} {ms[-1]:6.0f}  {cpu}"


def revision(root: Path) -> str:
    """The checkout's short commit, with ``+`` when its tracked files differ from it."""
    try:
        head = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(root), "diff", "--quiet", "HEAD", "--", "nsqbox"], check=False
        ).returncode
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+" if dirty else "")


def checkout(label: str, root: Path, python: str | None, pycache: str) -> Checkout:
    """``root``'s Python (``python``, its ``.venv``, or this one) and its environment."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = pycache
    env["PYTHONPATH"] = str(root)  # this tree's nsqbox, whatever the Python has installed
    venv = root / ".venv" / "bin" / "python"
    chosen = python or (str(venv) if venv.exists() else sys.executable)
    return Checkout(f"{label} {revision(root)}", root, chosen, env)


def cpu_seconds(pid: int) -> float | None:
    """User + system CPU time ``pid`` has used so far (Linux ``/proc``), or None."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            fields = stat.read().rpartition(")")[2].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime


def ping(address: str) -> bool:
    """One ``GET /ping`` to ``host:port``; True on ``200``."""
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=1.0) as sock:
            sock.sendall(REQUEST)
            reply = b""
            while b"\r\n" not in reply:
                chunk = sock.recv(4096)
                if not chunk:
                    return False
                reply += chunk
            return reply.startswith(b"HTTP/1.1 200 ")
    except OSError:
        return False


def time_floor(tree: Checkout, floor: Series) -> None:
    """``python -c "import trio"``: wall time to exit, and its CPU time."""
    started = time.perf_counter()
    process = subprocess.Popen([tree.python, "-c", "import trio"], env=tree.env)
    _, status, usage = os.wait4(process.pid, 0)
    floor.wall.append(time.perf_counter() - started)
    floor.cpu.append(usage.ru_utime + usage.ru_stime)
    process.returncode = os.waitstatus_to_exitcode(status)
    if process.returncode:
        raise RuntimeError(f"{tree.python} -c 'import trio' exited {process.returncode}")


def time_up(tree: Checkout, nsqd_count: int, ready: Series, pinged: Series) -> None:
    """``nsqbox up``: to its ready line, and to every service answering ``/ping``."""
    with tempfile.TemporaryDirectory(prefix="nsqbox-startup-") as data:
        command = [
            tree.python,
            "-m",
            "nsqbox",
            "up",
            "--ephemeral-ports",
            "--ready-json",
            f"--data-path={data}",
            f"--nsqd-count={nsqd_count}",
        ]
        started = time.perf_counter()
        process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=tree.env,
            cwd=tree.root,
        )
        try:
            assert process.stdout is not None
            line = process.stdout.readline()  # the box logs to stderr; stdout is the line
            if not line:
                raise RuntimeError(f"{' '.join(command)} exited {process.wait()} before ready")
            ready.wall.append(time.perf_counter() - started)
            ready.cpu.append(cpu_seconds(process.pid) or 0.0)
            addresses = json.loads(line)
            pending = {
                *addresses["nsqd_http_addresses"],
                addresses["lookupd_http_address"],
                addresses["admin_http_address"],
            }
            while pending:
                if time.perf_counter() - started > RUN_TIMEOUT:
                    raise TimeoutError(f"no /ping answer from {sorted(pending)}")
                pending = {address for address in pending if not ping(address)}
                if pending:
                    time.sleep(0.0005)  # leave the CPU to the box between rounds
            pinged.wall.append(time.perf_counter() - started)
            pinged.cpu.append(cpu_seconds(process.pid) or 0.0)
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(RUN_TIMEOUT)
            if process.stdout is not None:
                process.stdout.close()


def time_first_box(tree: Checkout, spawn: Series, in_process: Series) -> None:
    """The fixture's first box in a fresh interpreter: from the spawn, and in the process."""
    with tempfile.TemporaryDirectory(prefix="nsqbox-startup-") as data:
        started = time.perf_counter()
        process = subprocess.Popen(
            [tree.python, "-c", FIRST_BOX, data],
            stdout=subprocess.PIPE,
            env=tree.env,
            cwd=tree.root,
        )
        assert process.stdout is not None
        with process.stdout:
            line = process.stdout.readline()
            elapsed = time.perf_counter() - started
            if process.wait(RUN_TIMEOUT) or not line:
                raise RuntimeError(f"the first-box probe exited {process.returncode}")
        report = json.loads(line)
        spawn.wall.append(elapsed)
        spawn.cpu.append(float(report["cpu"]))
        in_process.wall.append(float(report["in_process"]))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rounds", type=int, default=10, help="alternating rounds (10)")
    parser.add_argument("--nsqd-count", type=int, default=1, help="nsqbox up --nsqd-count (1)")
    parser.add_argument("--python", help="the Python for this checkout (default: this one)")
    parser.add_argument(
        "--other",
        type=Path,
        action="append",
        default=[],
        help="another checkout to time beside this one (repeatable)",
    )
    parser.add_argument("--no-first-box", action="store_true", help="skip the fixture's box")
    args = parser.parse_args()

    pycache = tempfile.mkdtemp(prefix="nsqbox-pycache-")
    try:
        trees = [checkout("this", ROOT, args.python, pycache)]
        for other in args.other:
            trees.append(checkout("other", other.resolve(), None, pycache))
        floor = Series('floor: python -c "import trio"')
        runs: list[Callable[[], None]] = [partial(time_floor, trees[0], floor)]
        table = [floor]
        for tree in trees:
            ready = Series(f"{tree.label}: up, ready line")
            pinged = Series(f"{tree.label}: up, every /ping")
            runs.append(partial(time_up, tree, args.nsqd_count, ready, pinged))
            table += [ready, pinged]
        for tree in trees if not args.no_first_box else []:
            spawn = Series(f"{tree.label}: first fixture box, from spawn")
            inside = Series(f"{tree.label}: first fixture box, in process")
            runs.append(partial(time_first_box, tree, spawn, inside))
            table += [spawn, inside]

        warm = [Series("") for _ in range(2)]  # the warm-up fills the bytecode cache
        time_floor(trees[0], warm[0])
        for tree in trees:
            time_up(tree, args.nsqd_count, warm[0], warm[1])
            if not args.no_first_box:
                time_first_box(tree, warm[0], warm[1])

        for round_ in range(args.rounds):
            for run in runs if round_ % 2 == 0 else reversed(runs):
                run()
    finally:
        shutil.rmtree(pycache, ignore_errors=True)

    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"start-up, {args.rounds} alternating rounds, nsqd x{args.nsqd_count}; "
        f"{os.cpu_count()} CPUs, load average {load:.1f} at the end"
    )
    for tree in trees:
        print(f"  {tree.label}: {tree.root} ({tree.python})")
    print(f"{'(ms)':<44} {'min':>6} {'median':>7} {'max':>6}  {'cpu':>7}")
    for series in table:
        print(series.row())


if __name__ == "__main__":
    main()
