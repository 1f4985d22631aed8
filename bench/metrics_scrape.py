"""The cost of one nsqd ``/metrics`` scrape, by number of topics (docs/metrics.md).

    .venv/bin/python bench/metrics_scrape.py [--topics 1000 10000] [--channels 1] [--profile]

Starts a real nsqd on 127.0.0.1 (port 0, a temporary data path), creates the topics (each
with ``--channels`` channels and one queued message), then times, best of ``--repeat``:
reading the state on the event loop (``node_snapshot``), writing the text
(``Scraper._render``, what the worker thread does) and a whole ``GET /metrics`` over HTTP.
``--profile`` prints cProfile's top functions of one scrape's two parts.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import tempfile
import time
from collections.abc import Callable
from typing import TypeVar

import httpx
import trio

from nsqbox.metrics.scrape import Scraper
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.routes.metrics import node_snapshot
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd

T = TypeVar("T")


def _best(repeat: int, fn: Callable[[], T]) -> tuple[float, T]:
    best, result = float("inf"), None
    for _ in range(repeat):
        start = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - start)
    assert result is not None
    return best, result


async def _measure(topics: int, channels: int, repeat: int, profile: bool) -> None:
    with tempfile.TemporaryDirectory() as data:
        opts = NSQDOptions(
            tcp_address="127.0.0.1:0", http_address="127.0.0.1:0", data_path=data, node_id=1
        )
        opts.log_level = "error"
        async with trio.open_nursery() as nursery:
            node: NSQDAddresses = await nursery.start(serve_nsqd, opts)
            nsqd = node.nsqd
            nsqd.loading = True  # one nsqd.dat write at the end, not one per topic
            for i in range(topics):
                topic = nsqd.get_topic(f"topic-{i:05d}")
                for c in range(channels):
                    topic.get_channel(f"channel-{c}")
                topic.put_messages([b"x"])
            nsqd.loading = False
            nsqd.persist_metadata()
            scraper = Scraper()
            await scraper.render(None, [("", node_snapshot(nsqd))])  # imports, first setup
            read, snapshot = _best(repeat, lambda: node_snapshot(nsqd))
            write, response = _best(repeat, lambda: scraper._render(None, [("", snapshot)], ()))
            assert node.http is not None
            url = f"http://{format_address(node.http)}/metrics"
            async with httpx.AsyncClient(timeout=600, trust_env=False) as client:
                whole = float("inf")
                for _ in range(repeat):
                    start = time.perf_counter()
                    answer = await client.get(url)
                    whole = min(whole, time.perf_counter() - start)
                    assert answer.status_code == 200
            size = len(answer.content)
            print(
                f"{topics:>7,} topics x {channels} channel(s): state {read * 1e3:8.1f} ms"
                f"  text {write * 1e3:8.1f} ms  GET /metrics {whole * 1e3:8.1f} ms"
                f"  ({size / 1e6:.1f} MB)"
            )
            if profile:
                for label, fn in (
                    ("state", lambda: node_snapshot(nsqd)),
                    ("text", lambda: scraper._render(None, [("", snapshot)], ())),
                ):
                    prof = cProfile.Profile()
                    prof.runcall(fn)
                    print(f"--- {label}")
                    pstats.Stats(prof).sort_stats("cumulative").print_stats(18)
            del response
            nursery.cancel_scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--topics", type=int, nargs="+", default=[1_000, 10_000])
    parser.add_argument("--channels", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true")
    args = parser.parse_args()
    for topics in args.topics:
        trio.run(_measure, topics, args.channels, args.repeat, args.profile)


if __name__ == "__main__":
    main()
