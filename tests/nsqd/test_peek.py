"""nsqbox's ``GET /nsqbox/peek``: what a channel or topic holds, listed without changing it.

Real nsqd on 127.0.0.1 port 0 (TCP and HTTP), real consumers over TCP.
"""

from __future__ import annotations

import base64
import tracemalloc
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.nsqd.diskqueue.queue import DiskQueue
from nsqbox.nsqd.domain.channel import Channel
from nsqbox.wire import commands
from tests.helpers import RawConn, wait_until
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http


@pytest.fixture
async def client(nursery: trio.Nursery) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


async def peek(http: httpx.AsyncClient, server: NSQDWithHTTP, **params: Any) -> Any:
    response = await http.get(f"{server.url}/nsqbox/peek", params=params)
    assert response.status_code == 200, response.text
    return response.json()


async def peek_all(http: httpx.AsyncClient, server: NSQDWithHTTP, **params: Any) -> list[Any]:
    """Every message, page by page."""
    messages: list[Any] = []
    cursor = ""
    while True:
        doc = await peek(http, server, **params, cursor=cursor)
        messages += doc["messages"]
        if doc["next"] is None:
            return messages
        cursor = doc["next"]


def body(doc: Any) -> bytes:
    return base64.b64decode(doc["body"])


def state_of(channel: Channel) -> tuple[int, int, int, int]:
    return (
        channel.depth(),
        channel.backend_depth(),
        channel.in_flight_count(),
        channel.deferred_count(),
    )


def on_disk(backend: DiskQueue, data_path: Path) -> tuple[object, ...]:
    """The meta file's bytes, the queue's positions and depth, and the data path's files."""
    meta = Path(backend.meta_file_name).read_bytes()
    return (meta, backend.positions, backend.depth, sorted(data_path.iterdir()))


