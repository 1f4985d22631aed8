"""The admin service's nsqadmin-compatible /api, against an in-process box.

Every effect is checked through lookupd (/nodes, /topics, /channels) and nsqd (/stats).
"""

from __future__ import annotations

import json
import signal
import socket
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import AdminAddresses, serve_admin
from nsqbox.net.addresses import format_address
from tests.admin.conftest import Box, register_ghost


async def call(box: Box, method: str, path: str, body: object = None) -> tuple[int, Any]:
    content = None if body is None else json.dumps(body).encode()
    response = await box.client.request(method, box.admin + path, content=content)
    assert response.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"
    return response.status_code, response.json() if response.content else None


async def test_ping(box: Box) -> None:
    response = await box.client.get(box.admin + "/ping")
    assert (response.status_code, response.text) == (200, "OK")


async def test_topics_and_inactive_topics(box: Box) -> None:
    await box.publish(0, "live", b"x")
    assert await call(box, "POST", "/api/topics", {"topic": "idle", "channel": "c"}) == (
        200,
        {"message": ""},
    )
    assert await call(box, "GET", "/api/topics") == (
        200,
        {"topics": ["idle", "live"], "message": ""},
    )
    status, body = await call(box, "GET", "/api/topics?inactive=true")
    assert (status, body) == (200, {"topics": {"idle": ["c"]}, "message": ""})


async def test_topic_and_channel(box: Box) -> None:
    await box.create_channel(0, "orders", "billing")
    await box.create_channel(1, "orders", "billing")
    await box.publish(0, "orders", b"a", b"b")
    await box.publish(1, "orders", b"c")
    status, topic = await call(box, "GET", "/api/topics/orders")
    assert status == 200
    assert (topic["node"], topic["topic_name"], topic["message_count"]) == ("*", "orders", 3)
    assert sorted(n["node"] for n in topic["nodes"]) == sorted([box.nsqd_http(0), box.nsqd_http(1)])
    assert [(c["channel_name"], c["depth"]) for c in topic["channels"]] == [("billing", 3)]
    assert topic["message"] == ""

    async with await trio.open_tcp_stream(*box.addresses.nsqds[0].tcp) as consumer:
        from nsqbox.wire import commands

        await consumer.send_all(b"  V2" + commands.identify({"user_agent": "api-test/1"}))
        await consumer.send_all(commands.sub("orders", "billing"))
        await box.synced()
        status, channel = await call(box, "GET", "/api/topics/orders/billing")
    assert status == 200
    assert (channel["node"], channel["channel_name"], channel["depth"]) == ("*", "billing", 3)
    assert [c["user_agent"] for c in channel["clients"]] == ["api-test/1"]
    assert channel["clients"][0]["node"] == box.nsqd_http(0)
    assert len(channel["nodes"]) == 2

    assert await call(box, "GET", "/api/topics/nope") == (404, {"message": "TOPIC_NOT_FOUND"})
    status, body = await call(box, "GET", "/api/topics/orders/nope")
    assert (status, body) == (200, {"message": ""})  # as nsqadmin: no channel, no fields


async def test_nodes_node_and_counter(box: Box) -> None:
    await box.create_channel(1, "counted", "c")
    await box.publish(1, "counted", b"1", b"2")
    status, body = await call(box, "GET", "/api/nodes")
    assert status == 200
    nodes = {n["broadcast_address"] + ":" + str(n["http_port"]): n for n in body["nodes"]}
    assert sorted(nodes) == sorted([box.nsqd_http(0), box.nsqd_http(1)])
    assert [t["topic"] for t in nodes[box.nsqd_http(1)]["topics"]] == ["counted"]
    assert nodes[box.nsqd_http(1)]["remote_addresses"][0].startswith(box.lookupd_http + "/")

    status, node = await call(box, "GET", f"/api/nodes/{box.nsqd_http(1)}")
    assert status == 200
    assert (node["node"], node["total_messages"], node["total_clients"]) == (
        box.nsqd_http(1),
        2,
        0,
    )
    assert [t["topic_name"] for t in node["topics"]] == ["counted"]
    assert await call(box, "GET", "/api/nodes/127.0.0.1:1") == (404, {"message": "NODE_NOT_FOUND"})

    status, counter = await call(box, "GET", "/api/counter")
    key = f"counted:c:{box.nsqd_http(1)}"
    assert status == 200
    assert counter["stats"] == {
        key: {
            "node": box.nsqd_http(1),
            "topic_name": "counted",
            "channel_name": "c",
            "message_count": 2,
        }
    }


