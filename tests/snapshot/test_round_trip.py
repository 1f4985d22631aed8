"""Snapshots of a running box, loaded into a fresh one (issue #34), on real sockets.

A two-node box under the manual clock holds memory, disk, deferred and in-flight messages, a
paused channel, a topic with no channel yet and an ephemeral channel. ``nsqbox snapshot save``
(one cut through the admin service) and ``nsqbox up --load`` (BoxOptions.load_path) carry it
over: ``/stats`` and the peek listings agree, a consumer receives every message once with its
attempts, and the deferred message falls due at the same broker time. A damaged file is
refused with its line and loads nothing.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.net.addresses import format_address
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.run.box import BoxAddresses, BoxOptions, serve_box
from nsqbox.snapshot.format import SnapshotError
from nsqbox.tools import snapshot as snapshot_tool
from nsqbox.tools.common import Fatal, ParsedArgs
from nsqbox.wire import commands
from tests.helpers import RawConn, eventually, publish

GUARD = 60
UTF8 = [b"m1", b"m2", "m3 \u00e9".encode(), b"m4", b"m5"]


class Box:
    """A running box on port 0 and a client for its HTTP APIs."""

    def __init__(self, addresses: BoxAddresses, client: httpx.AsyncClient) -> None:
        self.addresses = addresses
        self.client = client
        self.admin = format_address(addresses.admin.http)

    def http(self, node: int) -> str:
        address = self.addresses.nsqds[node].http
        assert address is not None
        return f"http://{format_address(address)}"

    def tcp(self, node: int) -> tuple[str, int]:
        return self.addresses.nsqds[node].tcp

    async def call(self, method: str, node: int, path: str, **params: Any) -> Any:
        response = await self.client.request(method, self.http(node) + path, params=params)
        assert response.status_code == 200, response.text
        return response.json() if response.content else None

    async def stats(self, node: int) -> dict[str, Any]:
        """Each topic's and channel's counts, as /stats says (ephemeral ones too)."""
        doc = await self.call("GET", node, "/stats", format="json")
        out: dict[str, Any] = {}
        for topic in doc["topics"]:
            out[topic["topic_name"]] = (topic["depth"], topic["backend_depth"], topic["paused"])
            for c in topic["channels"]:
                out[f"{topic['topic_name']}:{c['channel_name']}"] = (
                    c["depth"],
                    c["backend_depth"],
                    c["in_flight_count"],
                    c["deferred_count"],
                    c["paused"],
                )
        return out

    async def listing(self, node: int, topic: str, channel: str = "") -> list[tuple[Any, ...]]:
        """Every message peek lists: (id, body, attempts, timestamp, state, delay left)."""
        params: dict[str, Any] = {"topic": topic, "body_bytes": 1000}
        if channel:
            params["channel"] = channel
        found: list[tuple[Any, ...]] = []
        cursor = ""
        while True:
            doc = await self.call("GET", node, "/nsqbox/peek", **params, cursor=cursor)
            for m in doc["messages"]:
                left = m.get("defer_left_ms", m.get("defer_ms"))
                found.append((m["id"], m["body"], m["attempts"], m["timestamp"], m["state"], left))
            if doc["next"] is None:
                return found
            cursor = doc["next"]


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as http:
        yield http


async def start_box(
    nursery: trio.Nursery, data: Path, client: httpx.AsyncClient, load: str = ""
) -> Box:
    nsqd = NSQDOptions(data_path=str(data), node_id=0, mem_queue_size=2)
    options = BoxOptions(nsqd=nsqd, nsqd_count=2, clock="manual", load_path=load)
    options.use_ephemeral_ports()
    addresses: BoxAddresses = await nursery.start(serve_box, options)
    return Box(addresses, client)


def leaf(error: BaseException) -> BaseException:
    while isinstance(error, BaseExceptionGroup):
        error = error.exceptions[0]
    return error


def tool(box: Box, *args: str) -> str:
    """``nsqbox snapshot ARGS --admin-http-address BOX``, in this thread; what it printed."""
    flags = snapshot_tool.snapshot_flag_set()
    flags.parse(["--admin-http-address", box.admin])
    out = io.StringIO()
    assert snapshot_tool.run(flags, ParsedArgs(list(args)), out) == 0
    return out.getvalue()


async def fill(box: Box) -> tuple[RawConn, RawConn, bytes]:
    """The original box's state; the consumers holding it (close them), the in-flight id."""
    await box.call("POST", 0, "/topic/create", topic="orders")
    await box.call("POST", 0, "/channel/create", topic="orders", channel="audit")
    await box.call("POST", 0, "/channel/pause", topic="orders", channel="audit")
    watcher = await RawConn.open(box.tcp(0))
    await watcher.sub("orders", "watch#ephemeral", rdy=0)  # left out of the snapshot
    worker = await RawConn.open(box.tcp(0))
    await worker.sub("orders", "billing", rdy=0)
    await publish(box.tcp(0), "orders", *UTF8)  # 2 in memory, 3 on disk (mem-queue-size 2)
    await worker.send(commands.rdy(1))
    taken = await worker.message()  # in flight, attempts 1
    assert (taken.body, taken.attempts) == (b"m1", 1)
    await worker.send(commands.dpub("orders", 60_000, b"later"))
    assert await worker.response() == b"OK"
    await publish(box.tcp(0), "early", b"e1", b"\xff\x00", b"e3")  # no channel yet
    await publish(box.tcp(1), "payments", b"n1", b"n2", b"n3")
    await box.call("POST", 1, "/topic/pause", topic="payments")  # held at the topic: paused
    await box.call("POST", 1, "/channel/create", topic="payments", channel="billing")
    await box.call("POST", 1, "/nsqbox/clock/advance", by="10")
    return watcher, worker, taken.id


