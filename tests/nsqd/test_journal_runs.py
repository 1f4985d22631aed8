"""The journal's cheap recording of PUBs (issue #33): one entry per run of PUBs, and what a
channel sent on at once read back from the messages themselves.

A real nsqd on 127.0.0.1 port 0 (TCP and HTTP); publishers and consumers over real sockets.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.nsqd.domain.journal import Published
from nsqbox.nsqd.domain.message import Message
from nsqbox.nsqd.domain.topic import TopicError
from nsqbox.wire import commands
from tests.helpers import RawConn, wait_until
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http

from .test_journal import consumer, get


@pytest.fixture
async def client(nursery: trio.Nursery) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


async def journey(http: httpx.AsyncClient, server: NSQDWithHTTP, msg_id: bytes) -> list[Any]:
    response = await http.get(f"{server.url}/nsqbox/journal", params={"id": msg_id.decode()})
    assert response.status_code == 200, response.text
    doc = response.json()
    assert doc["next"] is None
    return doc["events"]  # type: ignore[no-any-return]


async def run_of_pubs(server: NSQDWithHTTP, count: int) -> RawConn:
    """A producer that sent ``count`` PUBs to topic t in one write (a run), each answered."""
    producer = await RawConn.open(server.tcp)
    await producer.identify(user_agent="producer")
    await producer.send(b"".join(commands.pub("t", b"m%d" % i) for i in range(count)))
    for _ in range(count):
        assert await producer.response() == b"OK"
    return producer


async def test_pubs_sent_on_at_once_read_back_their_deliveries(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    first = await consumer(server, "first", rdy=10, msg_timeout=5000)
    second = await consumer(server, "second", "c2", rdy=10, msg_timeout=7000)
    producer = await run_of_pubs(server, 5)
    got = [await first.message() for _ in range(5)]
    copies = [await second.message() for _ in range(5)]
    assert [m.body for m in got] == [b"m%d" % i for i in range(5)]
    assert [m.id for m in copies] == [m.id for m in got]
    # the first message: touched, sent back, delivered again, finished; the rest finished
    head = got[0]
    await trio.sleep(0.01)  # a touch's new deadline is later than the first one's
    await first.send(commands.touch(head.id) + commands.req(head.id, 0))
    again = await first.message()
    assert (again.id, again.attempts) == (head.id, 2)
    await first.send(b"".join(commands.fin(m.id) for m in [again, *got[1:]]))
    await second.send(b"".join(commands.fin(m.id) for m in copies))
    channels = server.nsqd.topics["t"].channels
    await wait_until(lambda: not any(c.in_flight_count() for c in channels.values()))

    events = await journey(client, server, head.id)
    assert [(e["kind"], e["channel"]) for e in events] == [
        ("published", ""),
        ("delivered", "c"),
        ("delivered", "c2"),
        ("touched", "c"),
        ("requeued", "c"),
        ("delivered", "c"),
        ("finished", "c"),
        ("finished", "c2"),
    ]
    assert (events[0]["via"], events[0]["user_agent"]) == ("PUB", "producer")
    delivered = [e for e in events if e["kind"] == "delivered"]
    # the first delivery's lease as it was before the touch replaced its deadline
    assert [(e["attempt"], e["user_agent"], e["timeout_ms"]) for e in delivered] == [
        (1, "first", 5000),
        (1, "second", 7000),
        (2, "first", 5000),
    ]
    assert [e["attempt"] for e in events if e["kind"] == "finished"] == [2, 1]
    times = [e["time"] for e in events]
    assert times == sorted(times)
    for msg in got[1:]:
        rest = await journey(client, server, msg.id)
        assert [(e["kind"], e["channel"], e.get("attempt")) for e in rest] == [
            ("published", "", None),
            ("delivered", "c", 1),
            ("delivered", "c2", 1),
            ("finished", "c", 1),
            ("finished", "c2", 1),
        ]
        assert rest[0]["via"] == "PUB"
        assert rest[1]["user_agent"] == "first"
    # filtered by client: only what the first consumer was sent, read back or not
    client_id = next(iter(c.id for c in server.nsqd.clients.values() if c.user_agent == "first"))
    response = await client.get(
        f"{server.url}/nsqbox/journal", params={"client": client_id, "kind": "delivered"}
    )
    assert response.status_code == 200, response.text
    assert len(response.json()["events"]) == 6
    for conn in (first, second, producer):
        await conn.aclose()


def msgs_of(entry: Published) -> list[Any]:
    """The messages of a publish's entry (a PUB alone keeps its message, not a list)."""
    return entry.refs if entry.refs.__class__ is list else [entry.refs]


