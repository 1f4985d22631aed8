"""Following the journal in pieces of any size shows the same events as reading it at once
(issue #33): a follower goes on with the reading under way, an entry's events at a time,
and keeps what is left of a piece for its next read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import trio

from nsqbox.client import open_producer
from nsqbox.nsqd.domain.journal_follow import Follower
from nsqbox.nsqd.domain.journal_views import EventFilter, events_page
from nsqbox.wire import commands
from tests.helpers import RawConn, wait_until
from tests.http.nsqd_app import TIMEOUT, start_nsqd_http


def drain(follower: Follower, limit: int, into: list[dict[str, Any]]) -> None:
    """Read everything ``follower`` has now, ``limit`` events a read."""
    while follower.pending():
        page = follower.read(limit)
        assert page.lost == 0
        assert len(page.events) <= limit
        if not page.events:
            break
        into += page.events


async def test_pieces_of_any_size_follow_the_same_events(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    want = EventFilter(topic="t")
    limits = (1, 7, 250)
    followers = [Follower(journal, want, after=0) for _ in limits]
    seen: list[list[dict[str, Any]]] = [[] for _ in limits]

    def follow() -> None:
        for follower, limit, into in zip(followers, limits, seen, strict=True):
            drain(follower, limit, into)

    conn = await RawConn.open(server.tcp)
    await conn.identify(user_agent="follow-pieces")
    await conn.sub("t", "c", rdy=0)
    finished = 0
    with trio.fail_after(TIMEOUT * 4):
        async with open_producer(server.tcp) as producer:
            await producer.mpub("t", [b"m%d" % i for i in range(20)])
            for i in range(20):
                await producer.pub("t", b"p%d" % i)
            follow()
            await conn.send(commands.rdy(5))
            requeued: set[bytes] = set()
            while finished < 40:
                msg = await conn.message()
                if len(requeued) < 3 and msg.id not in requeued:
                    requeued.add(msg.id)  # sent back once: delivered again at attempt 2
                    await conn.send(commands.req(msg.id, 0))
                else:
                    await conn.send(commands.fin(msg.id))
                    finished += 1
                if finished % 6 == 0:
                    follow()
        channel = server.nsqd.topics["t"].channels["c"]
        await wait_until(lambda: channel.in_flight_count() == 0 and channel.depth() == 0)
    await conn.aclose()
    follow()
    whole = events_page(journal, want, 0, 10_000)["events"]
    kinds = [e["kind"] for e in whole]
    assert kinds.count("finished") == 40
    assert kinds.count("requeued") == 3
    assert sorted(e["attempt"] for e in whole if e["kind"] == "finished")[-3:] == [2, 2, 2]
    for events in seen:
        assert events == whole
