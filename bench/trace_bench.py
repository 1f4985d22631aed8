"""Whether ``nsqbox trace`` keeps up with a busy topic, and what following it costs publishers.

    python bench/trace_bench.py                         # 10,000 PUB/s, 5 s runs, 3 pairs
    chrt -f 50 python bench/trace_bench.py --rate 20000 --seconds 10 --pairs 5
    chrt -f 50 python bench/trace_bench.py --trace-prefix "chrt -o 0"   # the box's own cost

Starts ``nsqbox up`` (a child; ports the OS picks) and a consumer of the topic (``nsqbox tail``
on a channel of its own, output thrown away, so every message is published, delivered and
finished: about three journal events each). Then, in alternating pairs, a run without a
trace and a run with ``nsqbox trace TOPIC --json`` reading the topic (a child, whose lines
another child reads and times, so no thread takes the publisher's GIL): each run publishes
``--rate`` messages a second for ``--seconds``, a burst of ``rate / 1000`` PUBs every
millisecond over one connection (pipelined, one write each), and times each burst's round
trip.

For each run: the rate achieved, each burst's round trip (median, 99th percentile, worst, in
microseconds), the CPU seconds the box used and how long it waited for a core (ready to run,
not running: ``/proc/PID/schedstat``); with the trace, the events it printed, their
lag (the time a line arrived at the reader minus the event's broker time: median, 99th
percentile, worst, in ms), how long after the last publish the trace had printed a FIN for
every message, and the journal entries it said it lost. Figures go to stdout as JSON, with
the load average before and after.

On a 2-core machine the trace and its reader are busy processes beside the box: with
``--trace-prefix`` they run under a command (``nice -n 19``, or ``chrt -o 0`` when the bench
runs under ``chrt -f``) that gives the box and the publisher the cores first, so what is left
of the publishers' p99 is what following costs the box's loop itself.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.snapshot_bench import _box, _stop

TOPIC = "traced"


def _percentile(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Publisher:
    """One connection publishing one message at a time, each round trip timed."""

    def __init__(self, address: str) -> None:
        host, _, port = address.rpartition(":")
        self.sock = socket.create_connection((host, int(port)))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock.sendall(b"  V2")

    def _frame(self) -> bytes:
        frame = b""
        while len(frame) < 4:
            frame += self.sock.recv(4 - len(frame))
        (size,) = struct.unpack(">I", frame)
        rest = b""
        while len(rest) < size:
            rest += self.sock.recv(size - len(rest))
        return rest[4:]

    def pub(self, bodies: list[bytes]) -> None:
        """PUB each body (one write for all of them), then read every answer."""
        head = b"PUB %s\n" % TOPIC.encode()
        self.sock.sendall(b"".join(head + struct.pack(">I", len(b)) + b for b in bodies))
        for _ in bodies:
            while (answer := self._frame()) == b"_heartbeat_":
                self.sock.sendall(b"NOP\n")
            if answer != b"OK":
                raise RuntimeError(f"PUB answered {answer!r}")

    def close(self) -> None:
        self.sock.close()


def _publish(address: str, rate: int, seconds: float) -> tuple[list[float], float, int]:
    """Publish at ``rate`` for ``seconds``: every millisecond ``rate / 1000`` PUBs written
    at once (pipelined, as a busy producer's connection carries them); each such burst's
    round trip (s), the elapsed time, and how many were published."""
    publisher = _Publisher(address)
    per_tick = max(1, rate // 1000)
    ticks = int(rate * seconds) // per_tick
    latencies: list[float] = []
    start = time.perf_counter()
    for i in range(ticks):
        due = start + i / 1000 * (1000 * per_tick / rate)
        if (now := time.perf_counter()) < due:
            time.sleep(due - now)  # no spinning: the bench may run under chrt
        bodies = [b"message %08d" % (i * per_tick + k) for k in range(per_tick)]
        before = time.perf_counter()
        publisher.pub(bodies)
        latencies.append(time.perf_counter() - before)
    elapsed = time.perf_counter() - start
    publisher.close()
    return latencies, elapsed, ticks * per_tick


def _waited(pid: int) -> float:
    """Seconds process ``pid``'s main thread has waited for a core (ready, not running)."""
    return int(Path(f"/proc/{pid}/schedstat").read_text().split()[1]) / 1e9


def _cpu(pid: int) -> float:
    """CPU seconds (user + system) process ``pid`` has used."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def read_lines(expect: int) -> None:
    """The reader child (``--read N``): the trace's lines on stdin, timed as they come; exits
    once it saw ``N`` FINs (or at EOF), printing what it saw as one JSON line on stderr."""
    lags: list[float] = []
    finished = 0
    done_at = None
    for line in sys.stdin.buffer:
        arrived = time.time_ns()
        event = json.loads(line)
        lags.append((arrived - event["time"]) / 1e6)
        if event["kind"] == "finished":
            finished += 1
            if finished >= expect:
                done_at = time.time()
                break
    summary = {"events": len(lags), "finished": finished, "done_at": done_at}
    summary["lag_ms"] = [round(_percentile(lags, q), 2) for q in (0.5, 0.99, 1.0)]
    sys.stderr.write(json.dumps(summary) + "\n")


class _Trace:
    """``nsqbox trace TOPIC --json`` as a child, its lines read by another child (so that no
    thread of the publishing process takes the GIL from it)."""

    def __init__(self, nsqd_http: str, expect: int, prefix: list[str]) -> None:
        self.process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "nsqbox", "trace", TOPIC, "--json",
             f"--nsqd-http-address={nsqd_http}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )  # fmt: skip
        assert self.process.stderr is not None
        ready = self.process.stderr.readline().decode()
        if "following" not in ready:
            raise SystemExit(f"nsqbox trace did not start: {ready}")
        self.reader = subprocess.Popen(
            [*prefix, sys.executable, "-m", "bench.trace_bench", "--read", str(expect)],
            stdin=self.process.stdout,
            stderr=subprocess.PIPE,
        )
        self.lost = 0
        threading.Thread(target=self._notes, daemon=True).start()

    def _notes(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            text = line.decode()
            if " lost " in text:
                self.lost += int(text.split(" lost ")[1].split()[0])

    def finish(self) -> dict[str, Any]:
        """Wait (20 s at most) for the reader to see every FIN; stop the trace; what it saw."""
        try:
            _, err = self.reader.communicate(timeout=20)
        except subprocess.TimeoutExpired:
            self.process.terminate()
            _, err = self.reader.communicate(timeout=30)
        cpu = _cpu(self.process.pid)
        self.process.terminate()
        self.process.wait(30)
        summary: dict[str, Any] = json.loads(err.decode().strip().splitlines()[-1])
        summary["trace_cpu_s"] = round(cpu, 2)
        return summary


def _run(
    address: str,
    nsqd_http: str,
    rate: int,
    seconds: float,
    traced: list[str] | None,
    box_pid: int,
) -> dict[str, Any]:
    """One run; ``traced``: None (no trace) or the trace's command prefix."""
    trace = None if traced is None else _Trace(nsqd_http, int(rate * seconds), traced)
    cpu = _cpu(box_pid)
    waited = _waited(box_pid)
    latencies, elapsed, published = _publish(address, rate, seconds)
    waited = _waited(box_pid) - waited
    stopped = time.time()
    row: dict[str, Any] = {
        "traced": trace is not None,
        "published": published,
        "rate": round(published / elapsed),
        "burst_us_p50": round(statistics.median(latencies) * 1e6, 1),
        "burst_us_p99": round(_percentile(latencies, 0.99) * 1e6, 1),
        "burst_us_max": round(max(latencies) * 1e6, 1),
        "box_cpu_s": round(_cpu(box_pid) - cpu, 2),
        "box_waited_for_a_core_ms": round(waited * 1000),
    }
    if trace is not None:
        seen = trace.finish()
        row["box_cpu_s"] = round(_cpu(box_pid) - cpu, 2)
        row.update(
            trace_events=seen["events"],
            trace_finished=seen["finished"],
            lag_ms_p50_p99_max=seen["lag_ms"],
            caught_up_s_after_last_pub=(
                None if seen["done_at"] is None else round(seen["done_at"] - stopped, 3)
            ),
            lost_entries=trace.lost,
            trace_cpu_s=seen["trace_cpu_s"],
        )
    return row


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=int, default=10_000, help="PUBs a second")
    parser.add_argument("--seconds", type=float, default=5.0, help="each run's length")
    parser.add_argument("--pairs", type=int, default=3, help="pairs of runs (off, on)")
    parser.add_argument(
        "--trace-prefix", default="", help='a command the trace runs under ("nice -n 19")'
    )
    parser.add_argument("--read", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.read:
        read_lines(args.read)
        return
    report: dict[str, Any] = {
        "rate": args.rate,
        "seconds": args.seconds,
        "load_before": os.getloadavg(),
        "trace_prefix": args.trace_prefix,
    }
    with tempfile.TemporaryDirectory() as tmp:
        box, ready, _ = _box(Path(tmp))
        tcp, http = ready["nsqd_tcp_addresses"][0], ready["nsqd_http_addresses"][0]
        consumer = subprocess.Popen(
            [sys.executable, "-m", "nsqbox", "tail", TOPIC, "--channel", "work",
             f"--nsqd-tcp-address={tcp}"],
            stdout=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            _publish(tcp, 1000, 0.5)  # warm up: the topic, the channel, the consumer
            rows = []
            for _ in range(args.pairs):
                for traced in (None, args.trace_prefix.split()):
                    rows.append(_run(tcp, http, args.rate, args.seconds, traced, box.pid))
                    print(json.dumps(rows[-1]), file=sys.stderr)
            report["runs"] = rows
        finally:
            consumer.terminate()
            consumer.wait(30)
            _stop(box)
    report["load_after"] = os.getloadavg()
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
