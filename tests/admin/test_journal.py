"""The admin service's journal routes (every node's journal, merged), over sockets.

Real boxes (``serve_box``: lookupd, two nsqds sharing one manual broker clock, the admin
service) on 127.0.0.1, port 0; the clock is stepped between publishes so that broker-time
order and node order differ, and a merge that only concatenated the nodes would fail.
"""

from __future__ import annotations

import base64
import socket
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.journal import JOURNAL_OFF, KINDS, NOT_SUPPORTED
from nsqbox.nsqd.domain.journal import KINDS as NSQD_KINDS
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxOptions
from tests.admin.conftest import Box, real_nsqd, register_ghost, running_box
from tests.helpers import RawConn, eventually

TIMEOUT = 10
#: What a node's report holds in an answer of events (journey, journal) and of a channel's
#: list (troubles, given up): docs/journeys.md, "Over a cluster".
EVENTS_REPORT = ["error", "hostname", "listed", "more", "node", "oldest", "recorded", "supported"]
LIST_REPORT = ["count", "error", "hostname", "listed", "more", "node", "supported"]


async def start(nursery: trio.Nursery, tmp_path: Path, **nsqd: Any) -> AsyncIterator[Box]:
    options = BoxOptions(
        nsqd=NSQDOptions(data_path=str(tmp_path / "data"), node_id=0, **nsqd),
        nsqd_count=2,
        clock="manual",
    )
    async for box in running_box(nursery, options):
        yield box


@pytest.fixture
async def box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    async for started in start(nursery, tmp_path):
        yield started


async def api(box: Box, path: str, **params: str) -> tuple[int, Any]:
    with trio.fail_after(TIMEOUT):
        response = await box.client.get(f"{box.admin}{path}", params=params)
    return response.status_code, response.json()


async def advance(box: Box, seconds: float) -> None:
    clock = box.addresses.clock
    assert clock is not None
    with trio.fail_after(TIMEOUT):
        await clock.advance(seconds)


async def pub(box: Box, index: int, topic: str, body: bytes) -> None:
    url = f"http://{box.nsqd_http(index)}/pub"
    response = await box.client.post(url, params={"topic": topic}, content=body)
    assert response.status_code == 200, response.text


async def recorded(box: Box, index: int, view: str, topic: str, count: int) -> bool:
    """Whether node ``index``'s ``view`` (troubles, given_up) of channel c lists ``count``."""
    url = f"http://{box.nsqd_http(index)}/nsqbox/journal/{view}"
    response = await box.client.get(url, params={"topic": topic, "channel": "c"})
    return len(response.json()["messages"]) == count


def test_the_admin_knows_every_kind_nsqd_records() -> None:
    assert KINDS == NSQD_KINDS


async def test_two_nodes_events_for_one_topic_merge_in_broker_time_order(box: Box) -> None:
    await box.create_channel(0, "merged", "c")
    await box.create_channel(1, "merged", "c")
    # node 1 first, then node 0, and so on, a second of broker time apart
    order = [(1, b"b0"), (0, b"a0"), (1, b"b1"), (0, b"a1"), (0, b"a2"), (1, b"b2")]
    for index, body in order:
        await pub(box, index, "merged", body)
        await advance(box, 1)
    status, doc = await api(box, "/api/journal/merged", kind="published")
    assert status == 200, doc
    nodes = [box.nsqd_http(i) for i, _ in order]
    events = doc["events"]
    assert [e["node"] for e in events] == nodes
    assert [e["size"] for e in events] == [2] * len(order)
    times = [e["time"] for e in events]
    assert times == sorted(times)
    assert len(set(times)) == len(times)
    assert doc["next"] is None
    assert {n["node"]: (n["supported"], n["listed"]) for n in doc["nodes"]} == {
        box.nsqd_http(0): (True, 3),
        box.nsqd_http(1): (True, 3),
    }
    for report in doc["nodes"]:  # the ring's numbers; no count (that is the lists')
        assert sorted(report) == EVENTS_REPORT
        assert report["recorded"] >= 3
        numbers = [e["n"] for e in events if e["node"] == report["node"]]
        assert 0 <= report["oldest"] <= min(numbers)  # the ring still holds what it listed
    # every event (queued copies too) in time order, each node's in its own order
    status, full = await api(box, "/api/journal/merged/c")
    assert status == 200, full
    times = [e["time"] for e in full["events"]]
    assert times == sorted(times)
    assert {e["kind"] for e in full["events"]} == {"queued"}  # a channel's own: its copies
    assert [e["node"] for e in full["events"]] == nodes
    # page by page (one event a node each time), the same order: no page goes back in time
    paged: list[dict[str, Any]] = []
    cursor = ""
    for _ in range(len(order) + 2):  # a bound: each page gives at least one event
        params = {"kind": "published", "limit": "1"}
        if cursor:
            params["cursor"] = cursor
        status, page = await api(box, "/api/journal/merged", **params)
        assert status == 200, page
        paged += page["events"]
        cursor = page["next"]
        if cursor is None:
            break
    assert [(e["node"], e["n"]) for e in paged] == [(e["node"], e["n"]) for e in events]


