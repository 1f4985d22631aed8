"""Loading a snapshot into a running box, replacing what it holds (issue #34), on real sockets.

A box holding other topics, channels and messages (queued, in flight, deferred, an ephemeral
channel, a consumer) is loaded with ``nsqbox snapshot load FILE --replace``: it ends with the
``/stats`` and the peek listings of a fresh box started with ``--load FILE``. The handle's
``load(path, replace=True)`` empties a node the snapshot has no records for, and a load without
``replace`` still merges.
"""

from __future__ import annotations

import io
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.testing.handle import NSQBoxFactory
from nsqbox.tools import snapshot as snapshot_tool
from nsqbox.tools.common import parse_args
from nsqbox.wire import commands
from tests.helpers import RawConn, publish

from .test_round_trip import GUARD, Box, fill, start_box, tool

CHANNELS = [("orders", "billing"), ("orders", "audit"), ("early", ""), ("orders", "")]


def command(box: Box, *argv: str) -> str:
    """``nsqbox snapshot ARGV`` (flags anywhere, as typed) against ``box``; what it printed."""
    flags = snapshot_tool.snapshot_flag_set()
    args = parse_args(flags, [*argv, "--admin-http-address", box.admin])
    out = io.StringIO()
    assert snapshot_tool.run(flags, args, out) == 0
    return out.getvalue()


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as http:
        yield http


async def clutter(box: Box) -> tuple[RawConn, RawConn]:
    """State the snapshot does not have: the consumers holding some of it (close them)."""
    # kept topic and channel, other messages: queued, one in flight, one deferred
    await publish(box.tcp(0), "orders", b"old1", b"old2", b"old3")
    await box.call("POST", 0, "/channel/create", topic="orders", channel="billing")
    await publish(box.tcp(0), "orders", b"old4")
    holder = await RawConn.open(box.tcp(0))
    await holder.sub("orders", "billing", rdy=1)
    held = await holder.message()
    await holder.send(commands.rdy(0))  # it holds one in flight, and takes no more
    await holder.send(commands.dpub("orders", 30_000, b"old deferred"))
    assert await holder.response() == b"OK"
    await box.call("POST", 0, "/topic/pause", topic="orders")  # the file has it unpaused
    # a channel the file does not have, with a consumer; an ephemeral one
    extra = await RawConn.open(box.tcp(0))
    await extra.sub("orders", "extra#ephemeral", rdy=0)
    await box.call("POST", 0, "/channel/create", topic="orders", channel="stale")
    # topics the file does not have, on both nodes
    await publish(box.tcp(0), "gone", b"g1", b"g2")
    await publish(box.tcp(1), "gone2", b"x1")
    await box.call("POST", 1, "/channel/create", topic="gone2", channel="c")
    # a topic the file has, unpaused here, paused in the file, with other messages
    await publish(box.tcp(1), "payments", b"p-old")
    assert held.body in (b"old1", b"old4")
    return holder, extra


async def test_a_replace_ends_as_a_fresh_box_loaded_from_the_same_file(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    path = tmp_path / "box.jsonl.gz"
    with trio.fail_after(GUARD):
        original = await start_box(nursery, tmp_path / "a", client)
        watcher, worker, _ = await fill(original)
        await trio.to_thread.run_sync(tool, original, "save", str(path))
        fresh = await start_box(nursery, tmp_path / "b", client, load=str(path))

        busy = await start_box(nursery, tmp_path / "c", client)
        await busy.call("POST", 0, "/nsqbox/clock/advance", by="10")  # as fresh's: saved at +10s
        holder, extra = await clutter(busy)
        before = await busy.stats(0)
        assert {"gone", "orders:stale", "orders:extra#ephemeral"} <= before.keys()
        assert before["orders:billing"][2:4] == (1, 1)  # one in flight, one deferred
        printed = await trio.to_thread.run_sync(command, busy, "load", str(path), "--replace")
        assert printed.startswith(f"loaded {path}: 18 messages into 2 nsqd(s), replacing")
        assert "(removed 2 topics, 3 channels and 9 messages)" in printed

        for node in (0, 1):
            assert await busy.stats(node) == await fresh.stats(node)
        for topic, channel in CHANNELS:
            assert await busy.listing(0, topic, channel) == await fresh.listing(0, topic, channel)
        assert await busy.listing(1, "payments") == await fresh.listing(1, "payments")
        assert await busy.listing(1, "payments", "billing") == []
        # the deleted channel's consumer was disconnected, as /channel/delete does
        await extra.expect_closed()
        # the kept channel's consumer holds nothing now: its FIN fails, as after /channel/empty
        await holder.send(commands.fin(b"0" * 16))
        assert (await holder.error()).startswith(b"E_FIN_FAILED")
        for conn in (watcher, worker, holder, extra):
            await conn.aclose()
        nursery.cancel_scope.cancel()


def test_the_handle_replaces_every_node_and_merges_by_default(
    nsqbox_factory: NSQBoxFactory, tmp_path: Path
) -> None:
    saved = tmp_path / "one.jsonl"
    source = nsqbox_factory()
    source.publish("kept", "k1")
    source.wait_for("kept", depth=1)
    assert source.snapshot(saved).messages == 1

    target = nsqbox_factory(nsqd=2)
    target.publish("kept", "other")
    target.publish("elsewhere", "e1", node=1)
    target.wait_for("elsewhere", depth=1, node=1)
    assert target.load(saved) == 1  # merged: what the box held stays
    assert target.wait_for("kept", depth=2).depth == 2
    assert target.stats(node=1).topic("elsewhere") is not None
    assert target.load(saved, replace=True) == 1
    assert target.stats(node=0).topic("kept") == target.wait_for("kept", depth=1)
    assert dict(target.stats(node=1).topics) == {}  # the snapshot has nothing for it: emptied


@pytest.mark.parametrize(
    ("params", "refusal"),
    [
        ({"replace": "maybe"}, "INVALID_REPLACE"),
        ({"name": "n" * 1021}, "INVALID_NAME"),
        ({"load": "l" * 65}, "INVALID_LOAD"),
    ],
)
async def test_the_load_route_refuses_a_bad_parameter_and_loads_nothing(
    nursery: trio.Nursery,
    tmp_path: Path,
    client: httpx.AsyncClient,
    params: dict[str, str],
    refusal: str,
) -> None:
    path = tmp_path / "box.jsonl"
    with trio.fail_after(GUARD):
        original = await start_box(nursery, tmp_path / "a", client)
        await publish(original.tcp(0), "orders", b"o1")
        await trio.to_thread.run_sync(tool, original, "save", str(path))
        box = await start_box(nursery, tmp_path / "b", client)
        await publish(box.tcp(0), "kept", b"k1")
        before = await box.stats(0)
        upload = {"id": "1" * 32, "offset": 0}
        url = f"{box.http(0)}/nsqbox/snapshot"
        answer = await client.post(f"{url}/upload", params=upload, content=path.read_bytes())
        assert answer.status_code == 200, answer.text
        load = {"id": "1" * 32, "node": "0", "replace": "true", **params}
        answer = await client.post(f"{url}/load", params=load)
        assert (answer.status_code, answer.json()) == (400, {"message": refusal})
        assert await box.stats(0) == before
        nursery.cancel_scope.cancel()
