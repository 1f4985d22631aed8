"""How fast a step replay publishes under the manual clock (``nsqbox replay --step``).

    python bench/step_replay_bench.py                 # 100,000 messages of 100 bytes, 1 ms apart

Writes a recording whose messages are ``--gap-ms`` apart, starts a box with a manual clock in
a thread of this process, hands the file to its nsqd (``replay(path, topic, step=True)``: the
upload and the node's check of the whole file), then moves the clock past the last message in
one advance, which publishes every message at its broker time before it returns. Prints the
two times, the advance's messages per second and the process's peak RSS before and after (the
node reads the file a line at a time; what grows is the topic's memory queue).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

from nsqbox.snapshot.files import SnapshotWriter, open_for_writing
from nsqbox.snapshot.format import Header
from nsqbox.testing import NSQBox
from nsqbox.testing.boxes import ThreadBox
from nsqbox.testing.config import ClusterSpec

T0 = 1_795_833_104_000_000_000


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--messages", type=int, default=100_000)
    parser.add_argument("--gap-ms", type=int, default=1)
    args = parser.parse_args()
    root = Path(tempfile.mkdtemp(prefix="step-bench-"))
    path = root / "rec.jsonl"
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(nsqbox_snapshot=1, nodes=1, saved_at_ns=T0))
        writer.topic(0, "rec", False)
        for i in range(args.messages):
            stamp = T0 + i * args.gap_ms * 1_000_000
            writer.message(0, "rec", None, b"%016x" % i, stamp, 0, b"x" * 100)
        writer.finish()
    box = ThreadBox(ClusterSpec(clock="manual"), str(root / "box"))
    try:
        with NSQBox(box, timeout=600) as handle:
            topic = handle.name("bench")
            before = _rss_mb()
            start = time.perf_counter()
            at_once = handle.replay(path, topic, step=True)
            handed = time.perf_counter() - start
            start = time.perf_counter()
            handle.clock.advance(f"{args.messages * args.gap_ms}ms")
            took = time.perf_counter() - start
            published = handle.wait_for(topic).message_count
            print(
                f"{args.messages} messages {args.gap_ms} ms apart ({path.stat().st_size / 1e6:.1f} "
                f"MB): handed over in {handed:.2f}s ({at_once} at once); one advance published "
                f"{published} in {took:.2f}s ({published / took:,.0f} messages/s); peak RSS "
                f"{before:.0f} MB before, {_rss_mb():.0f} MB after"
            )
    finally:
        box.stop()


if __name__ == "__main__":
    main()