async def test_a_journey_through_the_admin_names_its_node_and_clients(box: Box) -> None:
    await box.create_channel(0, "trips", "c")
    await box.create_channel(1, "trips", "c")
    await pub(box, 0, "trips", b"the body")
    consumer = await RawConn.open(box.addresses.nsqds[0].tcp)
    try:
        await consumer.identify(user_agent="agent-1")
        await consumer.sub("trips", "c", rdy=1)
        first = await consumer.message()
        await consumer.send(b"REQ " + first.id + b" 0\n")
        second = await consumer.message()
        assert second.attempts == 2
        await consumer.send(b"FIN " + second.id + b"\n")
        await eventually(lambda: recorded(box, 0, "given_up", "trips", 1))
    finally:
        await consumer.aclose()
    msg_id = first.id.decode()
    status, doc = await api(box, f"/api/journey/{msg_id}")
    assert status == 200, doc
    assert doc["id"] == msg_id
    events = doc["events"]
    steps = [(e["kind"], e.get("attempt")) for e in events if e["kind"] != "queued"]
    assert steps == [
        ("published", None),
        ("delivered", 1),
        ("requeued", None),
        ("delivered", 2),
        ("finished", 2),
    ]
    assert {e["node"] for e in events} == {box.nsqd_http(0)}
    # as the node writes them: the publish's channel is there, "" (a topic's own)
    assert [(e["topic"], e["channel"]) for e in events if e["kind"] == "published"] == [
        ("trips", "")
    ]
    assert [e.get("user_agent") for e in events if e["kind"] == "delivered"] == ["agent-1"] * 2
    reports = {n["node"]: n for n in doc["nodes"]}
    assert reports[box.nsqd_http(1)]["listed"] == 0
    assert reports[box.nsqd_http(1)]["supported"] is True
    # the client gave up at attempt 2: given up on node 0, with its body
    status, given = await api(box, "/api/given_up/trips/c")
    assert status == 200, given
    assert [(m["id"], m["node"], m["attempts"]) for m in given["messages"]] == [
        (msg_id, box.nsqd_http(0), 2)
    ]
    assert base64.b64decode(given["messages"][0]["body"]) == b"the body"
    assert given["messages"][0]["finished_by"]["user_agent"] == "agent-1"
    status, none = await api(box, "/api/given_up/trips/c", attempts="3")
    assert (status, none["messages"]) == (200, [])


async def test_given_up_counts_what_it_does_not_list(box: Box) -> None:
    await box.create_channel(0, "quits", "c")
    for body in (b"first", b"second"):
        await pub(box, 0, "quits", body)
    consumer = await RawConn.open(box.addresses.nsqds[0].tcp)
    try:
        await consumer.sub("quits", "c", rdy=1)
        finished = 0
        while finished < 2:  # each message fails once, then is finished: given up on
            message = await consumer.message()
            if message.attempts == 1:
                await consumer.send(b"REQ " + message.id + b" 0\n")
            else:
                await consumer.send(b"FIN " + message.id + b"\n")
                finished += 1
        await eventually(lambda: recorded(box, 0, "given_up", "quits", 2))
    finally:
        await consumer.aclose()
    status, doc = await api(box, "/api/given_up/quits/c", limit="1")
    assert status == 200, doc
    assert (doc["count"], len(doc["messages"])) == (2, 1)  # as /api/troubles counts
    (report,) = doc["nodes"]  # the topic's one node
    assert sorted(report) == LIST_REPORT  # nothing of the journal's ring: not this list's
    assert {k: report[k] for k in ("node", "count", "listed", "more")} == {
        "node": box.nsqd_http(0),
        "count": 2,
        "listed": 1,
        "more": True,
    }
    status, whole = await api(box, "/api/given_up/quits/c")
    assert (status, whole["count"], whole["nodes"][0]["more"]) == (200, 2, False)
    assert whole["messages"][0] == doc["messages"][0]  # newest first
    assert sorted(base64.b64decode(m["body"]) for m in whole["messages"]) == [b"first", b"second"]
    status, doc = await api(box, "/api/given_up/quits/c", attempts="3")
    assert (status, doc["count"], doc["messages"]) == (200, 0, [])


