"""The journal (issue #33): ``GET /nsqbox/journal`` and its troubles and given-up views.

A real nsqd on 127.0.0.1 port 0 (TCP and HTTP); publishes from nsqbox.client, consumers
over real sockets (RawConn, so the test says who holds each message when).
"""

from __future__ import annotations

import base64
import gc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.client import Config, open_producer
from nsqbox.nsqd.domain.channel import Channel
from nsqbox.nsqd.domain.journal import Journal, Published, Run
from nsqbox.nsqd.domain.journal_entries import run_of
from nsqbox.nsqd.domain.message import GUIDFactory, Message
from nsqbox.wire import commands
from tests.helpers import RawConn, wait_until
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http


@pytest.fixture
async def client(nursery: trio.Nursery) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


async def get(http: httpx.AsyncClient, server: NSQDWithHTTP, path: str, **params: Any) -> Any:
    response = await http.get(f"{server.url}{path}", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def journey(http: httpx.AsyncClient, server: NSQDWithHTTP, msg_id: str) -> list[Any]:
    """Every event of one message, page by page (two a page, so paging is walked too)."""
    events: list[Any] = []
    after = 0
    while True:
        doc = await get(http, server, "/nsqbox/journal", id=msg_id, after=after, limit=2)
        events += doc["events"]
        if doc["next"] is None:
            return events
        after = doc["next"]


async def consumer(
    server: NSQDWithHTTP, agent: str, channel: str = "c", rdy: int = 0, **identify: Any
) -> RawConn:
    """A client that said it is ``agent`` and subscribed to ``channel`` of topic t, ready
    for ``rdy`` messages."""
    conn = await RawConn.open(server.tcp)
    await conn.identify(user_agent=agent, **identify)
    await conn.sub("t", channel, rdy=rdy)
    return conn


def channel_of(server: NSQDWithHTTP) -> Channel:
    return server.nsqd.topics["t"].channels["c"]


async def test_requeued_twice_then_finished(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    conns = [await consumer(server, f"agent-{i}") for i in (1, 2, 3)]
    async with open_producer(server.tcp, config=Config(user_agent="the-producer")) as producer:
        await producer.pub("t", b"payload")
    # each consumer in turn takes it (RDY 1), stops taking (RDY 0), and sends it back
    for i, conn in enumerate(conns):
        await conn.send(commands.rdy(1))
        msg = await conn.message()
        assert (msg.body, msg.attempts) == (b"payload", i + 1)
        await conn.send(commands.rdy(0))
        if i < 2:
            await conn.send(commands.req(msg.id, 0))
        else:
            await conn.send(commands.fin(msg.id))
    msg_id = msg.id.decode()
    await wait_until(lambda: channel_of(server).in_flight_count() == 0)

    events = await journey(client, server, msg_id)
    kinds = [e["kind"] for e in events]
    assert kinds == [
        "published",
        "queued",
        "delivered",
        "requeued",
        "delivered",
        "requeued",
        "delivered",
        "finished",
    ]
    published = events[0]
    assert (published["via"], published["size"], published["user_agent"]) == (
        "PUB",
        7,
        "the-producer",
    )
    assert events[1]["to"] == "memory"
    delivered = [e for e in events if e["kind"] == "delivered"]
    assert [(e["attempt"], e["user_agent"]) for e in delivered] == [
        (1, "agent-1"),
        (2, "agent-2"),
        (3, "agent-3"),
    ]
    assert all(e["timeout_ms"] == 60_000 for e in delivered)
    requeued = [e for e in events if e["kind"] == "requeued"]
    assert [(e["user_agent"], e["delay_ms"]) for e in requeued] == [
        ("agent-1", 0),
        ("agent-2", 0),
    ]
    finished = events[-1]
    assert (finished["user_agent"], finished["attempt"]) == ("agent-3", 3)
    assert finished["since_publish_ms"] >= 0
    times = [e["time"] for e in events]
    assert times == sorted(times)
    assert all(e["channel"] == "c" for e in events[1:])

    # finished after two failed deliveries: given up on (at attempt 3), with its body
    given = await get(client, server, "/nsqbox/journal/given_up", topic="t", channel="c")
    assert [(m["id"], m["attempts"], m["requeues"]) for m in given["messages"]] == [(msg_id, 3, 2)]
    assert given["count"] == 1
    assert base64.b64decode(given["messages"][0]["body"]) == b"payload"
    assert given["messages"][0]["finished_by"]["user_agent"] == "agent-3"
    none = await get(client, server, "/nsqbox/journal/given_up", topic="t", channel="c", attempts=4)
    assert (none["count"], none["messages"]) == (0, [])
    troubles = await get(client, server, "/nsqbox/journal/troubles", topic="t", channel="c")
    assert (troubles["count"], troubles["messages"]) == (0, [])  # finished: no longer

    # the filters: by kind and client, by time
    only = await get(client, server, "/nsqbox/journal", kind="delivered,finished")
    assert [e["kind"] for e in only["events"]] == ["delivered"] * 3 + ["finished"]
    by_client = await get(client, server, "/nsqbox/journal", client=delivered[1]["client"])
    assert [e["kind"] for e in by_client["events"]] == ["delivered", "requeued"]
    later = await get(client, server, "/nsqbox/journal", since=finished["time"])
    assert [e["kind"] for e in later["events"]] == ["finished"]
    for conn in conns:
        await conn.aclose()


async def test_timed_out_shows_the_holder_and_how_long(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    holder = await consumer(server, "slow-worker", rdy=1, msg_timeout=1000)
    async with open_producer(server.tcp) as producer:
        await producer.pub("t", b"held too long")
    msg = await holder.message()
    await holder.send(commands.rdy(0))  # it comes back to nobody: it stays in trouble
    await wait_until(lambda: channel_of(server).timeout_count == 1, within=TIMEOUT * 3)

    events = await journey(client, server, msg.id.decode())
    # sent on as it was published: one entry holds the publish and the delivery
    assert [e["kind"] for e in events] == ["published", "delivered", "timed_out"]
    delivered = events[1]
    assert (delivered["channel"], delivered["attempt"]) == ("c", 1)
    assert (delivered["user_agent"], delivered["timeout_ms"]) == ("slow-worker", 1000)
    timed_out = [e for e in events if e["kind"] == "timed_out"]
    assert len(timed_out) == 1
    assert timed_out[0]["user_agent"] == "slow-worker"
    assert timed_out[0]["held_ms"] >= 1000  # its msg_timeout, and the scan's lag
    troubles = await get(
        client, server, "/nsqbox/journal/troubles", topic="t", channel="c", timed_out="true"
    )
    [trouble] = troubles["messages"]
    assert (trouble["id"], trouble["timeouts"], trouble["requeues"]) == (msg.id.decode(), 1, 0)
    assert trouble["last_client"]["user_agent"] == "slow-worker"
    assert trouble["held_longest_ms"] >= 1000
    assert base64.b64decode(trouble["body"]) == b"held too long"
    longer = await get(
        client, server, "/nsqbox/journal/troubles", topic="t", channel="c", held_ms=3_600_000
    )
    assert longer["messages"] == []
    await holder.aclose()


async def test_deleting_a_channel_drops_what_it_held(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    holder = await consumer(server, "holder", rdy=1)
    async with open_producer(server.tcp) as producer:
        await producer.mpub("t", [b"in flight", b"queued"])
    msg = await holder.message()
    await wait_until(lambda: channel_of(server).depth() == 1)
    response = await client.post(
        f"{server.url}/channel/delete", params={"topic": "t", "channel": "c"}
    )
    assert response.status_code == 200

    doc = await get(client, server, "/nsqbox/journal", kind="dropped")
    dropped = {e["id"]: e for e in doc["events"]}
    assert len(dropped) == 2
    assert dropped[msg.id.decode()]["why"] == "channel deleted"
    assert {e["channel"] for e in dropped.values()} == {"c"}
    published = await get(client, server, "/nsqbox/journal", kind="published")
    assert [e["via"] for e in published["events"]] == ["MPUB", "MPUB"]
    assert {e["id"] for e in published["events"]} == set(dropped)
    await holder.aclose()


async def test_bad_parameters_and_the_off_switch(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    for path, params, message in [
        ("/nsqbox/journal", {"id": "short"}, "INVALID_ID"),
        ("/nsqbox/journal", {"kind": "published,nope"}, "INVALID_KIND"),
        ("/nsqbox/journal", {"limit": "0"}, "INVALID_LIMIT"),
        ("/nsqbox/journal", {"limit": "1001"}, "INVALID_LIMIT"),
        ("/nsqbox/journal", {"after": "-1"}, "INVALID_AFTER"),
        ("/nsqbox/journal", {"since": "9" * 30}, "INVALID_SINCE"),
        ("/nsqbox/journal", {"topic": "t!"}, "INVALID_TOPIC"),
        ("/nsqbox/journal/troubles", {"topic": "t"}, "MISSING_ARG_CHANNEL"),
        ("/nsqbox/journal/troubles", {"channel": "c"}, "MISSING_ARG_TOPIC"),
        (
            "/nsqbox/journal/troubles",
            {"topic": "t", "channel": "c", "timed_out": "x"},
            "INVALID_TIMED_OUT",
        ),
        ("/nsqbox/journal/given_up", {"topic": "t", "channel": "c!"}, "INVALID_CHANNEL"),
        (
            "/nsqbox/journal/given_up",
            {"topic": "t", "channel": "c", "body_bytes": "x"},
            "INVALID_BODY_BYTES",
        ),
    ]:
        response = await client.get(f"{server.url}{path}", params=params)
        assert (response.status_code, response.json()) == (400, {"message": message}), path

    (tmp_path / "off").mkdir()
    off = await start_nsqd_http(nursery, tmp_path / "off", journal_size=0)
    assert off.nsqd.journal is None
    for path in ("/nsqbox/journal", "/nsqbox/journal/given_up?topic=t&channel=c"):
        response = await client.get(f"{off.url}{path}")
        assert (response.status_code, response.json()) == (404, {"message": "JOURNAL_OFF"})


def test_the_ring_keeps_its_bounds() -> None:
    from nsqbox.nsqd.domain.message import GUIDFactory

    journal = Journal(10, wall_ns=lambda: 1, now=lambda: 1.0, clients={})
    factory = GUIDFactory(1)
    for _ in range(25):
        journal.append(Published(("t", None), factory.messages([b"x", b"y", b"z"], 1), 0.0, 3))
    journal.trim()  # entries past the bound go at the next queue scan
    assert (len(journal), journal.evicted, journal.recorded, journal.nbytes) == (
        10,
        15,
        25,
        30,
    )
    # the collector never tracks an entry: recording makes it run no more often
    assert not any(gc.is_tracked(entry) for entry in journal.entries)
    # a second scan's chunk: the oldest chunk goes whole, then the head of the next
    batches = [factory.messages([b"w"], 1) for _ in range(7)]
    for batch in batches:
        journal.append(Published(("t", None), batch, 0.0, 1))
    journal.trim()
    kept = [entry.refs for entry in journal.entries]
    assert (len(journal), journal.evicted, journal.nbytes) == (10, 22, 3 * 3 + 7)
    assert kept[3:] == batches
    bytes_bound = Journal(1000, wall_ns=lambda: 1, now=lambda: 1.0, clients={}, entry_bytes=1000)
    for _ in range(10):
        bytes_bound.append(Published(("t", None), factory.messages([b"a" * 300], 1), 0.0, 300))
    bytes_bound.trim()
    assert (len(bytes_bound), bytes_bound.nbytes) == (3, 900)
    huge = factory.messages([b"h" * 5000], 1)
    bytes_bound.append(Published(("t", None), huge, 0.0, 5000))
    bytes_bound.trim()  # one entry over the bound: kept alone, the newest
    assert (len(bytes_bound), bytes_bound.nbytes) == (1, 5000)


async def test_held_then_copied_to_two_channels_and_a_dpub_falls_due(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    async with open_producer(server.tcp) as producer:
        await producer.pub("t", b"held")  # no channel yet: the topic holds it
        for name in ("a", "b"):
            response = await client.post(
                f"{server.url}/channel/create", params={"topic": "t", "channel": name}
            )
            assert response.status_code == 200
        await wait_until(lambda: server.nsqd.topics["t"].depth() == 0)
        await producer.pub("t", b"copied")  # straight into both channels' memory
        conn = await RawConn.open(server.tcp)
        await conn.send(commands.dpub("t", 50, b"later"))
        assert await conn.response() == b"OK"
        await conn.aclose()
    channels = server.nsqd.topics["t"].channels
    await wait_until(lambda: all(c.deferred_count() == 0 for c in channels.values()))

    doc = await get(client, server, "/nsqbox/journal", kind="published")
    assert [e["via"] for e in doc["events"]] == ["PUB", "PUB", "DPUB"]
    assert doc["events"][2]["defer_ms"] == 50
    held, copied, later = (doc["events"][i]["id"] for i in range(3))
    # the topic handed what it held to its first channel, as soon as it had one
    for msg_id, copies in ((held, ["a"]), (copied, ["a", "b"])):
        events = await journey(client, server, msg_id)
        queued = sorted((e["channel"], e["to"]) for e in events if e["kind"] == "queued")
        assert queued == [(name, "memory") for name in copies], msg_id
    events = await journey(client, server, later)
    assert [e["kind"] for e in events] == ["published", *["deferred"] * 2, *["due"] * 2]
    assert {e["channel"] for e in events[1:3]} == {e["channel"] for e in events[3:]} == {"a", "b"}
    assert events[3]["time"] - events[1]["time"] >= 50_000_000  # its delay, in broker time
    only_b = await get(client, server, "/nsqbox/journal", id=later, channel="b")
    assert [e["kind"] for e in only_b["events"]] == ["deferred", "due"]
    assert len({held, copied, later}) == 3


async def test_an_mpubs_entry_keeps_its_first_message_not_the_list(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    taker = await consumer(server, "taker", rdy=10)
    same, mixed = [b"%05d" % i for i in range(5)], [b"a", b"bb", b"ccc"]
    async with open_producer(server.tcp) as producer:
        await producer.mpub("t", same)
        await producer.mpub("t", mixed)
    got = [await taker.message() for _ in range(8)]

    doc = await get(client, server, "/nsqbox/journal", kind="published")
    events = doc["events"]
    assert [e["id"] for e in events] == [m.id.decode() for m in got]
    assert [e["size"] for e in events] == [5] * 5 + [1, 2, 3]
    assert {e["via"] for e in events} == {"MPUB"}
    kept = [e.refs for e in server.journal.entries if e.__class__ is Published]
    assert [r.__class__ for r in kept] == [Run, list]  # sizes differ: the list stays
    await taker.aclose()


def test_a_batch_across_two_ticks_keeps_its_list() -> None:
    head = b"0123456789abc"
    msgs = [Message(head + b"fff" + b"x", 1), Message(b"0123456789abd" + b"000" + b"y", 1)]
    assert run_of(msgs, [b"x", b"y"], 2) is msgs
    same_tick = [Message(head + b"ffe" + b"x", 1), Message(head + b"fff" + b"y", 1)]
    run = run_of(same_tick, [b"x", b"y"], 2)
    assert isinstance(run, Run)
    assert run.ids() == [head + b"ffe", head + b"fff"]


def test_a_batch_read_in_one_piece_is_a_run_only_if_its_sizes_are_one() -> None:
    head = b"0123456789abc"
    msgs = [Message(head + f"{i:03x}".encode() + b"x", 1) for i in range(3)]

    def packed(bodies: list[bytes]) -> bytes:
        return b"".join(len(b).to_bytes(4, "big") + b for b in bodies)

    alike = [b"ab", b"cd", b"ef"]
    run = run_of(msgs, alike, 6, packed(alike))
    assert isinstance(run, Run)
    assert (run.count, run.size) == (3, 2)
    # the same sum, sizes that differ, in every one of a size's four bytes
    for bodies in ([b"ab", b"c", b"def"], [b"ab", b"cd", b"e" * 258], [b"a" * 256, b"bc"]):
        some = msgs[: len(bodies)]
        assert run_of(some, bodies, len(b"".join(bodies)), packed(bodies)) is some
    # a text /mpub's body: its lines
    assert isinstance(run_of(msgs, alike, 6, b"\n".join(alike), lined=True), Run)
    for bodies in ([b"ab", b"c", b"def"], [b"abc", b"d", b"ef"]):
        assert run_of(msgs, bodies, 6, b"\n".join(bodies), lined=True) is msgs


async def test_a_batch_put_on_disk_is_one_entry_of_its_first_message(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, mem_queue_size=0)
    for path in ("/topic/create", "/channel/create"):
        response = await client.post(f"{server.url}{path}", params={"topic": "t", "channel": "c"})
        assert response.status_code == 200, response.text
    async with open_producer(server.tcp) as producer:
        await producer.mpub("t", [b"a", b"bb", b"ccc"])
    doc = await get(client, server, "/nsqbox/journal", kind="queued", channel="c")
    published = await get(client, server, "/nsqbox/journal", kind="published")
    assert [e["to"] for e in doc["events"]] == ["disk"] * 3
    assert [e["id"] for e in doc["events"]] == [e["id"] for e in published["events"]]
    disk = [e for e in server.journal.entries if getattr(e, "a", None) == "disk"]
    assert [e.refs.__class__ for e in disk] == [Run]


def test_who_a_client_was_is_bounded() -> None:
    journal = Journal(10, wall_ns=lambda: 1, now=lambda: 1.0, clients={})

    class Client:
        id = 7
        remote_address = "127.0.0.1:1"
        user_agent = "u" * 10_000
        hostname = "h" * 300
        client_id = "c"

    journal.seen(Client())
    who = journal.who[7]
    assert (len(who.user_agent), len(who.hostname), who.client_id) == (256, 256, "c")


def test_a_batch_past_its_ticks_sequences_keeps_its_list() -> None:
    bodies = [b"x"] * 5000  # more than a tick's 4,096 ids: the factory borrows the next tick
    msgs = GUIDFactory(1).messages(bodies, 1)
    assert run_of(msgs, bodies, len(bodies), b"\n".join(bodies), lined=True) is msgs
    within = GUIDFactory(2).messages(bodies[:100], 1)
    run = run_of(within, bodies[:100], 100, b"\n".join(bodies[:100]), lined=True)
    assert isinstance(run, Run)
    assert run.ids() == [m.id for m in within]
