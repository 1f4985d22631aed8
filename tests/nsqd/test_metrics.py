"""nsqbox's ``GET /metrics`` on nsqd's HTTP port, checked against ``/stats``.

Real nsqd on 127.0.0.1 port 0, a real consumer over TCP, HTTP through httpx; the exposition
is read with prometheus_client's own parsers.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.wire import commands
from tests.helpers import RawConn, eventually
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http
from tests.prometheus import PROMTOOL, expected_series, key, nsq_series, promtool_check, series

OPENMETRICS = "application/openmetrics-text; version=1.0.0"


@pytest.fixture
async def client() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(timeout=TIMEOUT) as http:
        with trio.fail_after(TIMEOUT * 6):
            yield http


async def post(client: httpx.AsyncClient, url: str, content: bytes = b"", **params: str) -> Any:
    response = await client.post(url, params=params, content=content)
    assert response.status_code == 200, response.text
    return response.json() if response.content.startswith(b"{") else None


async def stats(client: httpx.AsyncClient, server: NSQDWithHTTP) -> Any:
    response = await client.get(f"{server.url}/stats", params={"format": "json"})
    assert response.status_code == 200
    return response.json()


async def scrape(client: httpx.AsyncClient, server: NSQDWithHTTP, accept: str = "") -> str:
    headers = {"Accept": accept} if accept else {}
    response = await client.get(f"{server.url}/metrics", headers=headers)
    assert response.status_code == 200, response.text
    return response.text


async def test_metrics_match_stats_after_publish_consume_req_timeout_and_delete(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, e2e_processing_latency_percentiles=[1.0, 0.5])
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("orders", "billing", rdy=1)
    await post(client, f"{server.url}/mpub", b"a\nbb\nccc\nd\ne", topic="orders")
    finished = await consumer.message()
    await consumer.send(commands.fin(finished.id))
    requeued = await consumer.message()
    await consumer.send(commands.req(requeued.id, 0))
    await consumer.message()  # left in flight, then timed out below
    await consumer.send(commands.rdy(0))

    async def ready_zero() -> bool:
        [topic] = [
            t for t in (await stats(client, server))["topics"] if t["topic_name"] == "orders"
        ]
        return bool(topic["channels"][0]["clients"][0]["ready_count"] == 0)

    await eventually(ready_zero)
    fault = f"{server.url}/nsqbox/faults/time_out_in_flight"
    assert await post(client, fault, topic="orders", channel="billing") == {"count": 1}
    await post(client, f"{server.url}/pub", b"later", topic="orders", defer="600000")
    await post(client, f"{server.url}/topic/create", topic="gone")
    await post(client, f"{server.url}/channel/create", topic="gone", channel="held")
    await post(client, f"{server.url}/channel/pause", topic="gone", channel="held")
    await post(client, f"{server.url}/topic/pause", topic="gone")
    await post(client, f"{server.url}/pub", b"x", topic="gone")

    doc = await stats(client, server)
    found = series(await scrape(client, server))
    assert nsq_series(found) == expected_series(doc)
    billing = {"topic": "orders", "channel": "billing", "paused": "false"}
    assert {
        name: found[key(f"nsqd_channel_{name}", **billing)]
        for name in (
            "messages_total",
            "requeues_total",
            "timeouts_total",
            "depth",
            "in_flight",
            "deferred",
            "clients",
        )
    } == {
        "messages_total": 6,
        "requeues_total": 1,
        "timeouts_total": 1,
        "depth": 4,
        "in_flight": 0,
        "deferred": 1,
        "clients": 1,
    }
    orders = {"topic": "orders", "paused": "false"}
    assert found[key("nsqd_topic_messages_total", **orders)] == 6
    assert found[key("nsqd_topic_message_bytes_total", **orders)] == 1 + 2 + 3 + 1 + 1 + 5
    # one FIN, so the latency window holds one sample
    assert found[key("nsqd_channel_e2e_processing_latency_seconds", **billing, quantile="1.0")] > 0
    # a paused topic keeps what is published to it
    assert found[key("nsqd_topic_depth", topic="gone", paused="true")] == 1
    assert found[key("nsqd_channel_depth", topic="gone", channel="held", paused="true")] == 0
    assert found[key("nsqd_connections")] == 1  # the consumer; HTTP is not a client
    assert found[key("nsqd_healthy")] == 1
    assert found[key("nsqd_start_time_seconds")] == doc["start_time"]
    assert found[key("nsqd_uptime_seconds")] >= 0
    assert found[key("process_resident_memory_bytes")] > 0

    await post(client, f"{server.url}/topic/delete", topic="gone")
    after = series(await scrape(client, server))
    assert [k for k in after if ("topic", "gone") in k[1]] == []
    assert nsq_series(after) == expected_series(await stats(client, server))
    assert key("nsqd_channel_depth", **billing) in after
    await consumer.aclose()


async def test_openmetrics_when_accept_asks(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path)
    await post(client, f"{server.url}/topic/create", topic="t")
    await post(client, f"{server.url}/channel/create", topic="t", channel="c")
    await post(client, f"{server.url}/pub", b"hello", topic="t")
    response = await client.get(f"{server.url}/metrics", headers={"Accept": OPENMETRICS})
    assert response.headers["content-type"].startswith("application/openmetrics-text;")
    assert "x-nsq-content-type" not in response.headers
    assert response.text.endswith("# EOF\n")
    found = series(response.text, openmetrics=True)
    assert found[key("nsqd_channel_messages_total", topic="t", channel="c", paused="false")] == 1
    assert found[key("nsqd_topic_message_bytes_total", topic="t", paused="false")] == 5
    assert "# UNIT nsqd_uptime_seconds seconds" in response.text
    plain = await client.get(f"{server.url}/metrics")
    assert plain.headers["content-type"] == "text/plain; version=0.0.4; charset=utf-8"
    assert nsq_series(series(plain.text)) == nsq_series(found)
    odd = "application/openmetrics-text; version=abc"  # prometheus_client fails on this one
    response = await client.get(f"{server.url}/metrics", headers={"Accept": odd})
    assert (response.status_code, response.headers["content-type"]) == (
        200,
        plain.headers["content-type"],
    )


async def test_promtool_accepts_the_text_format(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    if PROMTOOL is None:
        pytest.skip("promtool is not installed (Debian's prometheus package)")
    server = await start_nsqd_http(nursery, tmp_path, e2e_processing_latency_percentiles=[0.99])
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("t", "c", rdy=1)
    await post(client, f"{server.url}/pub", b"m", topic="t")
    await consumer.send(commands.fin((await consumer.message()).id))
    text = await scrape(client, server)
    assert "nsqd_channel_e2e_processing_latency_seconds{" in text
    assert await trio.to_thread.run_sync(promtool_check, text) == ""
    await consumer.aclose()


async def test_kept_with_auth_unlike_the_other_nsqbox_routes(
    nursery: trio.Nursery, tmp_path: Path, client: httpx.AsyncClient
) -> None:
    server = await start_nsqd_http(nursery, tmp_path, auth_http_addresses=["127.0.0.1:1"])
    await post(client, f"{server.url}/topic/create", topic="t")
    assert (await client.get(f"{server.url}/nsqbox/peek", params={"topic": "t"})).status_code == 404
    found = series(await scrape(client, server))
    assert found[key("nsqd_topic_depth", topic="t", paused="false")] == 0


def test_prometheus_client_is_loaded_by_the_first_scrape(tmp_path: Path) -> None:
    code = (
        "import sys, httpx, trio\n"
        "from nsqbox.nsqd.domain.options import NSQDOptions\n"
        "from nsqbox.nsqd.server import serve_nsqd\n"
        "async def main():\n"
        "    options = NSQDOptions(tcp_address='127.0.0.1:0', http_address='127.0.0.1:0',\n"
        "                          data_path='.', node_id=1)\n"
        "    async with trio.open_nursery() as nursery:\n"
        "        addresses = await nursery.start(serve_nsqd, options)\n"
        "        print('prometheus_client' in sys.modules)\n"
        "        host, port = addresses.http\n"
        "        async with httpx.AsyncClient() as client:\n"
        "            response = await client.get(f'http://{host}:{port}/metrics')\n"
        "        print(response.status_code, 'prometheus_client' in sys.modules)\n"
        "        nursery.cancel_scope.cancel()\n"
        "trio.run(main)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=TIMEOUT * 6,
        cwd=tmp_path,
        check=True,
    )
    assert result.stdout.split() == ["False", "200", "True"]
