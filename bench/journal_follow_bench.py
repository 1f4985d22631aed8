"""What following the journal costs per event, in one process, without sockets.

    python -m bench.journal_follow_bench                  # median of 5, µs/event
    python -m bench.journal_follow_bench --profile        # and a cProfile top list

Drives a real :class:`~nsqbox.nsqd.domain.nsqd.NSQD` the way ``bench.trace_bench``'s
workload does (its consumer costs nothing, as :mod:`bench.journal_loop`'s): runs of
``--burst`` PUBs (one connection's in one turn, :meth:`~.topic.Topic.put_each`), each run
sent on at once to a consumer and FINished in one run, about three journal events a
message, ``--events`` events in all. A :class:`~.journal_follow.Follower` of the topic (what
``nsqbox trace TOPIC`` reads with) follows it as the stream does: every ``--poll`` runs
(50 ms at 10,000 msgs/s) it reads pieces of 250 events, each encoded as JSON lines, until it
has caught up; with ``--behind`` it reads only once everything is recorded (a follower that
fell behind). Only the reads and the encoding are timed; the figure is their time over the
events read, the median (and range) of ``--repeat`` runs.
"""

from __future__ import annotations

import argparse
import cProfile
import gc
import pstats
import statistics
import sys
import tempfile
import time

import msgspec

from bench.journal_loop import Sink
from nsqbox.nsqd.domain.journal_follow import Follower
from nsqbox.nsqd.domain.journal_views import EventFilter
from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.domain.options import NSQDOptions

PIECE = 250


def run(events: int, burst: int, poll: int, behind: bool, prof: cProfile.Profile | None) -> float:
    """One run: µs of reading and encoding per event followed."""
    options = NSQDOptions(data_path=tempfile.mkdtemp(prefix="nsqbox-follow-"))
    options.mem_queue_size = 10_000_000
    options.journal_size = max(100_000, events)
    nsqd = NSQD(options)
    journal = nsqd.journal
    assert journal is not None
    topic = nsqd.get_topic("traced")
    channel = topic.get_channel("work")
    topic.start()
    sink = Sink()
    channel.add_client(sink)
    sink.ready_count = 2500
    channel.client_ready(sink, nsqd.now())
    follower = Follower(journal, EventFilter(topic="traced"))
    encode_lines = msgspec.json.Encoder().encode_lines
    bodies = [b"x" * 100] * burst
    took = 0.0
    got = 0
    gc.collect()

    def follow() -> None:
        nonlocal took, got
        if prof is not None:
            prof.enable()
        began = time.process_time()
        while follower.pending():
            page = follower.read(PIECE)
            got += len(page.events)
            encode_lines(page.events)
        took += time.process_time() - began
        if prof is not None:
            prof.disable()

    for runs in range(1, events // (3 * burst) + 1):
        topic.put_each(bodies, 0.0, nsqd.now(), None)
        ids = [m.id for m in sink.out]
        sink.out.clear()
        channel.finish_messages(sink, ids, nsqd.now())
        channel.client_ready(sink, nsqd.now())
        if runs % poll == 0:
            journal.trim()  # the queue scan's
            if not behind:
                follow()
    journal.trim()
    follow()
    return took * 1e6 / max(got, 1)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--burst", type=int, default=10, help="PUBs per run")
    parser.add_argument("--poll", type=int, default=50, help="runs between reads")
    parser.add_argument("--behind", action="store_true", help="read once, at the end")
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--profile", action="store_true", help="a cProfile top list too")
    args = parser.parse_args(argv)
    figures = [
        run(args.events, args.burst, args.poll, args.behind, None) for _ in range(args.repeat)
    ]
    print(
        f"follow: {statistics.median(figures):.2f} µs/event"
        f" [{min(figures):.2f}..{max(figures):.2f}] over {args.events:,} events",
        flush=True,
    )
    if args.profile:
        prof = cProfile.Profile()
        run(args.events, args.burst, args.poll, args.behind, prof)
        pstats.Stats(prof, stream=sys.stdout).sort_stats("tottime").print_stats(15)


if __name__ == "__main__":
    main()