async def test_create_topic_and_channel(box: Box) -> None:
    await box.create_channel(0, "made", "first")
    status, body = await call(box, "POST", "/api/topics", {"topic": "made", "channel": "second"})
    assert (status, body) == (200, {"message": ""})
    assert await box.lookupd("/channels", topic="made") == {"channels": ["first", "second"]}
    assert "second" in (await box.stats(0))["made"]["channels"]  # on the node with the topic
    assert "made" not in await box.stats(1)  # nsqadmin creates topics in the registry only
    assert await call(box, "POST", "/api/topics", {"topic": "bad name"}) == (
        400,
        {"message": "INVALID_TOPIC"},
    )
    status, body = await call(box, "POST", "/api/topics", {"topic": "t", "channel": "bad name"})
    assert (status, body) == (400, {"message": "INVALID_CHANNEL"})
    response = await box.client.post(box.admin + "/api/topics", content=b"{not json")
    assert (response.status_code, response.json()) == (400, {"message": "INVALID_BODY"})


@pytest.mark.parametrize("target", ["topic", "channel"])
async def test_pause_unpause_empty(box: Box, target: str) -> None:
    for index in (0, 1):
        await box.create_channel(index, "acted", "c")
    path = "/api/topics/acted" + ("/c" if target == "channel" else "")

    def paused(stats: dict[str, Any]) -> bool:
        row = stats["acted"] if target == "topic" else stats["acted"]["channels"]["c"]
        return bool(row["paused"])

    assert await call(box, "POST", path, {"action": "pause"}) == (200, {"message": ""})
    assert [paused(await box.stats(i)) for i in (0, 1)] == [True, True]
    assert await call(box, "POST", path, {"action": "unpause"}) == (200, {"message": ""})
    assert [paused(await box.stats(i)) for i in (0, 1)] == [False, False]
    await call(box, "POST", path, {"action": "pause"})  # keep messages where they land
    await box.publish(0, "acted", b"1", b"2")
    await box.publish(1, "acted", b"3")
    assert await call(box, "POST", path, {"action": "empty"}) == (200, {"message": ""})
    for index in (0, 1):
        stats = await box.stats(index)
        row = stats["acted"] if target == "topic" else stats["acted"]["channels"]["c"]
        assert row["depth"] == 0
    assert await call(box, "POST", path, {"action": "explode"}) == (
        400,
        {"message": "INVALID_ACTION"},
    )
    assert await call(box, "POST", path, {}) == (400, {"message": "INVALID_ACTION"})


async def test_delete_channel_and_topic(box: Box) -> None:
    for index in (0, 1):
        await box.create_channel(index, "doomed", "c")
        await box.create_channel(index, "doomed", "d")
    assert await call(box, "DELETE", "/api/topics/doomed/c") == (200, {"message": ""})
    assert await box.lookupd("/channels", topic="doomed") == {"channels": ["d"]}
    for index in (0, 1):
        assert list((await box.stats(index))["doomed"]["channels"]) == ["d"]
    assert await call(box, "DELETE", "/api/topics/doomed") == (200, {"message": ""})
    assert await box.lookupd("/topics") == {"topics": []}
    for index in (0, 1):
        assert "doomed" not in await box.stats(index)


async def test_tombstone_a_topic_on_one_node(box: Box) -> None:
    await box.publish(0, "stone", b"x")
    await box.publish(1, "stone", b"y")
    node = box.nsqd_http(0)
    assert await call(box, "DELETE", f"/api/nodes/{node}", {"topic": "stone"}) == (
        200,
        {"message": ""},
    )
    assert "stone" not in await box.stats(0)
    assert "stone" in await box.stats(1)
    lookup: Any = await box.lookupd("/lookup", topic="stone")
    node1 = box.addresses.nsqds[1].http
    assert node1 is not None
    assert [p["http_port"] for p in lookup["producers"]] == [node1[1]]
    status, body = await call(box, "DELETE", f"/api/nodes/{node}", {"topic": "bad name"})
    assert (status, body) == (400, {"message": "INVALID_TOPIC"})
    response = await box.client.request("DELETE", f"{box.admin}/api/nodes/{node}")
    assert (response.status_code, response.json()) == (400, {"message": "INVALID_BODY"})