async def test_troubles_merge_the_nodes(box: Box) -> None:
    for index in (0, 1):
        await box.create_channel(index, "bumpy", "c")
        await pub(box, index, "bumpy", f"body {index}".encode())
    held = []
    for index in (0, 1):
        consumer = await RawConn.open(box.addresses.nsqds[index].tcp)
        held.append(consumer)
        await consumer.sub("bumpy", "c", rdy=1)
        message = await consumer.message()
        await consumer.send(b"REQ " + message.id + b" 60000\n")  # back, deferred a minute
        await eventually(lambda index=index: recorded(box, index, "troubles", "bumpy", 1))
        await advance(box, 1)
    try:
        status, doc = await api(box, "/api/troubles/bumpy/c")
        assert status == 200, doc
        assert doc["count"] == 2
        listed = [(m["node"], base64.b64decode(m["body"]), m["requeues"]) for m in doc["messages"]]
        assert listed == [(box.nsqd_http(0), b"body 0", 1), (box.nsqd_http(1), b"body 1", 1)]
        status, narrowed = await api(
            box, "/api/troubles/bumpy/c", node=box.nsqd_http(1), body_bytes="2"
        )
        assert status == 200, narrowed
        assert [base64.b64decode(m["body"]) for m in narrowed["messages"]] == [b"bo"]
        assert [m["size"] for m in narrowed["messages"]] == [6]
        assert [sorted(report) for report in doc["nodes"]] == [LIST_REPORT] * 2
        assert [report["count"] for report in doc["nodes"]] == [1, 1]
    finally:
        for consumer in held:
            await consumer.aclose()


@pytest.mark.parametrize(
    ("path", "params", "error"),
    [
        pytest.param("/api/journey/short", {}, "INVALID_ID", id="id"),
        pytest.param("/api/journey/0123456789abcdef", {"topic": "a b"}, "INVALID_TOPIC", id="t"),
        pytest.param("/api/journal/t", {"kind": "published,nope"}, "INVALID_KIND", id="kind"),
        pytest.param("/api/journal/t", {"limit": "1001"}, "INVALID_LIMIT", id="limit"),
        pytest.param("/api/journal/t", {"since": "-1"}, "INVALID_SINCE", id="since"),
        pytest.param("/api/journal/t", {"cursor": "!!"}, "INVALID_CURSOR", id="cursor"),
        pytest.param("/api/troubles/t/c", {"timed_out": "1"}, "INVALID_TIMED_OUT", id="to"),
        pytest.param("/api/given_up/t/c%20d", {}, "INVALID_CHANNEL", id="channel"),
        pytest.param("/api/given_up/t/c", {"body_bytes": "x"}, "INVALID_BODY_BYTES", id="bb"),
    ],
)
async def test_bad_arguments_are_refused(
    box: Box, path: str, params: dict[str, str], error: str
) -> None:
    await pub(box, 0, "t", b"m")
    await box.synced()
    assert await api(box, path, **params) == (400, {"message": error})


async def test_an_unknown_node_or_topic(box: Box) -> None:
    await pub(box, 0, "t", b"m")
    await box.synced()
    status, doc = await api(box, "/api/troubles/t/c", node="127.0.0.1:1")
    assert (status, doc) == (404, {"message": "NODE_NOT_FOUND"})
    status, doc = await api(box, "/api/given_up/nowhere/c")
    assert (status, doc) == (404, {"message": "TOPIC_NOT_FOUND"})


