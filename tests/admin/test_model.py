"""The cluster model and the actions against a real in-process box (and under asyncio)."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

import httpx
import pytest

from nsqbox.admin.actions import Action, ClusterActions
from nsqbox.admin.clusterinfo import ClusterError, ClusterInfo, base_url, warning
from nsqbox.admin.model import ClusterModel, open_cluster_model
from tests.admin.conftest import Box, register_ghost
from tests.tools.box_process import BoxProcess


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_base_url_and_warning() -> None:
    assert base_url("127.0.0.1:4161") == "http://127.0.0.1:4161"
    assert base_url("https://h:1/") == "https://h:1"
    assert warning([]) == ""
    assert warning([ValueError("a"), ValueError("b")]) == "WARNING: a; b"


def test_model_needs_addresses() -> None:
    with pytest.raises(ValueError, match="lookupd or nsqd"):
        ClusterModel(httpx.AsyncClient())


async def test_snapshot_of_an_empty_cluster(box: Box) -> None:
    model = ClusterModel(box.client, lookupd_http_addresses=[box.lookupd_http])
    assert model.snapshot is None
    snap = await model.refresh()
    assert model.snapshot is snap
    assert [n.name for n in snap.nodes] == sorted([box.nsqd_http(0), box.nsqd_http(1)])
    assert all(n.ok and n.topics == () for n in snap.nodes)
    assert (snap.topics, snap.errors, snap.node_errors) == ((), (), {})


async def test_snapshot_sums_topics_over_nodes(box: Box) -> None:
    await box.create_channel(0, "orders", "billing")
    await box.create_channel(1, "orders", "billing")
    await box.publish(0, "orders", b"a", b"b", b"c")
    await box.publish(1, "orders", b"d", b"e")
    model = ClusterModel(box.client, lookupd_http_addresses=[box.lookupd_http])
    snap = await model.refresh()
    topic = snap.topic("orders")
    assert topic is not None
    assert (topic.node, topic.message_count, len(topic.nodes)) == ("*", 5, 2)
    channel = snap.channel("orders", "billing")
    assert channel is not None
    assert (channel.depth, channel.message_count, len(channel.nodes)) == (5, 5, 2)
    assert snap.clients("orders", "billing") == []
    assert snap.topic_names == ["orders"]
    node0 = snap.node(box.nsqd_http(0))
    assert node0 is not None
    assert (node0.message_count, node0.depth, node0.client_count) == (3, 3, 0)
    row = snap.row("orders", "billing", box.nsqd_http(1))
    assert row is not None
    assert row.depth == 2
    assert snap.row("nope") is None
    assert snap.node("nowhere:1") is None


async def test_rates_from_the_history(box: Box) -> None:
    clock = FakeClock()
    model = ClusterModel(
        box.client, lookupd_http_addresses=[box.lookupd_http], clock=clock, history=3
    )
    await box.publish(0, "rated", b"x")
    await model.refresh()
    assert model.rate("rated") is None  # one snapshot only
    await box.publish(0, "rated", b"1", b"2", b"3", b"4")
    clock.now += 2
    await model.refresh()
    assert model.rate("rated") == 2.0
    assert model.rate("rated", node=box.nsqd_http(0)) == 2.0
    assert model.rate("rated", node=box.nsqd_http(1)) is None  # not on that node
    await box.publish(1, "rated", b"5", b"6")
    clock.now += 1
    await model.refresh()
    assert model.rate("rated") == 2.0
    assert model.rate("rated", window=10) == 6 / 3
    assert model.rate_series("rated") == [2.0, 2.0]
    assert model.series("rated") == [(100.0, 1), (102.0, 5), (103.0, 7)]
    clock.now += 1
    await model.refresh()
    assert len(model.history) == 3  # bounded
    assert model.rate("rated") == 0.0


async def test_node_errors_and_discovery_errors(box: Box) -> None:
    port = _free_port()
    ghost = await register_ghost(box.addresses.lookupd.tcp, port, "haunted")
    async with ghost:
        model = ClusterModel(box.client, lookupd_http_addresses=[box.lookupd_http])
        snap = await model.refresh()
        assert len(snap.nodes) == 3
        assert list(snap.node_errors) == [f"127.0.0.1:{port}"]
        assert "haunted" in snap.registered_topics
        assert snap.topic("haunted") is None
    dead = ClusterModel(box.client, lookupd_http_addresses=[f"127.0.0.1:{_free_port()}"])
    snap = await dead.refresh()
    assert snap.nodes == ()
    assert len(snap.discovery_errors) == 1


async def test_nsqd_mode_lists_the_given_nodes(box: Box) -> None:
    await box.publish(1, "direct", b"x")
    model = ClusterModel(box.client, nsqd_http_addresses=[box.nsqd_http(0), box.nsqd_http(1)])
    snap = await model.refresh()
    assert len(snap.nodes) == 2
    topic = snap.topic("direct")
    assert topic is not None
    assert [n.node for n in topic.nodes] == [box.nsqd_http(1)]
    info = ClusterInfo(box.client)
    found = await info.nsqd_topic_producers("direct", [box.nsqd_http(0), box.nsqd_http(1)])
    assert [p.http_address for p in found.value] == [box.nsqd_http(1)]
    with pytest.raises(ClusterError, match="failed to query any nsqd"):
        await info.nsqd_topics([f"127.0.0.1:{_free_port()}"])


async def test_actions_reach_every_node_of_the_topic(box: Box) -> None:
    for index in (0, 1):
        await box.create_channel(index, "acts", "c")
    actions = ClusterActions(ClusterInfo(box.client), lookupd_http_addresses=[box.lookupd_http])
    assert await actions.pause_channel("acts", "c") == ()
    assert [(await box.stats(i))["acts"]["channels"]["c"]["paused"] for i in (0, 1)] == [True, True]
    assert await actions.unpause_channel("acts", "c") == ()
    assert await actions.topic_action("acts", Action.PAUSE) == ()
    assert [(await box.stats(i))["acts"]["paused"] for i in (0, 1)] == [True, True]
    await actions.unpause_topic("acts")
    await box.publish(0, "acts", b"1", b"2")
    assert await actions.empty_channel("acts", "c") == ()
    assert (await box.stats(0))["acts"]["channels"]["c"]["depth"] == 0
    await actions.empty_topic("acts")
    assert await actions.create_topic("acts", "d") == ()
    assert "d" in (await box.stats(1))["acts"]["channels"]
    assert await actions.delete_channel("acts", "d") == ()
    assert "d" not in (await box.stats(0))["acts"]["channels"]
    assert await actions.delete_topic("acts") == ()
    assert "acts" not in await box.stats(0)
    assert "acts" not in await box.stats(1)
    assert await actions.pause_topic("never-heard-of") == ()  # no node: nothing to do


async def test_create_without_lookupd_creates_on_the_nodes(box: Box) -> None:
    nodes = [box.nsqd_http(0), box.nsqd_http(1)]
    actions = ClusterActions(ClusterInfo(box.client), nsqd_http_addresses=nodes)
    assert await actions.create_channel("made", "here") == ()
    for index in (0, 1):
        assert "here" in (await box.stats(index))["made"]["channels"]


async def test_partial_failures_are_reported(box: Box) -> None:
    await box.publish(0, "half", b"x")
    dead = f"127.0.0.1:{_free_port()}"
    actions = ClusterActions(
        ClusterInfo(box.client), lookupd_http_addresses=[box.lookupd_http, dead]
    )
    errors = await actions.pause_topic("half")
    assert [e.address for e in errors] == [dead]  # its /lookup failed; the other answered
    assert (await box.stats(0))["half"]["paused"]


def test_model_runs_under_asyncio(tmp_path: Path) -> None:
    process = BoxProcess(tmp_path)
    try:
        lookupd = process.ready["lookupd_http_address"]
        nsqd = process.ready["nsqd_http_address"]
        httpx.post(f"http://{nsqd}/pub", params={"topic": "aio"}, content=b"hi", timeout=10)

        async def main() -> tuple[list[str], int]:
            async with open_cluster_model(lookupd_http_addresses=[lookupd]) as model:
                for _ in range(100):  # until lookupd knows (registration is asynchronous)
                    snap = await model.refresh()
                    if snap.topic("aio") is not None:
                        break
                    await asyncio.sleep(0.05)
                errors = await model.actions.pause_topic("aio")
                assert errors == ()
                snap = await model.refresh()
                topic = snap.topic("aio")
                assert topic is not None
                return [n.name for n in snap.nodes], int(topic.paused)

        names, paused = asyncio.run(main())
        assert (names, paused) == ([nsqd], 1)
        assert process.stop() == 0, process.stderr
    finally:
        process.kill()


async def test_bad_addresses_are_upstream_errors() -> None:
    async with httpx.AsyncClient(trust_env=False) as client:
        info = ClusterInfo(client)
        with pytest.raises(ClusterError) as caught:
            await info.lookupd_topics(["127.0.0.1:notaport"])
    [error] = caught.value.errors
    assert (error.address, error.status) == ("127.0.0.1:notaport", None)
    assert "Invalid port" in error.message
