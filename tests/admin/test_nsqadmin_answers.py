"""The admin service's ``/api`` against nsqadmin v1.3.0's answers, recorded from its source.

No nsqadmin binary is at hand (only nsqd and nsqlookupd), so the expected answers below
are what ``nsqadmin/http.go`` and ``internal/clusterinfo/types.go`` of v1.3.0 produce,
written down as fixtures; the box is real (servers on 127.0.0.1, port 0). Where nsqbox
answers otherwise on purpose (an unknown topic), README's "Differences from nsqd" says so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from nsqbox.admin.routes.nsqadmin import go_nil_nodes
from tests.admin.conftest import Box

# nsqadmin's graphiteHandler: reqParams.Get("metric") must be "rate", then "target" must be
# present; then it asks --graphite-url, and without one (nsqbox has none) the request fails:
# http_api.Err{500, "INTERNAL_ERROR"}.
GRAPHITE = [
    ("/api/graphite", 400, {"message": "INVALID_ARG_METRIC"}),
    ("/api/graphite?metric=count&target=x", 400, {"message": "INVALID_ARG_METRIC"}),
    ("/api/graphite?metric=rate", 400, {"message": "INVALID_ARG_TARGET"}),
    ("/api/graphite?metric=rate&target=", 500, {"message": "INTERNAL_ERROR"}),
    ("/api/graphite?metric=rate&target=nsq.*.orders", 500, {"message": "INTERNAL_ERROR"}),
]

# channelHandler returns allChannelStats[channelName] embedded in a struct with Message:
# for a channel no node has, a nil *ChannelStats, which encodes no fields at all.
UNKNOWN_CHANNEL = (200, {"message": ""})


async def get(box: Box, path: str) -> tuple[int, Any]:
    response = await box.client.get(box.admin + path)
    return response.status_code, json.loads(response.content)


@pytest.mark.parametrize(("path", "status", "body"), GRAPHITE)
async def test_graphite_answers_as_nsqadmin_without_graphite(
    box: Box, path: str, status: int, body: dict[str, str]
) -> None:
    assert await get(box, path) == (status, body)


async def test_an_unknown_channel_is_an_empty_answer(box: Box) -> None:
    await box.create_channel(0, "known", "c")
    await box.synced()
    assert await get(box, "/api/topics/known/nope") == UNKNOWN_CHANNEL
    # the channel that is there answers in full
    status, channel = await get(box, "/api/topics/known/c")
    assert (status, channel["channel_name"], channel["node"]) == (200, "c", "*")


async def test_a_node_row_has_null_nodes(box: Box) -> None:
    """TopicStats.Add appends each node's row to NodeStats; a node's own row never gets one,
    so its ``nodes`` is a nil slice: JSON null. A summed row lists its nodes."""
    for index in (0, 1):
        await box.create_channel(index, "rows", "c")
        await box.publish(index, "rows", b"m")
    await box.synced()
    status, topic = await get(box, "/api/topics/rows")
    assert status == 200
    assert topic["node"] == "*"
    assert [row["nodes"] for row in topic["nodes"]] == [None, None]
    assert [c["nodes"] for row in topic["nodes"] for c in row["channels"]] == [None, None]
    [summed] = topic["channels"]
    assert summed["node"] == "*"
    assert [row["nodes"] for row in summed["nodes"]] == [None, None]

    status, channel = await get(box, "/api/topics/rows/c")
    assert status == 200
    assert [row["nodes"] for row in channel["nodes"]] == [None, None]

    status, node = await get(box, f"/api/nodes/{box.nsqd_http(1)}")
    assert status == 200
    [row] = node["topics"]
    assert (row["topic_name"], row["nodes"]) == ("rows", None)
    assert [c["nodes"] for c in row["channels"]] == [None]


async def test_an_unknown_topic_stays_404(box: Box) -> None:
    """nsqadmin: 502 UPSTREAM_ERROR from the lookupds' 404s; nsqbox names the cause (a
    difference README lists: both fail a script's status check)."""
    assert await get(box, "/api/topics/nope") == (404, {"message": "TOPIC_NOT_FOUND"})


def test_go_nil_nodes_only_touches_empty_nodes() -> None:
    doc = {"nodes": [{"nodes": [], "channels": []}], "clients": [], "x": {"nodes": []}}
    assert go_nil_nodes(doc) == {
        "nodes": [{"nodes": None, "channels": []}],
        "clients": [],
        "x": {"nodes": None},
    }
