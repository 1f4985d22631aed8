"""Load: 1,000 connections at once on one nsqd (in its own process), 100 topics with
three channels each; every message reaches every channel, and the server's memory
stays bounded (its RSS is measured from /proc and stated)."""

from __future__ import annotations

import os
import resource
import tempfile
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import trio

from nsqbox.wire import commands
from tests.helpers import RawConn
from tests.reliability import figures
from tests.reliability.process import NSQDProcess

TOPICS = 100
CHANNELS = 3
CONSUMERS_PER_CHANNEL = 2
PRODUCERS_PER_TOPIC = 4
BATCHES = 3  # per producer: one PUB, then MPUBs of BATCH messages
BATCH = 10
CONNECTIONS = TOPICS * (CHANNELS * CONSUMERS_PER_CHANNEL + PRODUCERS_PER_TOPIC)
#: The server may use this much memory at its peak, with everything above in flight.
MAX_RSS = 400 * 1024 * 1024
TIMEOUT = 120.0


def raise_fd_limit(needed: int) -> None:
    """Make room for ``needed`` more descriptors here and in servers started from here."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = needed + 256
    if soft != resource.RLIM_INFINITY and soft < want:
        if hard != resource.RLIM_INFINITY and hard < want:
            raise AssertionError(f"RLIMIT_NOFILE hard limit {hard} < {want}")
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def topic_name(t: int) -> str:
    return f"load.{t:03d}"


def body(t: int, p: int, i: int) -> bytes:
    return b"%03d-%d-%04d:" % (t, p, i) + b"x" * 100


@contextmanager
def memory_backed_dir(fallback: Path) -> Iterator[Path]:
    """A directory in tmpfs when there is one: this test is about connections and memory,
    and 400 metadata fsyncs on a slow disk would only make it slow."""
    shm = Path("/dev/shm")
    if shm.is_dir() and os.access(shm, os.W_OK):
        with tempfile.TemporaryDirectory(dir=shm, prefix="nsqbox-load-") as path:
            yield Path(path)
    else:
        yield fallback


async def test_a_thousand_connections(tmp_path: Path) -> None:
    raise_fd_limit(2 * CONNECTIONS)
    with (
        memory_backed_dir(tmp_path) as data,
        NSQDProcess(data / "nsqd") as nsqd,
    ):
        async with httpx.AsyncClient(base_url=nsqd.http_url, timeout=TIMEOUT) as http:
            with trio.fail_after(TIMEOUT):
                await run_load(nsqd, http)


async def run_load(nsqd: NSQDProcess, http: httpx.AsyncClient) -> None:
    rss_start, _ = nsqd.rss()
    received: dict[tuple[int, int], Counter[bytes]] = {
        (t, c): Counter() for t in range(TOPICS) for c in range(CHANNELS)
    }
    per_topic = PRODUCERS_PER_TOPIC * (1 + (BATCHES - 1) * BATCH)
    done = {key: trio.Event() for key in received}
    limiter = trio.CapacityLimiter(100)  # connect 100 at a time

    consumers: list[tuple[tuple[int, int], RawConn]] = []
    producers: list[tuple[int, int, RawConn]] = []

    async def open_consumer(t: int, c: int) -> None:
        async with limiter:
            conn = await RawConn.open(nsqd.tcp)
            conn.timeout = TIMEOUT
            await conn.sub(topic_name(t), f"c{c}", rdy=10)
        consumers.append(((t, c), conn))

    async def open_producer(t: int, p: int) -> None:
        async with limiter:
            conn = await RawConn.open(nsqd.tcp)
            conn.timeout = TIMEOUT
        producers.append((t, p, conn))

    async with trio.open_nursery() as nursery:
        for t in range(TOPICS):
            for c in range(CHANNELS):
                for _ in range(CONSUMERS_PER_CHANNEL):
                    nursery.start_soon(open_consumer, t, c)
            for p in range(PRODUCERS_PER_TOPIC):
                nursery.start_soon(open_producer, t, p)
    held = (await http.get("/debug")).json()["client_count"]
    assert held == CONNECTIONS

    async def consume(key: tuple[int, int], conn: RawConn) -> None:
        got = received[key]
        while True:
            msg = await conn.message()
            got[msg.body] += 1
            await conn.send(commands.fin(msg.id))
            if sum(got.values()) >= per_topic:
                done[key].set()

    async def produce(t: int, p: int, conn: RawConn) -> None:
        await conn.pub(topic_name(t), body(t, p, 0))
        for b in range(1, BATCHES):
            first = 1 + (b - 1) * BATCH
            await conn.mpub(topic_name(t), [body(t, p, first + i) for i in range(BATCH)])

    async with trio.open_nursery() as nursery:
        for key, conn in consumers:
            nursery.start_soon(consume, key, conn)
        async with trio.open_nursery() as publishing:
            for t, p, conn in producers:
                publishing.start_soon(produce, t, p, conn)
        for event in done.values():
            await event.wait()
        rss_loaded, _ = nsqd.rss()
        nursery.cancel_scope.cancel()

    for t in range(TOPICS):
        expected = Counter(
            body(t, p, i) for p in range(PRODUCERS_PER_TOPIC) for i in range(per_topic // 4)
        )
        for c in range(CHANNELS):
            assert received[t, c] == expected, (t, c)
    for _, conn in consumers:
        await conn.aclose()
    for _, _, conn in producers:
        await conn.aclose()
    rss_end, rss_peak = nsqd.rss()
    assert rss_peak < MAX_RSS, f"peak RSS {rss_peak >> 20} MiB"
    published = TOPICS * per_topic
    figures.record("load: connections held at once", held)
    figures.record(
        "load: topics x channels, consumers + producers",
        f"{TOPICS} x {CHANNELS}, {len(consumers)} + {len(producers)}",
    )
    figures.record("load: messages published / delivered", f"{published} / {published * CHANNELS}")
    figures.record(
        "load: server RSS start / loaded / end / peak (MiB)",
        " / ".join(str(v >> 20) for v in (rss_start, rss_loaded, rss_end, rss_peak)),
    )
