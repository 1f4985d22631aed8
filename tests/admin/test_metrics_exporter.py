"""The admin service's ``GET /metrics``: every nsqd of the cluster, each series with its ``node``.

Checked against each node's own ``/stats`` over real sockets, for nsqbox's nsqds and, when a
real nsqd binary is at hand, for real nsqd (through lookupd and through --nsqd-http-address).
"""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import AdminAddresses, serve_admin
from nsqbox.net.addresses import format_address
from nsqbox.wire import commands
from tests.admin.conftest import Box, real_nsqd, register_ghost
from tests.helpers import RawConn, eventually
from tests.prometheus import PROMTOOL, expected_series, key, nsq_series, promtool_check, series


async def scrape(client: httpx.AsyncClient, admin: str) -> dict[Any, float]:
    response = await client.get(f"{admin}/metrics")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    return series(response.text)


async def node_stats(client: httpx.AsyncClient, node: str) -> Any:
    response = await client.get(f"http://{node}/stats", params={"format": "json"})
    assert response.status_code == 200
    return response.json()


async def test_every_node_labelled_and_equal_to_its_stats(box: Box) -> None:
    node0, node1 = box.nsqd_http(0), box.nsqd_http(1)
    await box.create_channel(0, "orders", "billing")
    await box.create_channel(1, "orders", "billing")
    await box.publish(0, "orders", b"a", b"b", b"c")
    await box.publish(1, "orders", b"d", b"e")
    await box.nsqd_post(1, "/channel/pause", topic="orders", channel="billing")
    await box.publish(0, "only-on-0", b"f")
    both = await RawConn.open(box.addresses.nsqds[0].tcp)  # subscribes and publishes
    await both.sub("orders", "billing")
    await both.pub("only-on-0", b"g")
    found = await scrape(box.client, box.admin)
    for node in (node0, node1):
        assert nsq_series(found, node) == expected_series(await node_stats(box.client, node), node)
        assert found[key("nsqd_up", node=node)] == 1
        assert found[key("nsqd_healthy", node=node)] == 1
        assert found[key("nsqd_mem_heap_objects", node=node)] > 0  # /stats' memory
    billing = {"topic": "orders", "channel": "billing"}
    assert found[key("nsqd_channel_depth", node=node0, **billing, paused="false")] == 3
    assert found[key("nsqd_channel_clients", node=node0, **billing, paused="false")] == 1
    assert found[key("nsqd_connections", node=node0)] == 1  # counted once
    assert found[key("nsqd_connections", node=node1)] == 0
    assert found[key("nsqd_channel_depth", node=node1, **billing, paused="true")] == 2
    assert [
        k[1] for k in found if k[0] == "nsqd_topic_depth" and ("topic", "only-on-0") in k[1]
    ] == [(("node", node0), ("paused", "false"), ("topic", "only-on-0"))]
    [info] = [k for k in found if k[0] == "nsqd_info" and ("node", node0) in k[1]]
    assert dict(info[1])["http_port"] == node0.rpartition(":")[2]

    response = await box.client.delete(f"{box.admin}/api/topics/orders")
    assert response.status_code == 200, response.text
    after = await scrape(box.client, box.admin)
    assert [k for k in after if ("topic", "orders") in k[1]] == []
    assert key("nsqd_topic_depth", node=node0, topic="only-on-0", paused="false") in after
    await both.aclose()


async def test_a_node_that_does_not_answer_is_down(box: Box) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        ghost = await register_ghost(box.addresses.lookupd.tcp, port, "haunted")
        try:
            found = await scrape(box.client, box.admin)
        finally:
            await ghost.aclose()
    node = f"127.0.0.1:{port}"
    assert [k for k in found if ("node", node) in k[1]] == [key("nsqd_up", node=node)]
    assert found[key("nsqd_up", node=node)] == 0
    assert found[key("nsqd_up", node=box.nsqd_http(0))] == 1


async def test_a_given_nsqd_that_does_not_answer_is_down(nursery: trio.Nursery, box: Box) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = format_address(sock.getsockname())
    node = box.nsqd_http(0)
    await box.publish(0, "t", b"x")
    options = AdminOptions(http_address="127.0.0.1:0", nsqd_http_addresses=[node, dead])
    addresses: AdminAddresses = await nursery.start(serve_admin, options)
    found = await scrape(box.client, f"http://{format_address(addresses.http)}")
    assert {k: v for k, v in found.items() if k[0] == "nsqd_up"} == {
        key("nsqd_up", node=node): 1,
        key("nsqd_up", node=dead): 0,
    }
    assert found[key("nsqd_topic_messages_total", node=node, topic="t", paused="false")] == 1


