"""The admin service's ``/api/faults``, over sockets, against real nsqbox and real nsqd.

Each fault is checked where a client sees it (a publish refused), not only in the listing.
Node control is tested with :class:`NSQDControl`, a small :class:`NodeControl` over an nsqd
the test runs (tests/admin/conftest.py): it really stops the server and starts it again on
the same ports.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import AdminAddresses, serve_admin
from nsqbox.net.addresses import format_address
from tests.admin.conftest import TIMEOUT, Box, real_nsqd, start_controlled
from tests.helpers import eventually


async def call(box: Box, method: str, path: str, **params: str) -> tuple[int, Any]:
    response = await box.client.request(method, f"{box.admin}{path}", params=params)
    return response.status_code, response.json()


async def pub(client: httpx.AsyncClient, node: str, topic: str) -> int:
    response = await client.post(f"http://{node}/pub", params={"topic": topic}, content=b"m")
    return response.status_code


async def test_add_list_and_lift_on_one_node(box: Box) -> None:
    node0, node1 = box.nsqd_http(0), box.nsqd_http(1)
    status, fault = await call(
        box, "POST", "/api/faults/fail_publishes", node=node0, topic="orders", count="2"
    )
    assert status == 200, fault
    assert (fault["node"], fault["role"], fault["kind"]) == (node0, "nsqd", "fail_publishes")
    assert (fault["topic"], fault["remaining"], fault["message"]) == ("orders", 2, "")
    assert await pub(box.client, node0, "orders") == 503  # the fault, as a client sees it
    assert await pub(box.client, node1, "orders") == 200  # the other node is untouched
    assert await pub(box.client, node0, "other") == 200  # and so is another topic

    status, listing = await call(box, "GET", "/api/faults")
    assert status == 200
    assert [(f["node"], f["id"], f["kind"], f["remaining"]) for f in listing["faults"]] == [
        (node0, fault["id"], "fail_publishes", 1)
    ]
    nodes = {n["node"]: n for n in listing["nodes"]}
    assert (nodes[node0]["role"], nodes[node0]["supported"], nodes[node0]["faults"]) == (
        "nsqd",
        True,
        1,
    )
    assert (nodes[node1]["faults"], nodes[node1]["error"]) == (0, "")
    assert nodes[box.lookupd_http]["role"] == "nsqlookupd"
    # The box gives its admin service node control over its nsqds.
    assert listing["control"] == [
        {"index": 0, "role": "nsqd", "node": node0, "running": True},
        {"index": 1, "role": "nsqd", "node": node1, "running": True},
    ]

    lifted = await call(box, "DELETE", f"/api/faults/{node0}/{fault['id']}")
    assert lifted == (200, {"lifted": True, "node": node0, "message": ""})
    assert await pub(box.client, node0, "orders") == 200
    again = await call(box, "DELETE", f"/api/faults/{fault['id']}", node=node0)
    assert again == (200, {"lifted": False, "node": node0, "message": ""})


async def test_one_shot_faults_and_lift_all(box: Box) -> None:
    node0, node1 = box.nsqd_http(0), box.nsqd_http(1)
    for node in (node0, node1):
        status, doc = await call(box, "POST", "/api/faults/disk_full", node=node)
        assert status == 200, doc
    ping = await box.client.get(f"http://{node1}/ping")
    assert (ping.status_code, ping.text) == (500, "NOK - write: no space left on device")
    status, doc = await call(box, "POST", "/api/faults/time_out_in_flight", node=node0)
    assert (status, doc) == (200, {"count": 0, "node": node0, "role": "nsqd", "message": ""})
    assert await call(box, "DELETE", "/api/faults") == (200, {"lifted": 2, "message": ""})
    assert (await box.client.get(f"http://{node1}/ping")).text == "OK"
    assert (await call(box, "GET", "/api/faults"))[1]["faults"] == []


async def test_refusals(box: Box) -> None:
    node0 = box.nsqd_http(0)
    cases = [
        ("POST", "/api/faults/fail_publishes", {}, 400, "MISSING_ARG_NODE"),
        ("POST", "/api/faults/Fail-Publishes", {"node": node0}, 400, "INVALID_KIND"),
        ("POST", "/api/faults/fail_publishes", {"node": node0, "count": "0"}, 400, "INVALID_COUNT"),
        ("POST", "/api/faults/fail_publishes", {"node": "127.0.0.1:1"}, 404, "NODE_NOT_FOUND"),
        ("POST", "/api/faults/fail_publishes", {"node": "example.com:80"}, 404, "NODE_NOT_FOUND"),
        ("DELETE", "/api/faults/x", {"node": node0}, 400, "INVALID_ID"),
        ("DELETE", "/api/faults/127.0.0.1:1/1", {}, 404, "NODE_NOT_FOUND"),
    ]
    for method, path, params, want_status, want in cases:
        status, doc = await call(box, method, path, **params)
        assert (status, doc["message"].partition(":")[0]) == (want_status, want), (path, doc)
    status, doc = await call(box, "POST", "/api/faults/no_such_kind", node=node0)
    assert (status, doc["message"]) == (404, f"UNKNOWN_FAULT: nsqd {node0} has no 'no_such_kind'")
    assert (await call(box, "GET", "/api/faults"))[1]["faults"] == []


async def test_node_control_without_the_box(box: Box, nursery: trio.Nursery) -> None:
    """``nsqbox admin`` alone (no node control) answers 501 and still lists faults."""
    options = AdminOptions(http_address="127.0.0.1:0", lookupd_http_addresses=[box.lookupd_http])
    admin: AdminAddresses = await nursery.start(serve_admin, options)
    url = f"http://{format_address(admin.http)}/api/faults"
    for action in ("restart", "crash", "start"):
        response = await box.client.post(f"{url}/{action}", params={"node": "0"})
        assert response.status_code == 501
        assert response.json()["message"] == (
            f"NOT_IMPLEMENTED: {action} needs nsqbox up: this admin service does not run the "
            "cluster's servers (nsqbox admin alone, or a real NSQ cluster)"
        )
    listing = (await box.client.get(url)).json()
    assert listing["control"] is None
    assert {n["node"] for n in listing["nodes"]} >= {box.nsqd_http(0), box.nsqd_http(1)}


async def test_real_nsqd_is_not_supported(box: Box, tmp_path: Path) -> None:
    async with real_nsqd(box, tmp_path / "real-nsqd") as real:

        async def listed() -> bool:
            nodes = (await call(box, "GET", "/api/faults"))[1]["nodes"]
            return any(n["node"] == real for n in nodes)

        await eventually(listed)
        status, listing = await call(box, "GET", "/api/faults")
        assert (status, listing["message"]) == (200, "")
        nodes = {n["node"]: n for n in listing["nodes"]}
        assert (nodes[real]["supported"], nodes[real]["error"]) == (
            False,
            "not supported by this node",
        )
        assert nodes[box.nsqd_http(0)]["supported"] is True
        status, doc = await call(box, "POST", "/api/faults/fail_publishes", node=real)
        assert status == 404
        assert doc["message"].startswith(f"NOT_SUPPORTED: nsqd {real} has no /nsqbox/faults")
        assert await pub(box.client, real, "orders") == 200
        assert await call(box, "DELETE", "/api/faults") == (200, {"lifted": 0, "message": ""})


async def test_node_control_restarts_crashes_and_starts(
    nursery: trio.Nursery, tmp_path: Path
) -> None:
    admin, node = await start_controlled(nursery, tmp_path, admin_users=["ops"])
    ops = {"X-Forwarded-User": "ops"}
    async with httpx.AsyncClient(timeout=TIMEOUT, trust_env=False) as client:

        async def act(action: str, node_name: str, **headers: str) -> tuple[int, Any]:
            url = f"{admin}/api/faults/{action}"
            response = await client.post(url, params={"node": node_name}, headers=headers)
            return response.status_code, response.json()

        assert await act("restart", "0") == (403, {"message": "FORBIDDEN"})
        listing = (await client.get(f"{admin}/api/faults")).json()
        assert listing["control"] == [{"index": 0, "role": "nsqd", "node": node, "running": True}]

        # A fault named by the control's index; a restarted nsqd starts with none.
        url = f"{admin}/api/faults/fail_publishes"
        response = await client.post(url, params={"node": "0"}, headers=ops)
        assert (response.status_code, response.json()["node"]) == (200, node)
        assert await pub(client, node, "orders") == 503
        status, doc = await act("restart", "0", **ops)
        assert (status, doc) == (
            200,
            {"action": "restart", "index": 0, "role": "nsqd", "node": node, "running": True,
             "message": ""},
        )  # fmt: skip
        assert await pub(client, node, "orders") == 200
        assert (await client.get(f"{admin}/api/faults")).json()["faults"] == []

        status, doc = await act("crash", node, **ops)
        assert (status, doc["running"]) == (200, False)
        with pytest.raises(httpx.ConnectError):
            await client.get(f"http://{node}/ping")
        listing = (await client.get(f"{admin}/api/faults")).json()
        assert listing["control"][0]["running"] is False
        assert listing["message"].startswith("WARNING: ")  # the nsqd did not answer
        # still a node, known to be down: a fault for it says so
        [down] = [n for n in listing["nodes"] if n["node"] == node]
        assert (down["role"], down["error"]) == ("nsqd", "down")
        for name in ("0", node):
            response = await client.post(
                f"{admin}/api/faults/fail_publishes", params={"node": name}, headers=ops
            )
            assert (response.status_code, response.json()["message"]) == (
                409,
                "NODE_DOWN: nsqd 0 is down: start it first (nsqbox fault start --node 0)",
            )
        response = await client.delete(f"{admin}/api/faults/{node}/1", headers=ops)
        assert (response.status_code, response.json()["message"][:9]) == (409, "NODE_DOWN")
        response = await client.delete(f"{admin}/api/faults", headers=ops)
        assert (response.status_code, response.json()["lifted"]) == (200, 0)
        status, doc = await act("crash", node, **ops)
        assert (status, doc["message"]) == (409, "NODE_CONTROL_FAILED: nsqd 0 is not running")

        status, doc = await act("start", "0", **ops)
        assert (status, doc["running"]) == (200, True)
        assert (await client.get(f"http://{node}/ping")).text == "OK"
        assert await act("start", "9", **ops) == (
            404,
            {"message": f"NODE_NOT_FOUND: known: 0 ({node})"},
        )
        # no node: the only nsqd
        response = await client.post(f"{admin}/api/faults/start", headers=ops)
        assert (response.status_code, response.json()["message"]) == (
            409,
            "NODE_CONTROL_FAILED: nsqd 0 is running",
        )
        response = await client.post(f"{admin}/api/faults/restart", headers=ops)
        assert (response.status_code, response.json()["node"]) == (200, node)