async def test_a_run_of_pubs_is_one_entry_and_counted_as_recorded(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    topic = server.nsqd.get_topic("runs")
    journal.trim()
    before = journal.nbytes
    now = server.nsqd.now()
    # a run of PUBs (one connection's, one turn's): one entry for them all
    assert topic.put_each([b"a", b"bb", b"ccc"], 0.0, now, None) == 3
    topic.put_messages([b"dddd"], 0.0, now, None)  # a PUB alone: an entry of its own
    journal.publisher_in_process()
    topic.put_messages([b"eeeee"], 0.0, None, None)
    topic.put_messages([b"ffffff"], 0.0, None, None)
    published = [e for e in journal.open if isinstance(e, Published)]
    # a run's entry keeps its list; a PUB alone keeps its message, no list
    assert [e.refs.__class__ for e in published] == [list, Message, Message, Message]
    assert [([m.data[16:] for m in msgs_of(e)], e.pubs) for e in published] == [
        ([b"a", b"bb", b"ccc"], True),
        ([b"dddd"], True),
        ([b"eeeee"], True),
        ([b"ffffff"], True),
    ]
    assert journal.open_bytes == 21  # counted as recorded, not summed when the chunk closes
    journal.trim()
    assert (journal.nbytes - before, journal.open_bytes) == (21, 0)
    # a run of DPUBs is one entry too, with its delay; an MPUB is an entry of its own
    assert topic.put_each([b"i", b"j"], 5.0, now, None) == 2
    topic.put_messages([b"k", b"l"], 0.0, now, None)
    entries = [e for e in journal.open if isinstance(e, Published)]
    assert [(len(e.refs), e.defer, e.pubs) for e in entries[:1]] == [(2, 5.0, True)]
    assert entries[1].pubs is False
    # a run the topic refuses: nothing published, nothing recorded
    topic.exiting = True
    with pytest.raises(TopicError) as refused:
        topic.put_each([b"m"], 0.0, now, None)
    assert refused.value.done == 0
    topic.exiting = False
    assert len([e for e in journal.open if isinstance(e, Published)]) == 2


async def test_a_run_of_pubs_over_tcp_counts_its_bodies_bytes(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    before = journal.nbytes + journal.open_bytes  # a queue scan may close the chunk between
    producer = await run_of_pubs(server, 12)  # the parser's runs: their size from positions
    counted = journal.nbytes + journal.open_bytes - before
    assert counted == sum(len(b"m%d" % i) for i in range(12)) == 26
    await producer.aclose()


async def test_an_mpub_sent_on_at_once_records_its_deliveries(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    taker = await consumer(server, "taker", rdy=10)
    producer = await RawConn.open(server.tcp)
    await producer.mpub("t", [b"one", b"two", b"three"])
    got = [await taker.message() for _ in range(3)]
    await taker.send(b"".join(commands.fin(m.id) for m in got))
    await wait_until(lambda: server.nsqd.topics["t"].channels["c"].in_flight_count() == 0)
    for msg in got:  # the batch's entry keeps its first message only: each send is recorded
        events = await journey(client, server, msg.id)
        assert [(e["kind"], e.get("attempt")) for e in events] == [
            ("published", None),
            ("delivered", 1),
            ("finished", 1),
        ]
        assert (events[0]["via"], events[1]["user_agent"]) == ("MPUB", "taker")
    await taker.aclose()
    await producer.aclose()


async def test_a_run_of_pubs_to_one_channel_reads_back_every_send(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    taker = await consumer(server, "taker", rdy=10, msg_timeout=9000)
    producer = await run_of_pubs(server, 5)
    got = [await taker.message() for _ in range(5)]
    await taker.send(b"".join(commands.fin(m.id) for m in got))
    await wait_until(lambda: server.nsqd.topics["t"].channels["c"].in_flight_count() == 0)
    for msg in got:
        events = await journey(client, server, msg.id)
        assert [(e["kind"], e.get("attempt")) for e in events] == [
            ("published", None),
            ("delivered", 1),
            ("finished", 1),
        ]
        assert (events[0]["via"], events[0]["user_agent"]) == ("PUB", "producer")
        assert (events[1]["user_agent"], events[1]["timeout_ms"]) == ("taker", 9000)
    await taker.aclose()
    await producer.aclose()


async def test_http_publishers_are_their_address_and_user_agent(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    journal = server.journal
    long_agent = "agent-" + "x" * 5000
    async with (
        httpx.AsyncClient(headers={"User-Agent": "first"}) as first,
        httpx.AsyncClient(headers={"User-Agent": long_agent}) as second,
    ):

        def publishers() -> list[object]:
            """The HTTP publishers so far (not the first ``0``, this process: a queue scan
            lets it go once another starts at the same entry)."""
            return [source for _, source in journal.sources if source != 0]

        # one keep-alive client, bodies of every size (Content-Length differs): one publisher
        for size in range(1, 6):
            response = await first.post(f"{server.url}/pub?topic=h", content=b"p" * size)
            assert response.status_code == 200, response.text
        assert len(publishers()) == 1
        # another client, then the first again: a publisher each time it changes
        for http in (second, first):
            response = await http.post(f"{server.url}/pub?topic=h", content=b"q")
            assert response.status_code == 200, response.text
        assert len(publishers()) == 3
    events = (await get(client, server, "/nsqbox/journal", topic="h", kind="published"))["events"]
    agents = [e["user_agent"] for e in events]
    assert agents == ["first"] * 5 + [long_agent[:256], "first"]
    assert {e["via"] for e in events} == {"HTTP"}
    assert len({e["remote_address"] for e in events}) == 2  # two connections


@pytest.mark.parametrize(
    ("lines", "run"),
    [
        pytest.param([b"abc", b"def", b"ghi"], True, id="one-size"),
        pytest.param([b"abc", b"abcd", b"abc"], False, id="one-longer-by-one"),
        pytest.param([b"abc", b"ab", b"abcd"], False, id="same-sum-other-sizes"),
        pytest.param([b"abc", b"", b"def"], True, id="an-empty-line-one-size"),
        pytest.param([b"abc", b"", b"defg"], False, id="an-empty-line-other-sizes"),
    ],
)
async def test_a_text_mpub_records_each_lines_size(
    nursery: trio.Nursery,
    tmp_path: Path,
    client: httpx.AsyncClient,
    lines: list[bytes],
    run: bool,
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    taker = await consumer(server, "taker", rdy=10)
    response = await client.post(f"{server.url}/mpub?topic=t", content=b"\n".join(lines))
    assert response.status_code == 200, response.text
    sent = [line for line in lines if line]  # nsqd drops empty lines
    got = [await taker.message() for _ in sent]
    assert [m.body for m in got] == sent
    doc = await client.get(f"{server.url}/nsqbox/journal", params={"kind": "published"})
    events = doc.json()["events"]
    assert [e["id"] for e in events] == [m.id.decode() for m in got]
    assert [e["size"] for e in events] == [len(line) for line in sent]
    kept = [e.refs for e in server.nsqd.journal.entries if e.__class__ is Published]
    assert [r.__class__.__name__ for r in kept] == ["Run" if run else "list"]
    await taker.aclose()
