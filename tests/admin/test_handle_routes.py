"""The test handle over HTTP on the admin service: wait, capture, consume (issue #36).

Real boxes (``serve_box``: lookupd, nsqd, admin, with a manual clock) on 127.0.0.1
port 0 in the test's nursery, driven over HTTP as a Go or Node test would drive them,
together with ``/api/faults`` and ``/api/clock``. Two boxes never see each other's
clock, taps or faults.
"""

from __future__ import annotations

import base64
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.routes import wait as wait_routes
from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box

TIMEOUT = 10.0


@dataclass
class Box:
    """A running box and a client on its admin service and nsqd."""

    addresses: BoxAddresses
    client: httpx.AsyncClient

    @property
    def admin(self) -> str:
        return f"http://{format_address(self.addresses.admin.http)}"

    @property
    def nsqd(self) -> str:
        http = self.addresses.nsqds[0].http
        assert http is not None
        return f"http://{format_address(http)}"

    async def call(self, method: str, path: str, status: int = 200, **params: Any) -> Any:
        with trio.fail_after(TIMEOUT + 5):
            response = await self.client.request(method, self.admin + path, params=params)
        assert response.status_code == status, response.text
        return response.json()

    async def pub(self, topic: str, body: bytes, **params: Any) -> int:
        url = f"{self.nsqd}/pub"
        response = await self.client.post(url, params={"topic": topic, **params}, content=body)
        return response.status_code


async def _start(nursery: trio.Nursery, data: Path) -> Box:
    options = BoxOptions(nsqd=NSQDOptions(data_path=str(data), node_id=0), clock="manual")
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    return Box(addresses, httpx.AsyncClient(trust_env=False, timeout=TIMEOUT + 5))


