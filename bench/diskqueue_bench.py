"""Throughput of nsqbox's DiskQueue: puts, batched puts and pops of nsqd-sized records.

    .venv/bin/python bench/diskqueue_bench.py [--count 1000000] [--size 226] [--sync-every N]

The default sync_every is effectively "never" (to measure the write path, as the target
"> 300k puts/s without fsync" asks); pass --sync-every 2500 for nsqd's default.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from collections.abc import Callable

from nsqbox.nsqd.diskqueue.queue import DiskQueue


def _open(path: str, sync_every: int) -> DiskQueue:
    # nsqd's defaults: 100 MiB files, min = 26-byte message header, max = 1 MiB body + header.
    return DiskQueue("bench", path, 100 * 1024 * 1024, 26, 1024 * 1024 + 26, sync_every, 2.0)


def _timed(label: str, count: int, size: int, fn: Callable[[], None]) -> None:
    start = time.perf_counter()
    fn()
    elapsed = time.perf_counter() - start
    rate = count / elapsed
    print(f"{label:<28} {rate:>12,.0f} ops/s  {rate * size / 1e6:>8.1f} MB/s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=1_000_000)
    parser.add_argument("--size", type=int, default=226)
    parser.add_argument("--sync-every", type=int, default=1 << 62)
    parser.add_argument("--batch", type=int, default=100)
    args = parser.parse_args()
    count, size = args.count, args.size
    record = b"m" * size

    with tempfile.TemporaryDirectory() as path:
        q = _open(path, args.sync_every)

        def puts() -> None:
            put = q.put
            for _ in range(count):
                put(record)

        def pops() -> None:
            pop = q.pop
            for _ in range(count):
                pop()

        _timed(f"put x{count}", count, size, puts)
        _timed(f"pop x{count}", count, size, pops)
        assert q.depth == 0

        batch = [record] * args.batch
        rounds = count // args.batch

        def put_many() -> None:
            put_many = q.put_many
            for _ in range(rounds):
                put_many(batch)

        _timed(f"put_many (batch {args.batch})", rounds * args.batch, size, put_many)
        q.close()


if __name__ == "__main__":
    main()
