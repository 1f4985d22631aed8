"""How closely ``nsqbox replay`` keeps a recording's spacing, and how fast ``--speed max`` is.

    python bench/replay_bench.py                      # 300 messages, gaps of 0 to 20 ms
    python bench/replay_bench.py --messages 1000 --max-messages 200000

Writes a recording (a snapshot file, docs/state.md) whose messages are spaced by random gaps
of 0 to ``--max-gap-ms``, starts ``nsqbox up`` (a child process, ports the OS picks), replays
it at 1x and 10x into topics with no channel, and reads the topics back with the peek route:
each message's broker timestamp, taken when nsqd accepted it. The error of a message is
``(its timestamp - the first's) - (its recorded offset / speed)``; the figures are the median,
99th percentile and worst absolute error in ms, and the replay's total time against the
recording's. Then ``--max-messages`` messages of 100 bytes at ``--speed max`` (MPUB batches):
messages per second. Figures go to stdout as JSON.
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx

from bench.snapshot_bench import _box, _stop
from nsqbox.snapshot.files import SnapshotWriter, open_for_writing
from nsqbox.snapshot.format import Header


def _recording(path: Path, count: int, max_gap_ms: float, body: bytes = b"") -> list[int]:
    """Write a recording of ``count`` messages; their offsets from the first, in ns."""
    rng = random.Random(34)
    start = time.time_ns()
    offsets = [0]
    for _ in range(count - 1):
        offsets.append(offsets[-1] + int(rng.uniform(0, max_gap_ms) * 1e6))
    with open_for_writing(path) as stream:
        writer = SnapshotWriter(stream, Header(nsqbox_snapshot=1, nodes=1, saved_at_ns=start))
        writer.topic(0, "recorded", False)
        for i, offset in enumerate(offsets):
            msg_id = f"{i:016x}".encode()
            writer.message(0, "recorded", None, msg_id, start + offset, 0, body or b"m%d" % i)
        writer.finish()
    return offsets


def _timestamps(client: httpx.Client, http: str, topic: str) -> list[int]:
    found: list[int] = []
    cursor = ""
    while True:
        params: dict[str, str | int] = {"topic": topic, "limit": 1000, "body_bytes": 1}
        if cursor:
            params["cursor"] = cursor
        doc: dict[str, Any] = client.get(f"http://{http}/nsqbox/peek", params=params).json()
        if "messages" not in doc:
            raise SystemExit(f"peek answered {doc}")
        found += [int(m["timestamp"]) for m in doc["messages"]]
        if doc["next"] is None:
            return found
        cursor = doc["next"]


def _replay(http: str, path: Path, topic: str, speed: str) -> float:
    start = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "nsqbox", "replay", str(path), "--topic", topic,
         "--speed", speed, f"--nsqd-http-address={http}"],
        check=True, stdout=subprocess.DEVNULL,
    )  # fmt: skip
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=300)
    parser.add_argument("--max-gap-ms", type=float, default=20.0)
    parser.add_argument("--max-messages", type=int, default=100_000)
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        path = data / "rec.jsonl"
        offsets = _recording(path, args.messages, args.max_gap_ms)
        (data / "box").mkdir()
        proc, ready, _ = _box(data / "box")
        http = ready["nsqd_http_addresses"][0]
        try:
            with httpx.Client(timeout=60, trust_env=False) as client:
                for speed in (1.0, 10.0):
                    topic = f"spacing{int(speed)}x"
                    client.post(f"http://{http}/topic/create", params={"topic": topic})
                    elapsed = _replay(http, path, topic, f"{speed:g}x")
                    stamps = _timestamps(client, http, topic)
                    assert len(stamps) == len(offsets), (len(stamps), len(offsets))
                    errors = sorted(
                        abs((s - stamps[0]) - o / speed) / 1e6
                        for s, o in zip(stamps, offsets, strict=True)
                    )
                    figures[f"{speed:g}x"] = {
                        "messages": len(stamps),
                        "recorded_span_s": round(offsets[-1] / 1e9 / speed, 3),
                        "replayed_span_s": round((stamps[-1] - stamps[0]) / 1e9, 3),
                        "command_s": round(elapsed, 3),
                        "error_ms_median": round(statistics.median(errors), 2),
                        "error_ms_p99": round(errors[int(len(errors) * 0.99) - 1], 2),
                        "error_ms_max": round(errors[-1], 2),
                    }
                big = data / "big.jsonl"
                _recording(big, args.max_messages, 0.01, b"x" * 100)
                client.post(f"http://{http}/topic/create", params={"topic": "fast"})
                elapsed = _replay(http, big, "fast", "max")
                figures["max"] = {
                    "messages": args.max_messages,
                    "command_s": round(elapsed, 2),
                    "messages_per_s": round(args.max_messages / elapsed),
                }
        finally:
            _stop(proc)
    print(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
