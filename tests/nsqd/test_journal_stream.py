"""The journal's streaming form, ``GET /nsqbox/journal/stream`` (issue #33), and the follower
under it: events as JSON lines as they are recorded, and a reader too slow for the ring told
what it lost.

A real nsqd on 127.0.0.1 port 0; publishes from nsqbox.client, a consumer over a real socket.
No pass/fail depends on timing: each test reads lines until the ones it waits for came, under
a bound (``fail_after``); the throughput is measured by ``bench/trace_bench.py``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.client import open_producer
from nsqbox.client.journal import JournalUnsupported
from nsqbox.client.journal_stream import JournalStream, open_journal_stream
from nsqbox.nsqd.domain.journal import Journal
from nsqbox.nsqd.domain.journal_entries import Step
from nsqbox.nsqd.domain.journal_follow import Follower
from nsqbox.nsqd.domain.journal_views import EventFilter
from nsqbox.wire import commands
from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http


@pytest.fixture
async def client(nursery: trio.Nursery) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=httpx.Timeout(TIMEOUT, read=None)) as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


def node(server: NSQDWithHTTP) -> str:
    return server.url.removeprefix("http://")


async def next_events(stream: JournalStream, count: int) -> list[dict[str, Any]]:
    """The stream's next ``count`` events (heartbeats passed over)."""
    out: list[dict[str, Any]] = []
    async for doc in stream:
        if "marker" in doc:
            assert doc["marker"] == "heartbeat", doc
            continue
        out.append(doc)
        if len(out) == count:
            break
    return out


async def first(stream: JournalStream) -> dict[str, Any]:
    async for doc in stream:
        return doc
    raise AssertionError("the stream ended")


async def test_new_events_come_as_lines(nursery: trio.Nursery, tmp_path: Path) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    async with open_producer(server.tcp) as producer:
        await producer.pub("t", b"before")  # recorded before the stream: not in it
        async with open_journal_stream(node(server), {"topic": "t"}) as stream:
            start = await first(stream)
            assert start["marker"] == "start"
            assert start["recorded"] >= 1
            conn = await RawConn.open(server.tcp)
            await conn.identify(user_agent="the-consumer")
            await conn.sub("t", "c", rdy=0)  # the topic's first channel: gets "before" too
            await producer.pub("t", b"after")
            await conn.send(commands.rdy(2))
            got = [await conn.message(), await conn.message()]
            for msg in got:
                await conn.send(commands.fin(msg.id))
            after_id = next(m.id for m in got if m.body == b"after").decode()
            seen: list[dict[str, Any]] = []
            while not any(e["kind"] == "finished" and e["id"] == after_id for e in seen):
                seen += await next_events(stream, 1)
    mine = [e for e in seen if e["id"] == after_id]
    assert [e["kind"] for e in mine] == ["published", "queued", "delivered", "finished"]
    assert mine[2]["user_agent"] == "the-consumer"
    assert mine[2]["attempt"] == 1
    assert mine[3]["attempt"] == 1  # the FIN's attempt: its delivery's, read earlier
    numbers = [e["n"] for e in seen]
    assert numbers == sorted(numbers)
    assert start["next"] < numbers[0]
    await conn.aclose()


async def test_a_stream_goes_on_from_after_and_says_what_the_ring_dropped(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, journal_size=5)
    async with open_producer(server.tcp) as producer:
        for i in range(20):
            await producer.pub("t", b"m%d" % i)  # one entry each
    async with open_journal_stream(node(server), {"topic": "t", "after": 1}) as stream:
        assert (await first(stream))["marker"] == "start"
        lost = await first(stream)
        assert lost["marker"] == "lost"
        assert lost["entries"] >= 15  # the ring holds 5 of the 20 (a scan may hold a few more)
        events = await next_events(stream, 1)
    assert events[0]["kind"] == "published"
    assert events[0]["n"] > lost["next"]


async def test_a_follower_reads_only_what_is_new_and_loses_what_the_ring_let_go(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, journal_size=10)
    journal = server.journal
    follower = Follower(journal, EventFilter(topic="t"))
    assert not follower.pending()
    async with open_producer(server.tcp) as producer:
        await producer.pub("t", b"one")
        assert follower.pending()
        page = follower.read(100)
        assert (page.lost, [e["kind"] for e in page.events]) == (0, ["published"])
        assert not follower.pending()
        for i in range(30):
            await producer.pub("t", b"x%d" % i)
    page = follower.read(100)
    assert page.lost >= 20  # a slow reader: the ring kept only its newest entries
    assert len(page.events) <= 30 - page.lost + 1
    assert [e["kind"] for e in page.events] == ["published"] * len(page.events)
    page = follower.read(100)
    assert (page.lost, page.events) == (0, [])