@pytest.fixture
async def box(nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[Box]:
    started = await _start(nursery, tmp_path / "a")
    async with started.client:
        yield started


def _bodies(doc: dict[str, Any]) -> list[bytes]:
    return [base64.b64decode(m["body"]) for m in doc["messages"]]


async def test_wait_answers_the_counts_once_they_match(box: Box) -> None:
    assert await box.pub("orders", b"a") == 200
    await box.call("POST", "/api/consume/orders/billing", n=1)  # the channel exists
    async with trio.open_nursery() as nursery:
        nursery.start_soon(box.pub, "orders", b"b")
        nursery.start_soon(box.pub, "orders", b"c")
        doc = await box.call("GET", "/api/wait/orders/billing", depth=2, in_flight=0)
    assert doc == {
        "topic": "orders",
        "channel": "billing",
        "depth": 2,
        "in_flight": 0,
        "deferred": 0,
        "message_count": 3,
        "requeue_count": 0,
        "timeout_count": 0,
        "clients": 0,
    }
    topic = await box.call("GET", "/api/wait/orders", message_count=3)
    assert (topic["channel"], topic["depth"]) == (None, 0)


async def test_a_wait_is_bounded_and_says_what_it_last_saw(box: Box) -> None:
    assert await box.pub("orders", b"a") == 200
    doc = await box.call("GET", "/api/wait/orders", 408, depth=5, timeout="0.2")
    assert doc["message"] == (
        "WAIT_TIMEOUT: topic 'orders' did not have depth=5 in 0.2s; "
        "last seen depth=1, message_count=1"
    )
    missing = await box.call("GET", "/api/wait/none/c", 408, timeout="50ms")
    assert "last seen nothing (it does not exist)" in missing["message"]
    for params, code in (
        ({"timeout": "61s"}, "INVALID_TIMEOUT"),
        ({"timeout": "soon"}, "INVALID_TIMEOUT"),
        ({"depth": "-1"}, "INVALID_DEPTH"),
        ({"clients": "x"}, "INVALID_CLIENTS"),
    ):
        answer = await box.call("GET", "/api/wait/orders/c", 400, **params)
        assert answer == {"message": code}
    assert await box.call("GET", "/api/wait/bad!name", 400) == {"message": "INVALID_TOPIC"}
    on_a_topic = await box.call("GET", "/api/wait/orders", 400, in_flight=0)
    assert on_a_topic == {"message": "INVALID_IN_FLIGHT"}  # a channel's count


async def test_consume_takes_exactly_n_and_finishes_them(box: Box) -> None:
    await box.call("POST", "/api/consume/orders/billing", 408, n=1, timeout="0.1")
    for body in (b"1", b"2", b"3"):
        assert await box.pub("orders", body) == 200
    doc = await box.call("POST", "/api/consume/orders/billing", n=2)
    assert _bodies(doc) == [b"1", b"2"]
    assert [m["attempts"] for m in doc["messages"]] == [1, 1]
    await box.call("GET", "/api/wait/orders/billing", depth=1, in_flight=0, clients=0)
    late = await box.call("POST", "/api/consume/orders/billing", 408, n=2, timeout="0.2")
    assert late["message"].startswith("WAIT_TIMEOUT: 1 of 2 message(s) of channel 'billing'")
    await box.call("GET", "/api/wait/orders/billing", depth=0, in_flight=0, message_count=3)
    for n in ("2501", "-1", "x"):
        assert await box.call("POST", "/api/consume/orders/c", 400, n=n) == {"message": "INVALID_N"}
    assert await box.call("POST", "/api/consume/orders/c", 404, node=3) == {
        "message": "NODE_NOT_FOUND"
    }


async def channels(box: Box, topic: str) -> dict[str, tuple[int, int]]:
    """The channels of ``topic`` on the box's nsqd: name -> (depth, in_flight_count)."""
    stats = (await box.client.get(f"{box.nsqd}/stats", params={"format": "json"})).json()
    (found,) = [t for t in stats["topics"] if t["topic_name"] == topic]
    return {c["channel_name"]: (c["depth"], c["in_flight_count"]) for c in found["channels"]}


async def test_a_consume_subscribes_before_its_timeout_starts(box: Box) -> None:
    """``timeout`` is the wait for messages, from SUB's OK: ``n=0`` or a tiny ``timeout`` still
    creates the channel (the way tests in other languages create one)."""
    assert await box.call("POST", "/api/consume/jobs/created", n=0, timeout="1ms") == {
        "messages": []
    }
    late = await box.call("POST", "/api/consume/jobs/worker", 408, n=1, timeout="1ms")
    assert late == {
        "message": "WAIT_TIMEOUT: 0 of 1 message(s) of channel 'worker' of topic 'jobs' "
        "arrived in 0.001s (finished)"
    }
    assert await channels(box, "jobs") == {"created": (0, 0), "worker": (0, 0)}


async def test_a_sub_never_acknowledged_is_bounded_on_its_own(
    box: Box, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wait_routes, "SUBSCRIBE_TIMEOUT", 0.2)  # not 10 s in a test
    await box.call("POST", "/api/faults/stall", topic="stalled")  # SUB's OK is never sent
    doc = await box.call("POST", "/api/consume/stalled/c", 502, n=0, timeout="60s")
    assert doc == {"message": "UPSTREAM_ERROR: nsqd did not acknowledge SUB in 0.2s"}
    assert (await box.call("DELETE", "/api/faults"))["lifted"] == 1
    assert await box.call("POST", "/api/consume/stalled/c", n=0) == {"messages": []}


async def test_a_capture_across_a_restart_and_a_crash(box: Box) -> None:
    opened = await box.call("POST", "/api/captures", topic="orders")
    capture = f"/api/captures/{opened['id']}"
    assert await box.pub("orders", b"before") == 200
    read = await box.call("GET", capture)
    assert (_bodies(read), read["next"], read["lost"]) == ([b"before"], 1, False)
    assert await box.pub("orders", b"unread", defer=60_000) == 200
    await box.call("POST", "/api/faults/restart", node=0)
    assert await box.pub("orders", b"after restart") == 200
    await box.call("POST", "/api/faults/crash", node=0)
    await box.call("POST", "/api/faults/start", node=0)
    assert await box.pub("orders", b"after crash") == 200
    closed = await box.call("DELETE", capture, **{"from": 1})
    assert _bodies(closed) == [b"unread", b"after restart", b"after crash"]
    assert [m["defer_ms"] for m in closed["messages"]] == [60_000, 0, 0]
    assert (closed["next"], closed["lost"], closed["overflow"]) == (4, False, False)
    assert await box.call("GET", capture, 404) == {"message": "CAPTURE_NOT_FOUND"}
    # it created no channel and took nothing: the topic holds everything not lost
    stats = (await box.client.get(f"{box.nsqd}/stats", params={"format": "json"})).json()
    assert [t["channels"] for t in stats["topics"]] == [[]]


async def test_a_capture_that_ends_while_its_node_is_down_says_so(box: Box) -> None:
    opened = await box.call("POST", "/api/captures", topic="orders")
    assert await box.pub("orders", b"x") == 200
    await box.call("POST", "/api/faults/crash", node=0)
    closed = await box.call("DELETE", f"/api/captures/{opened['id']}")
    assert (closed["messages"], closed["lost"]) == ([], True)
    await box.call("POST", "/api/faults/start", node=0)
    assert await box.call("POST", "/api/captures", 400) == {"message": "MISSING_ARG_TOPIC"}


async def test_two_boxes_never_see_each_others_clock_taps_or_faults(
    box: Box, nursery: trio.Nursery, tmp_path: Path
) -> None:
    other = await _start(nursery, tmp_path / "b")
    async with other.client:
        mine = await box.call("POST", "/api/captures", topic="orders")
        theirs = await other.call("POST", "/api/captures", topic="orders")
        await box.call("POST", "/api/faults/fail_publishes", topic="orders")
        assert await box.pub("orders", b"refused") == 503
        assert await other.pub("orders", b"theirs") == 200
        assert await other.pub("jobs", b"in an hour", defer=3_600_000) == 200
        await other.call("GET", "/api/wait/jobs", message_count=1)
        await other.call("POST", "/api/consume/jobs/work", 408, timeout="0.05")
        # the topic hands its deferred message to the new channel in its own time
        await other.call("GET", "/api/wait/jobs/work", deferred=1)
        before = (await box.call("GET", "/api/clock"))["clocks"][0]["now"]
        advanced = await other.call("POST", "/api/clock/advance", by="1h")
        assert advanced["fired"] == 1
        await other.call("GET", "/api/wait/jobs/work", depth=1, deferred=0)
        assert (await box.call("GET", "/api/clock"))["clocks"][0]["now"] == before
        assert (await box.call("GET", "/api/faults"))["faults"] != []
        assert (await other.call("GET", "/api/faults"))["faults"] == []
        assert _bodies(await box.call("DELETE", f"/api/captures/{mine['id']}")) == []
        assert _bodies(await other.call("DELETE", f"/api/captures/{theirs['id']}")) == [b"theirs"]
        assert await other.call("GET", f"/api/captures/{mine['id']}", 404) == {
            "message": "CAPTURE_NOT_FOUND"
        }
