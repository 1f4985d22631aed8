"""The admin service's ``/api/messages`` (nsqd's peek route, merged over nodes), over sockets.

Every test checks afterwards, through nsqd's /stats, that peeking changed nothing.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import httpx

from nsqbox.admin.peek import NOT_SUPPORTED
from tests.admin.conftest import Box, real_nsqd
from tests.helpers import RawConn, eventually


async def messages(box: Box, path: str, **params: str) -> tuple[int, Any]:
    response = await box.client.get(f"{box.admin}/api/messages/{path}", params=params)
    return response.status_code, response.json()


def bodies(page: Any) -> list[tuple[str, bytes]]:
    return [(m["node"], base64.b64decode(m["body"])) for m in page["messages"]]


async def depth(box: Box, index: int, topic: str, channel: str) -> int:
    row = (await box.stats(index))[topic]["channels"]
    assert isinstance(row, dict)
    return int(row[channel]["depth"])


async def test_messages_from_both_nodes(box: Box) -> None:
    await box.create_channel(0, "orders", "billing")
    await box.create_channel(1, "orders", "billing")
    await box.publish(0, "orders", b"a0", b"a1", b"a2")
    await box.publish(1, "orders", b"b0", b"b1")
    status, page = await messages(box, "orders/billing")
    assert status == 200, page
    node0, node1 = box.nsqd_http(0), box.nsqd_http(1)
    assert sorted(bodies(page)) == sorted(
        [(node0, b"a0"), (node0, b"a1"), (node0, b"a2"), (node1, b"b0"), (node1, b"b1")]
    )
    assert {m["state"] for m in page["messages"]} == {"memory"}
    assert page["next"] is None
    assert page["message"] == ""
    nodes = {n["node"]: n for n in page["nodes"]}
    assert (nodes[node0]["supported"], nodes[node0]["depth"], nodes[node0]["listed"]) == (
        True,
        3,
        3,
    )
    assert (nodes[node1]["depth"], nodes[node1]["error"]) == (2, "")
    status, one = await messages(box, "orders/billing", node=node1, body_bytes="1")
    assert status == 200
    assert bodies(one) == [(node1, b"b"), (node1, b"b")]
    assert [m["size"] for m in one["messages"]] == [2, 2]
    assert await messages(box, "orders/billing", node="127.0.0.1:1") == (
        404,
        {"message": "NODE_NOT_FOUND"},
    )
    assert (await depth(box, 0, "orders", "billing"), await depth(box, 1, "orders", "billing")) == (
        3,
        2,
    )


async def test_every_message_says_its_attempts(box: Box) -> None:
    await box.create_channel(0, "tries", "work")
    await box.publish(0, "tries", b"first", b"second")
    consumer = await RawConn.open(box.addresses.nsqds[0].tcp)
    try:
        await consumer.sub("tries", "work", rdy=1)
        delivered = await consumer.message()
        assert delivered.attempts == 1
        status, page = await messages(box, "tries/work")
        assert status == 200, page
        found = {base64.b64decode(m["body"]): (m["state"], m["attempts"]) for m in page["messages"]}
        assert found == {delivered.body: ("in_flight", 1), b"second": ("memory", 0)}
        status, topic_page = await messages(box, "tries")  # the topic's own: none delivered
        assert status == 200, topic_page
        assert all(m["attempts"] == 0 for m in topic_page["messages"])
    finally:
        await consumer.stream.aclose()


async def test_paging_with_the_cursor(box: Box) -> None:
    await box.create_channel(0, "paged", "c")
    await box.create_channel(1, "paged", "c")
    sent0 = [b"x%d" % i for i in range(5)]
    sent1 = [b"y%d" % i for i in range(3)]
    await box.publish(0, "paged", *sent0)
    await box.publish(1, "paged", *sent1)
    seen: list[tuple[str, bytes]] = []
    cursor = ""
    pages = 0
    while True:
        params = {"limit": "2"} | ({"cursor": cursor} if cursor else {})
        status, page = await messages(box, "paged/c", **params)
        assert status == 200, page
        assert all(n["listed"] <= 2 for n in page["nodes"])
        seen += bodies(page)
        pages += 1
        if page["next"] is None:
            break
        cursor = page["next"]
    assert pages == 3
    expected = [(box.nsqd_http(0), b) for b in sent0] + [(box.nsqd_http(1), b) for b in sent1]
    assert sorted(seen) == sorted(expected)
    assert (await depth(box, 0, "paged", "c"), await depth(box, 1, "paged", "c")) == (5, 3)


async def test_topic_messages_and_bad_arguments(box: Box) -> None:
    await box.publish(0, "unchannelled", b"m1", b"m2")
    status, page = await messages(box, "unchannelled")
    assert status == 200, page
    assert bodies(page) == [(box.nsqd_http(0), b"m1"), (box.nsqd_http(0), b"m2")]
    assert page["channel"] is None
    status, page = await messages(box, "unchannelled/nochannel")
    assert status == 200
    assert [n["error"] for n in page["nodes"]] == ["CHANNEL_NOT_FOUND"]
    assert await messages(box, "unchannelled", cursor="!!") == (
        400,
        {"message": "INVALID_CURSOR"},
    )
    assert await messages(box, "unchannelled", limit="0") == (400, {"message": "INVALID_LIMIT"})
    assert await messages(box, "nosuchtopic") == (404, {"message": "TOPIC_NOT_FOUND"})
    assert (await box.stats(0))["unchannelled"]["depth"] == 2


async def test_real_nsqd_is_not_supported(box: Box, tmp_path: Path) -> None:
    async with real_nsqd(box, tmp_path / "real-nsqd") as real:  # the box's nsqds lock tmp_path
        await box.create_channel(0, "mixed", "c")
        await box.publish(0, "mixed", b"ours")

        async def published_to_real_nsqd() -> bool:
            try:
                response = await box.client.post(
                    f"http://{real}/pub", params={"topic": "mixed"}, content=b"theirs"
                )
            except httpx.TransportError:
                return False  # not listening yet
            return response.status_code == 200

        async def both_producers_known() -> bool:
            lookup = await box.lookupd("/lookup", topic="mixed")
            assert isinstance(lookup, dict)
            return len(lookup["producers"]) == 2

        await eventually(published_to_real_nsqd)
        await eventually(both_producers_known)
        status, page = await messages(box, "mixed/c")
        assert status == 200, page
        assert bodies(page) == [(box.nsqd_http(0), b"ours")]
        nodes = {n["node"]: n for n in page["nodes"]}
        assert (nodes[real]["supported"], nodes[real]["error"]) == (False, NOT_SUPPORTED)
        assert nodes[box.nsqd_http(0)]["supported"] is True
        assert page["next"] is None
        status, page = await messages(box, "mixed", node=real)
        assert status == 200
        assert page["messages"] == []
        assert page["nodes"][0]["error"] == NOT_SUPPORTED
        assert await depth(box, 0, "mixed", "c") == 1
        stats = (await box.client.get(f"http://{real}/stats", params={"format": "json"})).json()
        [row] = stats["topics"]  # real nsqd may have moved it on to channel c (from lookupd)
        assert row["depth"] + sum(c["depth"] for c in row["channels"]) == 1