async def test_unreachable_node_is_a_warning(box: Box) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = int(sock.getsockname()[1])
    await box.publish(0, "haunted", b"x")
    ghost = await register_ghost(box.addresses.lookupd.tcp, port, "haunted")
    async with ghost:
        status, topic = await call(box, "GET", "/api/topics/haunted")
        assert status == 200
        assert topic["message"].startswith(f"WARNING: http://127.0.0.1:{port}/stats")
        assert topic["message_count"] == 1
        status, body = await call(box, "POST", "/api/topics/haunted", {"action": "pause"})
        assert status == 200
        assert body["message"].startswith(f"WARNING: http://127.0.0.1:{port}/topic/pause")
        assert (await box.stats(0))["haunted"]["paused"]


@pytest.mark.parametrize("path", ["/api/nodes", "/metrics"])
async def test_no_lookupd_answers_is_502(nursery: trio.Nursery, path: str) -> None:
    """The API and the exporter's scrape alike (Prometheus marks the target down)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        dead = format_address(sock.getsockname())
    options = AdminOptions(http_address="127.0.0.1:0", lookupd_http_addresses=[dead])
    addresses: AdminAddresses = await nursery.start(serve_admin, options)
    async with httpx.AsyncClient(trust_env=False) as client:
        response = await client.get(f"http://{format_address(addresses.http)}{path}")
    assert response.status_code == 502
    assert response.json()["message"].startswith("UPSTREAM_ERROR: failed to query any nsqlookupd")


async def test_admin_users_guard_changes(nursery: trio.Nursery, box: Box) -> None:
    options = AdminOptions(
        http_address="127.0.0.1:0",
        lookupd_http_addresses=[box.lookupd_http],
        admin_users=["alice"],
    )
    addresses: AdminAddresses = await nursery.start(serve_admin, options)
    url = f"http://{format_address(addresses.http)}/api/topics"
    body = json.dumps({"topic": "guarded"}).encode()
    response = await box.client.post(url, content=body)
    assert (response.status_code, response.json()) == (403, {"message": "FORBIDDEN"})
    response = await box.client.post(url, content=body, headers={"X-Forwarded-User": "alice"})
    assert response.status_code == 200
    assert (await box.client.get(url)).status_code == 200  # reading needs no user


def test_serve_admin_needs_a_cluster() -> None:
    with pytest.raises(ValueError, match="--nsqd-http-address or --lookupd-http-address required"):
        trio.run(serve_admin, AdminOptions(http_address="127.0.0.1:0"))
    both = AdminOptions(lookupd_http_addresses=["a:1"], nsqd_http_addresses=["b:2"])
    with pytest.raises(ValueError, match="not both"):
        both.validate()


def test_nsqbox_admin_command(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.tools.box_process import NSQBOX, TIMEOUT, BoxProcess

    box = BoxProcess(tmp_path)
    try:
        lookupd = box.ready["lookupd_http_address"]
        admin = subprocess.Popen(
            [*NSQBOX, "admin", f"--lookupd-http-address={lookupd}", "--http-address=127.0.0.1:0"],
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            assert admin.stderr is not None
            line = ""
            while "HTTP: listening on " not in line:
                line = admin.stderr.readline()
                assert line, "nsqbox admin exited"
            assert line.startswith("[nsqadmin] ")
            address = line.rpartition(" ")[2].strip()
            nodes = httpx.get(f"http://{address}/api/nodes", timeout=TIMEOUT).json()
            assert [n["http_port"] for n in nodes["nodes"]] == [
                int(box.ready["nsqd_http_address"].rpartition(":")[2])
            ]
            admin.send_signal(signal.SIGTERM)
            assert admin.wait(TIMEOUT) == 0
        finally:
            if admin.poll() is None:
                admin.kill()
                admin.wait(TIMEOUT)
            if admin.stderr is not None:
                admin.stderr.close()
        assert box.stop() == 0, box.stderr
    finally:
        box.kill()
    result = subprocess.run(
        [sys.executable, "-m", "nsqbox", "admin"], capture_output=True, text=True, timeout=TIMEOUT
    )
    assert result.returncode == 1
    assert result.stderr.endswith("FATAL: --nsqd-http-address or --lookupd-http-address required\n")
