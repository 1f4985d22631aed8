"""A server's instructions per message under callgrind, for ``side_by_side.py --callgrind``.

Wall-clock rates on a shared machine move 10-20% between identical runs; the number of
instructions a server runs for the same messages does not depend on the machine's load.
The server runs under ``valgrind --tool=callgrind --instr-atstart=no`` (start-up is not
instrumented, so it is only a few times slower than without valgrind). Around one row's
load, :meth:`Callgrind.counted` turns instrumentation on (``callgrind_control -i on``),
counts an idle stretch before and after (the server's timers: their rate per second is
taken off the load's count), zeroes the counters, lets the load run, dumps
(``callgrind_control -d``) and turns instrumentation off. Messages are counted from the
server's ``/stats`` before and after (published: the topics' ``message_count``; consumed:
what left the channels' depth and in-flight), outside the instrumented stretch, so the
figure is instructions per message whatever the load's duration.

The HTTP rows' loads are paced (:class:`http_pub_load.Pace`): a fixed number of requests,
each sent once the server sleeps waiting for it. After an answer the server reads again; if
the next request is not there yet it waits for it (trio's ``wait_readable``, a loop turn and
a ``BlockingIOError``: about 34,000 instructions under callgrind), and whether it is there
depends on how the server's and the client's turns fall, not on the code. Unpaced, one
connection met 0.01 to 0.45 waits a request from run to run under callgrind (about 0.1
natively on 2 cores), and identical servers' /pub figures were up to 14% apart. Paced,
every request meets exactly one wait, both servers alike, so a pair's difference is the
code's; the count of waits (calls of ``epoll_ctl``: trio arms its epoll once per wait) is in
the table, per request, to show it. The figures include that wait: a /pub is about 34,000
instructions dearer than one whose next request is already there when the server reads,
so a change's share of a /pub (about 80,000 instructions without the wait) is about 30%
smaller than at no waits: compare the pairs' differences too, not only their ratios.

What it cannot see: how the kernel splits what clients send into reads differs with the
server's speed (a server 50 times slower reads fuller buffers), so per-read costs are
spread over more messages than at full speed, the same for both servers of a pair.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from http_pub_load import Pace
from steady import STEADY_CAPTION

#: side_by_side.py --callgrind's workloads counted in instructions, and the ones measured as
#: without it (memory, which is not noisy).
COUNTED = ("tcp", "memory", "pub", "disk", "http", "latency")
MEMORY = ("memory", "idle")
MEMORY_ROWS = ("rss_idle", "rss_1m", "idle_identify", "idle_sub")
WALL_CLOCK_ONLY = """Not counted in instructions: the RSS and idle connection rows
(memory, measured as without --callgrind: not noisy), the latency p50/p99 (times; the work
behind them is the row "e2e latency rows' load"), real nsqd (callgrind counts nsqbox's
Python, not Go), the floor, the h11 row and the bare loops (not nsqbox)."""
#: Suffix of a row's key for the server's instructions per message during it.
INSTR = "@instr"
#: Suffix of the same figure with the idle rate left in (the server's timers, which do less
#: work while it is busy than while it is idle: the truth is between the two).
RAW = "@instr_raw"
#: Seconds of idle server counted before each load (its timers' rate).
IDLE_SECONDS = 2.0
#: Seconds left after a load's client returns, for the server's tail of work.
SETTLE_SECONDS = 0.3
#: Suffix of a row's key for the server's waits for a read (calls of ``epoll_ctl``) per message.
WAITS = "@waits"
#: The HTTP rows' paced loads: requests on one connection (/pub, and /mpub of 100 messages).
HTTP_PUB_REQUESTS = 2_000
HTTP_MPUB_REQUESTS = 300
#: A directory to keep each load's profile in (for ``callgrind_annotate``), if set.
KEEP = os.environ.get("NSQBOX_CALLGRIND_KEEP", "")


def wrap(command: list[str], out: Path) -> list[str]:
    """``command`` under callgrind, not instrumented until told; its profiles ``out.N``."""
    return [
        "valgrind",
        "--tool=callgrind",
        "--instr-atstart=no",
        f"--callgrind-out-file={out}",
        *command,
    ]


def calls_of(profile: str, function: str) -> int:
    """How many times ``function`` was called in a callgrind profile (its ``calls=`` lines,
    from every caller; names are compressed to ``(id)`` after their first mention)."""
    names: dict[str, str] = {}
    current = ""
    total = 0
    for line in profile.splitlines():
        if line.startswith(("fn=(", "cfn=(")):
            ident, _, name = line.partition("=")[2].partition(" ")
            if name:
                names[ident] = name
            if line[0] == "c":
                current = names.get(ident, "")
        elif line.startswith("calls=") and current == function:
            total += int(line[6:].split()[0])
    return total


def messages(http: int, kind: str) -> float:
    """The server's count of ``kind`` ("published" or "consumed") messages so far.

    Consumed is negative (what is still queued or in flight); the difference of two
    readings is what left the channels meanwhile, when nothing was published.
    """
    url = f"http://127.0.0.1:{http}/stats?format=json"
    with urllib.request.urlopen(url, timeout=120) as reply:
        stats = json.load(reply)
    topics = stats.get("topics") or stats.get("data", {}).get("topics") or []
    if kind == "published":
        return float(sum(t["message_count"] for t in topics))
    held = sum(
        c["depth"] + c["in_flight_count"] + c["deferred_count"]
        for t in topics
        for c in t["channels"]
    )
    return -float(held)


class Callgrind:
    """The callgrind run of one server: ``pid`` (valgrind's, which is the server's)."""

    def __init__(self, pid: int, out: Path) -> None:
        self.pid = pid
        self.out = out
        self.dumps = 0

    def _control(self, *args: str) -> None:
        subprocess.run(
            ["callgrind_control", *args, str(self.pid)],
            check=True,
            capture_output=True,
            timeout=120,
        )

    def pace(self, batch: int) -> Pace:
        """An HTTP row's paced load on this server (``batch``: messages per /mpub, or 0)."""
        return Pace(self.pid, HTTP_MPUB_REQUESTS if batch else HTTP_PUB_REQUESTS)

    def _dump(self, keep: str = "") -> tuple[int, int]:
        """Dump the counters (since the last zero or dump); their total, and the server's
        waits for a read meanwhile. ``keep``: the name to keep the profile under in
        :data:`KEEP`'s directory."""
        self._control("-d")
        self.dumps += 1
        dump = Path(f"{self.out}.{self.dumps}")
        if KEEP and keep:
            shutil.copy(dump, Path(KEEP) / f"{keep}.{self.pid}.out")
        text = dump.read_text(errors="replace")
        match = re.search(r"^summary: (\d+)", text, re.M)
        if match is None:
            raise SystemExit(f"no summary in {self.out}.{self.dumps}")
        return int(match.group(1)), calls_of(text, "epoll_ctl")

    @contextmanager
    def counted(self, results: dict[str, float], key: str, http: int, kind: str) -> Iterator[None]:
        """Record in ``results[key + INSTR]`` the server's instructions per ``kind`` message
        during the block, less its idle rate over the block's duration."""
        before = messages(http, kind)
        self._control("-i", "on")
        self._control("-z")
        started = time.monotonic()
        time.sleep(IDLE_SECONDS)
        idle = self._dump()[0]
        idle_seconds = time.monotonic() - started
        started = time.monotonic()
        yield
        time.sleep(SETTLE_SECONDS)
        total, waits = self._dump(key)
        took = time.monotonic() - started
        time.sleep(IDLE_SECONDS)  # idle again: the rate is the mean of before and after
        idle += self._dump()[0]
        idle_rate = idle / (idle_seconds + time.monotonic() - started - took)
        self._control("-i", "off")
        count = messages(http, kind) - before
        if count <= 0:
            raise SystemExit(f"{key}: no {kind} messages counted")
        results[key + INSTR] = (total - idle_rate * took) / count
        results[key + RAW] = total / count
        results[key + "@idle"] = idle_rate * took / total
        results[key + WAITS] = waits / count


