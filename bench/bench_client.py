"""Consume throughput: nsqbox's trio Consumer against pynsq's Reader, same nsqbox server.

    python bench/bench_client.py                       # 200,000 x 100-byte messages, 3 runs
    python bench/bench_client.py --count 500000 --runs 5 --max-in-flight 2500

One ``python -m nsqbox nsqd`` subprocess serves every run. Before each run a
fresh topic is filled with ``--count`` messages (blocking MPUB); then a client,
in a subprocess of its own, consumes them with a handler that only counts
(returning finishes the message, so every message costs a FIN). The rate is
messages over the time from the first delivery to the last. Prints each run,
the medians, and nsqbox's speed-up over pynsq.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))

from nsqbox.client import Config  # noqa: E402
from nsqbox.client.blocking import Publisher  # noqa: E402

PY = sys.executable


class Server:
    """``nsqbox nsqd`` on a free port; its address comes from the startup banner."""

    def __init__(self) -> None:
        self.data = tempfile.mkdtemp(prefix="nsqbox-bench-client-")
        cmd = [
            PY,
            "-m",
            "nsqbox",
            "nsqd",
            "--tcp-address=127.0.0.1:0",
            "--http-address=",
            f"--data-path={self.data}",
            "--mem-queue-size=10000000",
            "--log-level=warn",
        ]
        self.proc = subprocess.Popen(
            cmd, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        assert self.proc.stderr is not None
        deadline = time.monotonic() + 20
        for line in self.proc.stderr:
            match = re.search(r"running nsqd \(TCP (\S+?),", line)
            if match:
                self.address = match.group(1)
                # keep reading its stderr, so a chatty server never blocks on a full pipe
                threading.Thread(target=self.proc.stderr.read, daemon=True).start()
                return
            if time.monotonic() > deadline:
                break
        self.stop()
        raise SystemExit("nsqd did not start")

    def stop(self) -> None:
        self.proc.terminate()
        self.proc.wait(30)


def fill(address: str, topic: str, count: int, size: int) -> None:
    body = b"x" * size
    with Publisher(address, config=Config()) as publisher:
        left = count
        while left:
            batch = min(left, 1000)
            publisher.mpub(topic, [body] * batch)
            left -= batch


# -- the consumers, each run in a subprocess of its own -------------------------------------


def consume_nsqbox(address: str, topic: str, count: int, max_in_flight: int) -> float:
    import trio

    from nsqbox.client import Message, open_consumer

    async def main() -> float:
        seen = 0
        first = last = 0.0
        done = trio.Event()

        def handler(message: Message) -> None:
            nonlocal seen, first, last
            seen += 1
            if seen == 1:
                first = time.perf_counter()
            if seen == count:
                last = time.perf_counter()
                done.set()

        config = Config(max_in_flight=max_in_flight)
        async with open_consumer(
            topic, "bench", handler, nsqd_tcp_addresses=[address], config=config
        ):
            await done.wait()
        return last - first

    return trio.run(main)


def consume_pynsq(address: str, topic: str, count: int, max_in_flight: int) -> float:
    import nsq
    import tornado.ioloop

    loop = tornado.ioloop.IOLoop.current()
    seen = 0
    first = last = 0.0

    def handler(message: object) -> bool:
        nonlocal seen, first, last
        seen += 1
        if seen == 1:
            first = time.perf_counter()
        if seen == count:
            last = time.perf_counter()
            loop.stop()
        return True

    reader = nsq.Reader(
        topic=topic,
        channel="bench",
        message_handler=handler,
        nsqd_tcp_addresses=[address],
        max_in_flight=max_in_flight,
    )
    loop.start()
    reader.close()
    return last - first


CONSUMERS = {"nsqbox": consume_nsqbox, "pynsq": consume_pynsq}


def run_client(client: str, address: str, topic: str, count: int, max_in_flight: int) -> float:
    out = subprocess.run(
        [
            PY,
            str(Path(__file__).resolve()),
            "--consume",
            client,
            "--address",
            address,
            "--topic",
            topic,
            "--count",
            str(count),
            "--max-in-flight",
            str(max_in_flight),
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    ).stdout
    elapsed = float(json.loads(out.strip().splitlines()[-1])["elapsed"])
    return count / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=100)
    parser.add_argument("--max-in-flight", type=int, default=2500)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--consume", choices=sorted(CONSUMERS), help=argparse.SUPPRESS)
    parser.add_argument("--address", help=argparse.SUPPRESS)
    parser.add_argument("--topic", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.consume:  # the child: consume and report
        elapsed = CONSUMERS[args.consume](args.address, args.topic, args.count, args.max_in_flight)
        print(json.dumps({"elapsed": elapsed}))
        return

    server = Server()
    rates: dict[str, list[float]] = {name: [] for name in CONSUMERS}
    print(
        f"{args.count} messages of {args.size} bytes, max_in_flight {args.max_in_flight}, "
        f"nsqbox nsqd at {server.address}",
        flush=True,
    )
    try:
        for run in range(args.runs):
            for name in CONSUMERS:
                topic = f"bench_{name}_{run}"
                fill(server.address, topic, args.count, args.size)
                rate = run_client(name, server.address, topic, args.count, args.max_in_flight)
                rates[name].append(rate)
                print(f"  run {run + 1}: {name:7s} {rate:12,.0f} msgs/s", flush=True)
    finally:
        server.stop()
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, value in medians.items():
        print(f"median  {name:7s} {value:12,.0f} msgs/s")
    print(f"nsqbox / pynsq: {medians['nsqbox'] / medians['pynsq']:.2f}x")


if __name__ == "__main__":
    main()