async def test_a_foreign_host_or_origin_reads_nothing(box: Box) -> None:
    await pub(box, 0, "t", b"secret body")
    await box.synced()
    port = box.addresses.admin.http[1]
    for path in ("/api/journal/t", "/api/troubles/t/c", "/api/journey/0123456789abcdef"):
        headers = {"Host": f"evil.example:{port}"}  # DNS rebinding
        response = await box.client.get(f"{box.admin}{path}", headers=headers)
        assert (response.status_code, response.json()) == (403, {"message": "HOST_NOT_ALLOWED"})
        headers = {"Origin": "http://evil.example"}  # another site's page, through a browser
        response = await box.client.get(f"{box.admin}{path}", headers=headers)
        assert (response.status_code, response.json()) == (403, {"message": "ORIGIN_NOT_ALLOWED"})
        response = await box.client.get(f"{box.admin}{path}")  # curl, a script: answered
        assert response.status_code == 200, response.text


async def test_off_under_auth(nursery: trio.Nursery, tmp_path: Path) -> None:
    async for box in start(nursery, tmp_path, auth_http_addresses=["127.0.0.1:1"]):
        for path in ("/api/journal/t", "/api/troubles/t/c", "/api/given_up/t/c"):
            assert await api(box, path) == (404, {"message": "NOT_FOUND"})
        assert await api(box, "/api/journey/0123456789abcdef") == (404, {"message": "NOT_FOUND"})


async def test_a_real_nsqd_is_reported_as_not_supported(box: Box, tmp_path: Path) -> None:
    await box.create_channel(0, "mixed", "c")
    async with real_nsqd(box, tmp_path / "real") as real:

        async def created_on_real_nsqd() -> bool:
            try:
                for path in ("/topic/create", "/channel/create"):
                    response = await box.client.post(
                        f"http://{real}{path}", params={"topic": "mixed", "channel": "c"}
                    )
                    if response.status_code != 200:
                        return False
            except httpx.TransportError:
                return False  # not listening yet
            return True

        await eventually(created_on_real_nsqd)

        async def both_producers_known() -> bool:
            lookup = await box.lookupd("/lookup", topic="mixed")
            assert isinstance(lookup, dict)
            return len(lookup["producers"]) == 2

        await eventually(both_producers_known, every=0.05)
        for path in ("/api/troubles/mixed/c", "/api/given_up/mixed/c", "/api/journal/mixed"):
            status, doc = await api(box, path)
            assert status == 200, (path, doc)
            reports = {n["node"]: n for n in doc["nodes"]}
            assert (reports[real]["supported"], reports[real]["error"]) == (False, NOT_SUPPORTED)
            assert reports[box.nsqd_http(0)]["supported"] is True
            assert doc["message"] == ""
        status, doc = await api(box, "/api/journey/0123456789abcdef", topic="mixed")
        assert status == 200, doc
        assert {n["node"]: n["supported"] for n in doc["nodes"]} == {
            real: False,
            box.nsqd_http(0): True,
        }


async def test_a_node_that_does_not_answer_is_a_warning(box: Box) -> None:
    await box.create_channel(0, "haunted", "c")
    await pub(box, 0, "haunted", b"here")
    with socket.socket() as taken:  # bound, never listening: the node refuses connections
        taken.bind(("127.0.0.1", 0))
        port = int(taken.getsockname()[1])
        await ghost_topic(box, port)


async def ghost_topic(box: Box, port: int) -> None:
    ghost = await register_ghost(box.addresses.lookupd.tcp, port, "haunted")
    async with ghost:
        for path in ("/api/journal/haunted", "/api/troubles/haunted/c", "/api/given_up/haunted/c"):
            status, doc = await api(box, path)
            assert status == 200, (path, doc)
            assert doc["message"].startswith(f"WARNING: http://127.0.0.1:{port}/nsqbox/"), doc
            reports = {n["node"]: n for n in doc["nodes"]}
            assert reports[f"127.0.0.1:{port}"]["supported"] is True
            assert reports[f"127.0.0.1:{port}"]["error"].startswith(f"http://127.0.0.1:{port}")
            assert reports[box.nsqd_http(0)]["error"] == ""
        status, doc = await api(box, "/api/journal/haunted", kind="published")
        assert [e["node"] for e in doc["events"]] == [box.nsqd_http(0)]


async def test_a_node_with_its_journal_off(nursery: trio.Nursery, tmp_path: Path) -> None:
    async for box in start(nursery, tmp_path, journal_size=0):
        await box.create_channel(0, "quiet", "c")
        await pub(box, 0, "quiet", b"m")
        status, doc = await api(box, "/api/given_up/quiet/c")
        assert status == 200, doc
        assert doc["messages"] == []
        assert [(n["supported"], n["error"]) for n in doc["nodes"]] == [(False, JOURNAL_OFF)]
        assert doc["message"] == ""