async def test_a_crashed_box_node_is_down_though_lookupd_forgot_it(box: Box) -> None:
    node1 = box.nsqd_http(1)
    await box.addresses.control.crash(1)

    async def forgotten() -> bool:
        response = await box.client.get(f"http://{box.lookupd_http}/nodes")
        ports = {p["http_port"] for p in response.json()["producers"]}
        return int(node1.rpartition(":")[2]) not in ports

    await eventually(forgotten, every=0.05)
    found = await scrape(box.client, box.admin)
    assert [k for k in found if ("node", node1) in k[1]] == [key("nsqd_up", node=node1)]
    assert found[key("nsqd_up", node=node1)] == 0
    assert found[key("nsqd_up", node=box.nsqd_http(0))] == 1
    await box.addresses.control.start(1)

    async def back() -> bool:
        return (await scrape(box.client, box.admin)).get(key("nsqd_up", node=node1)) == 1

    await eventually(back, every=0.05)  # once registered again


async def test_openmetrics_from_the_exporter(box: Box) -> None:
    await box.publish(0, "om", b"x")
    headers = {"Accept": "application/openmetrics-text; version=1.0.0"}
    response = await box.client.get(f"{box.admin}/metrics", headers=headers)
    assert response.headers["content-type"].startswith("application/openmetrics-text;")
    found = series(response.text, openmetrics=True)
    node = box.nsqd_http(0)
    assert found[key("nsqd_topic_messages_total", node=node, topic="om", paused="false")] == 1


async def test_real_nsqd_through_lookupd_and_directly(
    nursery: trio.Nursery, box: Box, tmp_path: Path
) -> None:
    async with real_nsqd(box, tmp_path / "real-nsqd") as real_http:
        url = f"http://{real_http}"

        async def info() -> Any:
            try:
                response = await box.client.get(f"{url}/info")
            except httpx.TransportError:
                return None  # not listening yet
            return response.json()

        await eventually(info)
        consumer = await RawConn.open(("127.0.0.1", (await info())["tcp_port"]))
        await consumer.identify()
        await consumer.sub("mixed", "c", rdy=1)
        for body in (b"one", b"two", b"three"):
            response = await box.client.post(f"{url}/pub", params={"topic": "mixed"}, content=body)
            assert response.status_code == 200
        first = await consumer.message()
        await consumer.send(commands.req(first.id, 0))
        await consumer.message()  # in flight from now on: RDY 1 lets no other through
        await box.publish(0, "mixed", b"ours")

        async def real_node_known() -> bool:
            lookup = await box.lookupd("/lookup", topic="mixed")
            assert isinstance(lookup, dict)
            return len(lookup["producers"]) == 2

        await eventually(real_node_known)
        options = AdminOptions(http_address="127.0.0.1:0", nsqd_http_addresses=[real_http])
        direct: AdminAddresses = await nursery.start(serve_admin, options)
        scrapes = []
        for admin in (box.admin, f"http://{format_address(direct.http)}"):
            expected = expected_series(await node_stats(box.client, real_http), real_http)
            found = await scrape(box.client, admin)
            scrapes.append(found)
            assert nsq_series(found, real_http) == expected
            c = {"node": real_http, "topic": "mixed", "channel": "c", "paused": "false"}
            assert found[key("nsqd_channel_messages_total", **c)] == 3
            assert found[key("nsqd_channel_requeues_total", **c)] == 1
            assert found[key("nsqd_channel_in_flight", **c)] == 1
            assert found[key("nsqd_connections", node=real_http)] == 1
            assert found[key("nsqd_up", node=real_http)] == 1
            [info] = [k for k in found if k[0] == "nsqd_info" and ("node", real_http) in k[1]]
            assert dict(info[1])["version"] == "1.3.0"
            assert found[key("nsqd_mem_heap_in_use_bytes", node=real_http)] > 0  # Go's runtime
        through_lookupd, direct_only = scrapes
        assert key("nsqd_up", node=box.nsqd_http(0)) in through_lookupd
        assert {k for k in direct_only if k[0] == "nsqd_up"} == {key("nsqd_up", node=real_http)}
        if PROMTOOL is not None:
            text = (await box.client.get(f"{box.admin}/metrics")).text
            assert await trio.to_thread.run_sync(promtool_check, text) == ""
        await consumer.aclose()


async def test_promtool_accepts_the_exporter(box: Box) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    await box.create_channel(0, "t", "c")
    await box.publish(0, "t", b"x")
    await box.publish(1, "u", b"y")
    text = (await box.client.get(f"{box.admin}/metrics")).text
    assert "nsqd_mem_gc_pause_seconds{" in text
    assert await trio.to_thread.run_sync(promtool_check, text) == ""