async def test_a_two_node_box_round_trips_through_a_snapshot_file(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    path = tmp_path / "box.jsonl.gz"
    with trio.fail_after(GUARD):
        original = await start_box(nursery, tmp_path / "a", client)
        watcher, worker, in_flight_id = await fill(original)
        stats = [await original.stats(0), await original.stats(1)]
        assert stats[0]["orders:billing"] == (4, 3, 1, 1, False)
        assert stats[0]["orders:audit"] == (5, 3, 0, 1, True)
        assert stats[0]["early"] == (3, 1, False)
        billing = await original.listing(0, "orders", "billing")
        audit = await original.listing(0, "orders", "audit")
        early = await original.listing(0, "early")
        printed = await trio.to_thread.run_sync(tool, original, "save", str(path))
        assert "18 messages in 3 topics and 3 channels on 2 nsqd(s)" in printed
        assert "manual clock at +10s" in printed

        fresh = await start_box(nursery, tmp_path / "b", client, load=str(path))
        # the banner says what the box was started from
        assert f"nsqbox up: loaded {path}: 18 messages\n" in fresh.addresses.banner()
        loaded = [await fresh.stats(0), await fresh.stats(1)]
        # the in-flight message is queued again; the ephemeral channel is not there
        assert loaded[0]["orders:billing"] == (5, 3, 0, 1, False)
        expected = {k: v for k, v in stats[0].items() if "#" not in k and k != "orders:billing"}
        assert {k: v for k, v in loaded[0].items() if k != "orders:billing"} == expected
        assert loaded[1] == stats[1]
        assert loaded[1]["payments"] == (3, 1, True)
        assert await fresh.listing(0, "orders", "audit") == audit
        assert await fresh.listing(0, "early") == early
        again = await fresh.listing(0, "orders", "billing")
        as_queued = [(*m[:4], m[5]) for m in billing]
        assert sorted((*m[:4], m[5]) for m in again) == sorted(as_queued)
        clock = await fresh.call("GET", 0, "/nsqbox/clock")
        assert clock["offset"] == 10.0  # the broker time it was saved at
        lookup = f"http://{format_address(fresh.addresses.lookupd.http)}/lookup"

        async def registered() -> bool:  # the loaded topics are announced as any other
            answers = [
                await client.get(lookup, params={"topic": t}) for t in ("orders", "payments")
            ]
            return all(a.status_code == 200 and a.json()["producers"] for a in answers)

        await eventually(registered, every=0.05)

        consumer = await RawConn.open(fresh.tcp(0))
        await consumer.sub("orders", "billing", rdy=10)
        got = [await consumer.message() for _ in range(5)]
        assert sorted(m.body for m in got) == sorted(UTF8)
        attempts = {m.id: m.attempts for m in got}
        assert attempts.pop(in_flight_id) == 2  # delivered once before the snapshot
        assert set(attempts.values()) == {1}
        channel = fresh.addresses.control.nsqd(0).topics["orders"].channels["billing"]  # type: ignore[union-attr]
        assert (channel.depth(), channel.in_flight_count(), channel.deferred_count()) == (
            5 - 5,
            5,
            1,
        )
        # the deferred one is due at broker time 60s, as in the original box
        await fresh.call("POST", 0, "/nsqbox/clock/advance", by="49.9")
        assert channel.deferred_count() == 1
        await fresh.call("POST", 0, "/nsqbox/clock/advance", by="0.1")
        later = await consumer.message()
        assert (later.body, later.attempts) == (b"later", 1)
        for conn in (consumer, watcher, worker):
            await conn.aclose()
        nursery.cancel_scope.cancel()


async def test_a_damaged_snapshot_is_refused_with_its_line_and_loads_nothing(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    path = tmp_path / "box.jsonl"
    with trio.fail_after(GUARD):
        original = await start_box(nursery, tmp_path / "a", client)
        watcher, worker, _ = await fill(original)
        await trio.to_thread.run_sync(tool, original, "save", str(path))
        lines = path.read_bytes().splitlines(keepends=True)
        fresh = await start_box(nursery, tmp_path / "b", client)
        bad = tmp_path / "bad.jsonl"
        for data, line in [
            (b"".join(lines[:-1]), len(lines)),  # cut before its end line
            (b"".join(lines[:6]) + lines[6][:30], 7),  # cut inside a line
            (b"".join([*lines[:9], b'{"kind":"message"}\n', *lines[10:]]), 10),
        ]:
            bad.write_bytes(data)
            with pytest.raises(Fatal, match=rf"refused, nothing loaded: line {line}: "):
                await trio.to_thread.run_sync(tool, fresh, "load", str(bad))
            # the nodes' own check says the same, and nothing was applied
            upload = {"id": "0" * 32, "offset": 0}
            answer = await client.post(
                f"{fresh.http(0)}/nsqbox/snapshot/upload", params=upload, content=data
            )
            assert answer.status_code == 200, answer.text
            answer = await client.post(
                f"{fresh.http(0)}/nsqbox/snapshot/load", params={"id": "0" * 32, "node": 0}
            )
            assert answer.status_code == 400
            assert answer.json()["message"] == "INVALID_SNAPSHOT"
            assert answer.json()["line"] == line
            assert await fresh.stats(0) == {}
            assert await fresh.stats(1) == {}
        bad.write_bytes(b"".join(lines[:-1]))
        with pytest.raises(ExceptionGroup) as info:
            async with trio.open_nursery() as inner:  # nsqbox up --load: the box does not start
                await start_box(inner, tmp_path / "c", client, load=str(bad))
        error = leaf(info.value)
        assert isinstance(error, ValueError)
        assert f"nothing loaded: line {len(lines)}: truncated" in str(error)
        assert isinstance(error.__cause__, SnapshotError)
        printed = await trio.to_thread.run_sync(tool, fresh, "load", str(path))
        assert printed.startswith(f"loaded {path}: 18 messages into 2 nsqd(s)")
        assert await fresh.stats(0) == {
            k: v for k, v in (await original.stats(0)).items() if "#" not in k
        } | {"orders:billing": (5, 3, 0, 1, False)}
        for conn in (watcher, worker):
            await conn.aclose()
        nursery.cancel_scope.cancel()