async def test_topic_memory_deferred_and_in_flight(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    producer = await RawConn.open(server.tcp)
    await producer.pub("t", b"a")
    await producer.pub("t", b"b" * 50)
    await producer.send(commands.dpub("t", 60_000, b"c"))
    assert await producer.response() == b"OK"

    # no channel yet: the topic holds them, a DPUB with its delay
    doc = await peek(client, server, topic="t")
    assert [(m["state"], body(m)) for m in doc["messages"]] == [
        ("memory", b"a"),
        ("memory", b"b" * 50),
        ("memory", b"c"),
    ]
    assert [m.get("defer_ms") for m in doc["messages"]] == [None, None, 60_000]
    assert (doc["depth"], doc["channel"], doc["next"]) == (3, None, None)
    for params, message in [
        ({"topic": "nope"}, "TOPIC_NOT_FOUND"),
        ({"topic": "t", "channel": "c"}, "CHANNEL_NOT_FOUND"),
    ]:
        response = await client.get(f"{server.url}/nsqbox/peek", params=params)
        assert (response.status_code, response.json()) == (404, {"message": message})
    for params, message in [
        ({}, "MISSING_ARG_TOPIC"),
        ({"topic": "t!"}, "INVALID_TOPIC"),
        ({"topic": "t", "limit": "0"}, "INVALID_LIMIT"),
        ({"topic": "t", "body_bytes": "x"}, "INVALID_BODY_BYTES"),
        ({"topic": "t", "cursor": "in_flight:0"}, "INVALID_CURSOR"),
        ({"topic": "t", "cursor": "disk:1"}, "INVALID_CURSOR"),
    ]:
        response = await client.get(f"{server.url}/nsqbox/peek", params=params)
        assert (response.status_code, response.json()) == (400, {"message": message})
    assert "nope" not in server.nsqd.topics  # peeking creates nothing

    consumer = await RawConn.open(server.tcp)
    await consumer.sub("t", "c", rdy=1)
    first = await consumer.message()
    assert first.body == b"a"
    channel = server.nsqd.topics["t"].channels["c"]
    await wait_until(lambda: state_of(channel) == (1, 0, 1, 1))

    pages = []
    cursor = ""
    while cursor is not None:
        doc = await peek(
            client, server, topic="t", channel="c", limit=1, body_bytes=2, cursor=cursor
        )
        pages.append(doc["messages"])
        cursor = doc["next"]
    listed = [m for page in pages for m in page]
    assert [(m["state"], body(m), m["size"]) for m in listed] == [
        ("memory", b"bb", 50),
        ("deferred", b"c", 1),
        ("in_flight", b"a", 1),
    ]
    assert all(len(page) <= 1 for page in pages)
    deferred, in_flight = listed[1], listed[2]
    assert 0 < deferred["defer_left_ms"] <= 60_000
    assert in_flight["id"] == first.id.decode()
    assert in_flight["attempts"] == 1
    assert 0 < in_flight["timeout_left_ms"] <= 60_000
    assert in_flight["client_id"] in server.nsqd.clients
    assert in_flight["client"].startswith("127.0.0.1:")
    assert all(m["timestamp"] > 0 for m in listed)
    assert (doc["depth"], doc["in_flight_count"], doc["deferred_count"]) == (1, 1, 1)

    # nothing changed: the consumer gets the queued one next, the deferred one waits
    assert state_of(channel) == (1, 0, 1, 1)
    await consumer.send(commands.fin(first.id))
    second = await consumer.message()
    assert (second.body, second.attempts) == (b"b" * 50, 1)
    await wait_until(lambda: state_of(channel) == (0, 0, 1, 1))
    await consumer.aclose()
    await producer.aclose()


async def test_a_requeued_message_in_a_channel_has_no_delay(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    # defer_ms is a topic's DPUB delay; a channel's message back from a consumer keeps its
    # last lease (who had it, until when), which is not a delay
    server = await start_nsqd_http(nursery, tmp_path)
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("r", "c", rdy=1)
    producer = await RawConn.open(server.tcp)
    await producer.pub("r", b"again")
    msg = await consumer.message()
    await consumer.send(commands.rdy(0))
    await consumer.send(commands.req(msg.id, 0))
    channel = server.nsqd.topics["r"].channels["c"]
    await wait_until(lambda: state_of(channel) == (1, 0, 0, 0))
    (listed,) = (await peek(client, server, topic="r", channel="c"))["messages"]
    assert (listed["state"], listed["attempts"], body(listed)) == ("memory", 1, b"again")
    assert "defer_ms" not in listed
    await consumer.aclose()
    await producer.aclose()


async def test_disk_without_moving_the_read_position(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(
        nursery, tmp_path, mem_queue_size=0, sync_every=1, max_bytes_per_file=150
    )
    await client.post(f"{server.url}/topic/create", params={"topic": "d"})
    create = await client.post(
        f"{server.url}/channel/create", params={"topic": "d", "channel": "c"}
    )
    assert create.status_code == 200
    bodies = [b"disk-%03d" % i for i in range(30)]
    published = await client.post(
        f"{server.url}/mpub", params={"topic": "d"}, content=b"\n".join(bodies)
    )
    assert published.status_code == 200
    channel = server.nsqd.topics["d"].channels["c"]
    backend = channel.backend
    assert isinstance(backend, DiskQueue)
    assert state_of(channel) == (30, 30, 0, 0)

    # a consumer takes 5, so the read position is inside a later file
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("d", "c", rdy=5)
    taken = [await consumer.message() for _ in range(5)]
    await consumer.send(commands.rdy(0))
    for msg in taken:
        await consumer.send(commands.fin(msg.id))
    await wait_until(lambda: state_of(channel) == (25, 25, 0, 0))
    assert 0 < backend.positions[0] < backend.positions[2]  # records span several files

    backend.settle()  # the last FIN's sync may still be writing the meta file
    before = on_disk(backend, tmp_path)
    listed = await peek_all(client, server, topic="d", channel="c", limit=7, body_bytes=6)
    assert [(m["state"], body(m), m["size"]) for m in listed] == [
        ("disk", b[:6], len(b)) for b in bodies[5:]
    ]
    assert all(m["attempts"] == 0 for m in listed)
    # an old disk cursor goes on at the read position
    stale = await peek(client, server, topic="d", channel="c", limit=1, cursor="disk:0:0")
    assert stale["messages"][0]["id"] == listed[0]["id"]
    assert on_disk(backend, tmp_path) == before
    assert state_of(channel) == (25, 25, 0, 0)

    # every message exactly once, in the order listed
    await consumer.send(commands.rdy(100))
    rest = [await consumer.message() for _ in range(25)]
    assert [m.id.decode() for m in rest] == [m["id"] for m in listed]
    assert [m.body for m in rest] == bodies[5:]
    await wait_until(lambda: state_of(channel) == (0, 0, 25, 0))
    await consumer.aclose()


async def test_paging_a_deep_queue_in_bounded_pages(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    total, in_memory = 100_000, 50_000
    server = await start_nsqd_http(nursery, tmp_path, mem_queue_size=in_memory)
    await client.post(f"{server.url}/topic/create", params={"topic": "deep"})
    create = await client.post(
        f"{server.url}/channel/create", params={"topic": "deep", "channel": "c"}
    )
    assert create.status_code == 200
    for start in range(0, total, 5000):
        batch = b"\n".join(b"%06d" % i for i in range(start, start + 5000))
        published = await client.post(f"{server.url}/mpub", params={"topic": "deep"}, content=batch)
        assert published.status_code == 200
    channel = server.nsqd.topics["deep"].channels["c"]
    assert state_of(channel) == (total, total - in_memory, 0, 0)

    # page through it all, keeping only the ids: what each page costs while it is listed
    # (server and client, traced) must not grow with how far into the queue it is
    ids: set[str] = set()
    states: list[str] = []
    costs: list[int] = []
    largest = 0
    cursor = ""
    tracemalloc.start()
    try:
        while cursor is not None:
            before = tracemalloc.get_traced_memory()[0]
            tracemalloc.reset_peak()
            response = await client.get(
                f"{server.url}/nsqbox/peek",
                params={"topic": "deep", "channel": "c", "limit": 1000, "body_bytes": 64,
                        "cursor": cursor},
            )  # fmt: skip
            doc = response.json()
            costs.append(tracemalloc.get_traced_memory()[1] - before)
            assert response.status_code == 200, doc
            largest = max(largest, len(response.content))
            start = len(states)
            assert [body(m) for m in doc["messages"]] == [
                b"%06d" % i for i in range(start, start + len(doc["messages"]))
            ]
            ids.update(m["id"] for m in doc["messages"])
            states += [m["state"] for m in doc["messages"]]
            cursor = doc["next"]
            del doc, response
    finally:
        tracemalloc.stop()
    assert states == ["memory"] * in_memory + ["disk"] * (total - in_memory)
    assert len(ids) == total
    assert len(costs) >= total // 1000  # (the last may be empty)
    assert largest < 200 * 1000  # a page, whatever the depth
    # flat: the last pages (deep in the disk queue) cost what the first did, and a page
    # costs a small part of what the whole queue's listing would (~100 pages of it)
    assert max(costs) < 8 * 1024 * 1024, costs
    assert max(costs[-10:]) < 2 * max(costs[:10]) + 512 * 1024, costs
    assert state_of(channel) == (total, total - in_memory, 0, 0)


async def test_a_page_stops_at_its_byte_budget(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, max_msg_size=600_000)
    producer = await RawConn.open(server.tcp)
    for _ in range(4):
        await producer.pub("big", b"x" * 500_000)
    doc = await peek(client, server, topic="big", limit=10, body_bytes=1024 * 1024)
    assert (len(doc["messages"]), doc["next"]) == (3, "memory:3")
    doc = await peek(client, server, topic="big", body_bytes=1024 * 1024, cursor=doc["next"])
    assert (len(doc["messages"]), doc["next"]) == (1, None)
    await producer.aclose()


async def test_off_with_auth(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, auth_http_addresses=["127.0.0.1:1"])
    response = await client.get(f"{server.url}/nsqbox/peek", params={"topic": "t"})
    assert response.status_code == 404