def callgrind_loads(quick: bool) -> dict[str, float]:
    """side_by_side's Settings for a server about 50 times slower: fixed counts (bench/'s
    Python clients), so both servers of a pair get the same messages; HTTP and the latency
    probe at about 1/50 of their load."""
    scale = 0.5 if quick else 1.0
    return {
        "runfor": 0.4 * scale,  # MPUB 120,000 messages (disk: 40,000), consume 60,000
        "pub_count": int(20_000 * scale),
        "http_seconds": 8.0 * scale,  # unused: the HTTP loads are paced (Callgrind.pace)
        "http_connections": 1,  # one request at a time: one wait each (Pace), every run alike
        # 16 s (quick): a load that moves with how many PUBs each wake-up finds is counted
        # over 6,400 messages, its topic made before the count (bench/steady.py)
        "latency_seconds": 32.0 * scale,
        "latency_rate": 400,
        "latency_tick": 0.05,  # 20 PUBs a send, as 20,000 a second every millisecond
        "mem_count": int(200_000 * scale),
    }


def counted_only(results: dict[str, float]) -> tuple[dict[str, float], str]:
    """A counted run's instruction figures (its wall-clock ones mean nothing), and a line."""
    kept = {k: v for k, v in results.items() if k.endswith((INSTR, RAW, "@idle", WAITS))}
    shown = ", ".join(
        f"{k.removesuffix(INSTR)} {v:,.0f} instructions/msg (idle "
        f"{kept[k.removesuffix(INSTR) + '@idle']:.1%} of them, taken off)"
        for k, v in kept.items()
        if k.endswith(INSTR)
    )
    return kept, shown


def describe_loads(loads: dict[str, float]) -> str:
    """What :func:`callgrind_loads` drives, in words."""
    runfor = loads["runfor"]
    return (
        f"MPUB 200 x 200 B {runfor * 300_000:,.0f} msgs then consume {runfor * 150_000:,.0f}; "
        f"MPUB 1,000 x 100 B {loads['mem_count']:,}; PUB {loads['pub_count']:,}; "
        f"--mem-queue-size 0 MPUB {runfor * 100_000:,.0f}; HTTP /pub {HTTP_PUB_REQUESTS:,} "
        f"and /mpub {HTTP_MPUB_REQUESTS:,} requests from one connection, each sent once the "
        "server sleeps waiting for it (one wait a request, in the figures: the column waits); "
        f"latency probe {loads['latency_rate']} PUB/s, sent every {loads['latency_tick']:g} s, "
        f"for {loads['latency_seconds']:g} s after "
        f"1 s of warm-up; {STEADY_CAPTION}"
    )