async def test_a_read_takes_at_most_its_limit_and_the_next_goes_on(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    follower = Follower(journal, EventFilter(topic="t"))
    async with open_producer(server.tcp) as producer:
        await producer.mpub("t", [b"a", b"b", b"c", b"d", b"e"])  # one entry, five events
    first = follower.read(2)
    rest = follower.read(100)
    assert [len(first.events), len(rest.events)] == [2, 3]
    numbers = [e["n"] for e in first.events + rest.events]
    assert numbers == sorted(set(numbers))


@pytest.mark.parametrize(
    ("query", "status", "message"),
    [
        ({"max_ms": "0"}, 400, "INVALID_MAX_MS"),
        ({"max_ms": "3600001"}, 400, "INVALID_MAX_MS"),
        ({"after": "-1"}, 400, "INVALID_AFTER"),
        ({"kind": "nonsense"}, 400, "INVALID_KIND"),
    ],
)
async def test_bad_parameters_are_refused(
    nursery: trio.Nursery,
    tmp_path: Path,
    client: httpx.AsyncClient,
    query: dict[str, str],
    status: int,
    message: str,
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    response = await client.get(f"{server.url}/nsqbox/journal/stream", params=query)
    assert (response.status_code, response.json()) == (status, {"message": message})


async def test_a_stream_ends_after_max_ms_with_where_to_go_on(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    url = f"{server.url}/nsqbox/journal/stream"
    response = await client.get(url, params={"max_ms": "1"})
    docs = [json.loads(line) for line in response.text.splitlines()]
    assert [d["marker"] for d in docs] == ["start", "end"]
    assert docs[1]["next"] == docs[0]["next"]


async def test_off_and_guarded_as_the_other_journal_routes(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    (tmp_path / "off").mkdir()
    (tmp_path / "on").mkdir()
    off = await start_nsqd_http(nursery, tmp_path / "off", journal_size=0)
    response = await client.get(f"{off.url}/nsqbox/journal/stream")
    assert (response.status_code, response.json()) == (404, {"message": "JOURNAL_OFF"})
    with pytest.raises(JournalUnsupported, match="the journal is off"):
        async with open_journal_stream(node(off), {}):
            pass
    server = await start_nsqd_http(nursery, tmp_path / "on")
    foreign = await client.get(
        f"{server.url}/nsqbox/journal/stream", headers={"Origin": "http://evil.example"}
    )
    assert foreign.status_code == 403


async def test_an_after_from_before_a_restart_starts_from_the_oldest(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    async with open_producer(server.tcp) as producer:
        await producer.pub("t", b"since the restart")
    follower = Follower(journal, EventFilter(topic="t"), after=(1 << 40) << 32)
    page = follower.read(10)
    assert [(e["kind"], e["n"] >> 32) for e in page.events] == [("published", 1)]


async def test_an_after_of_another_journal_starts_from_the_oldest(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    """A trace following a node that restarted asks for ``after`` of the old journal: with
    the old journal's name, the new one's first events are not skipped, however many
    entries it has recorded since (more than the old one had is the case ``after`` alone
    cannot tell)."""
    server = await start_nsqd_http(nursery, tmp_path)
    async with open_producer(server.tcp) as producer:
        for i in range(3):
            await producer.pub("t", b"m%d" % i)  # one entry each
    after = 1 << 32 | 0xFFFFFFFF  # after the first entry's events, as a stream's `next` says
    ours = server.journal.id

    async def published_from(journal: str) -> tuple[dict[str, Any], list[str]]:
        query = {"topic": "t", "after": after, "journal": journal}
        async with open_journal_stream(node(server), query) as stream:
            start = await first(stream)
            events = await next_events(stream, 2)
        return start, [e["id"] for e in events if e["kind"] == "published"]

    start, mine = await published_from(ours)
    assert (start["marker"], start["journal"]) == ("start", ours)
    assert len(mine) == 2  # this journal's: on after the first entry
    _, theirs = await published_from("0123456789abcdef")
    assert len(theirs) == 2
    assert theirs[0] not in mine  # another journal's number: from the oldest, the first PUB
    assert theirs[1] == mine[0]


def test_the_ring_read_from_an_entry_on_is_its_tail() -> None:
    journal = Journal(25, wall_ns=lambda: 0, now=lambda: 0.0, clients={})
    number = 0
    for chunk in (10, 10, 10, 8):  # the last trim drops 5 (a chunk) and 3 (the head of one)
        for _ in range(chunk):
            number += 1
            journal.append(Step(0, 0.0, "t", "", None, number, None, None, 0))
        journal.trim()
    for _ in range(3):  # and some not trimmed yet
        number += 1
        journal.append(Step(0, 0.0, "t", "", None, number, None, None, 0))
    held = [step.a for step in journal.entries]
    assert held == list(range(number - len(journal) + 1, number + 1))
    assert journal.evicted == 13  # a chunk begins at an offset
    for skip in range(len(held) + 2):
        assert [step.a for step in journal.entries_from(skip)] == held[skip:], skip
