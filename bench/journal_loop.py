"""The journal's cost per message in one process, without sockets: for callgrind.

    valgrind --tool=callgrind python bench/journal_loop.py --workload pub --count 20000
    python bench/journal_loop.py --callgrind --repeat 3       # every workload, on vs off

Drives a real :class:`~nsqbox.nsqd.domain.nsqd.NSQD` (memory queues, its journal on or
``--journal-size=0``) the way ProtocolV2 does, with a consumer whose sends cost nothing:

- ``pub``: PUBs in runs of 100 (one connection's in one turn, as ProtocolV2 hands them
  over), nobody consuming;
- ``pubsub``: the same with a consumer at RDY 2500 FINing each run (the latency row:
  every message sent on as it is published);
- ``mpub``: MPUBs of 200 with nobody consuming, then RDY and FINs in runs of 200.

Every 100 messages the queue scan's :meth:`Journal.trim` runs, as it would every 100 ms at
1,000 messages a second (more often than a busy server: the ring's upkeep is not
understated). With ``--callgrind`` each figure is instructions per message: a run of
``2 * count`` minus a run of ``count``, over ``count`` (start-up and imports cancel out);
instruction counts do not depend on the machine's load. Each is measured ``--repeat``
times (on and off alternating) and reported as the median and the range; every run has
the same ``PYTHONHASHSEED``, so dicts and sets lay out alike and only the clock differs.
"""

from __future__ import annotations

import argparse
import gc
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

from nsqbox.nsqd.domain.message import Message
from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions

RUN = 100


class Sink:
    """A consumer whose output costs nothing (the channel's Consumer protocol)."""

    def __init__(self) -> None:
        self.id = 1
        self.ready_count = 0
        self.in_flight_count = 0
        self.sample_rate = 0
        self.msg_timeout = 60.0
        self.in_ring = False
        self.remote_address = "127.0.0.1:1"
        self.user_agent = "journal_loop"
        self.hostname = "bench"
        self.client_id = "bench"
        self.out: list[Message] = []

    def can_take(self) -> bool:
        return self.in_flight_count < self.ready_count

    def out_room(self) -> int:
        return 1 << 30

    def send_message(self, msg: Message) -> None:
        self.out.append(msg)

    def send_messages(self, msgs: list[Message]) -> None:
        self.out += msgs

    def close(self) -> None:
        self.ready_count = 0


def drive(workload: str, count: int, journal: bool) -> None:
    """``count`` messages of ``workload`` through a fresh NSQD."""
    data = tempfile.mkdtemp(prefix="nsqbox-loop-")
    options = NSQDOptions(data_path=data, mem_queue_size=10_000_000)
    if not journal:
        options.journal_size = 0
    nsqd = NSQD(options)
    topic = nsqd.get_topic("t")
    channel = topic.get_channel("c")
    topic.start()
    sink = Sink()
    channel.add_client(sink)  # type: ignore[arg-type]
    trim = nsqd.journal.trim if nsqd.journal is not None else (lambda: None)
    body = b"x" * 200
    gc.collect()
    if workload == "mpub":
        bodies = [body] * 200
        for _ in range(count // 200):
            topic.put_messages(bodies, 0.0, nsqd.now(), None)
            trim()
        sink.ready_count = 2500
        while channel.depth() or sink.out:
            channel.client_ready(sink, nsqd.now())  # type: ignore[arg-type]
            while sink.out:
                run, sink.out = sink.out[:200], sink.out[200:]
                channel.finish_messages(sink, [m.id for m in run], nsqd.now())  # type: ignore[arg-type]
            trim()
        return
    if workload == "pubsub":
        sink.ready_count = 2500
        channel.client_ready(sink, nsqd.now())  # type: ignore[arg-type]
    run = [body] * RUN
    for _ in range(count // RUN):
        topic.put_each(run, 0.0, nsqd.now(), None)  # a connection's run of PUBs in one turn
        if workload == "pubsub":
            ids = [m.id for m in sink.out]
            sink.out.clear()
            channel.finish_messages(sink, ids, nsqd.now())  # type: ignore[arg-type]
            channel.client_ready(sink, nsqd.now())  # type: ignore[arg-type]
        trim()


def _instructions(workload: str, count: int, journal: bool) -> int:
    cmd = [
        "valgrind",
        "--tool=callgrind",
        "--callgrind-out-file=/dev/null",
        sys.executable,
        __file__,
        f"--workload={workload}",
        f"--count={count}",
        *([] if journal else ["--off"]),
    ]
    env = {**os.environ, "PYTHONHASHSEED": "0"}
    err = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stderr
    match = re.search(r"Collected : (\d+)", err)
    if match is None:
        raise SystemExit(err[-2000:])
    return int(match.group(1))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--workload", choices=("pub", "pubsub", "mpub"), default="pub")
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--off", action="store_true", help="--journal-size=0")
    parser.add_argument("--callgrind", action="store_true", help="on vs off, every workload")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each, on and off")
    parser.add_argument(
        "--workloads", default="pub,pubsub,mpub", help="comma-separated, with --callgrind"
    )
    parser.add_argument("--side", choices=("both", "on", "off"), default="both")
    args = parser.parse_args(argv)
    if not args.callgrind:
        started = time.perf_counter()
        drive(args.workload, args.count, not args.off)
        took = time.perf_counter() - started
        print(f"{args.workload}: {args.count / took:,.0f} msgs/s", file=sys.stderr)
        return
    sides = {"both": (True, False), "on": (True,), "off": (False,)}[args.side]
    for workload in args.workloads.split(","):
        per: dict[bool, list[float]] = {side: [] for side in sides}
        for run in range(args.repeat):
            for journal in sides if run % 2 == 0 else sides[::-1]:
                one = _instructions(workload, args.count, journal)
                two = _instructions(workload, 2 * args.count, journal)
                per[journal].append((two - one) / args.count)
        line = [f"{workload}:"]
        for side in sides:
            runs = per[side]
            line.append(
                f"{'on' if side else 'off'} {statistics.median(runs):8,.0f}"
                f" [{min(runs):,.0f}..{max(runs):,.0f}]"
            )
        if len(sides) == 2:
            extra = statistics.median(per[True]) / statistics.median(per[False]) - 1
            line.append(f"({extra:+.1%})")
        print("  ".join(line), "instructions/msg (median [range])", flush=True)


if __name__ == "__main__":
    main()
