"""Third-party HTTP clients against nsqbox's nsqd HTTP API.

* gnsq's ``NsqdHTTPClient`` (urllib3): every method, JSON parsed only because the
  responses carry ``Content-Type: application/json``.
* pynsq 0.9.1 has no nsqd HTTP client; its HTTP use is tornado's HTTP client with
  ``Accept: application/vnd.nsq; version=1.0`` (``Reader.query_lookupd``). The same
  client and header are driven here against nsqd's routes.

Both clients block, so they run in worker threads (``trio.to_thread.run_sync``)
while the server runs on the test's trio loop.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from tests.helpers import RawConn
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http

gnsq = pytest.importorskip("gnsq")
tornado_httpclient = pytest.importorskip("tornado.httpclient")

from gnsq.errors import NSQHttpError  # noqa: E402

T = TypeVar("T")
PYNSQ_ACCEPT = {"Accept": "application/vnd.nsq; version=1.0"}


async def in_thread(fn: Callable[[], T]) -> T:
    with trio.fail_after(TIMEOUT):
        return await trio.to_thread.run_sync(fn)


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> NSQDWithHTTP:
    return await start_nsqd_http(nursery, tmp_path)


def gnsq_client(server: NSQDWithHTTP) -> Any:
    return gnsq.NsqdHTTPClient("127.0.0.1", server.nsqd.http_port, timeout=TIMEOUT)


async def test_gnsq_publish_and_consume(server: NSQDWithHTTP) -> None:
    client = gnsq_client(server)
    consumer = await RawConn.open(server.tcp)
    await consumer.sub("gnsq", "c", rdy=10)
    assert await in_thread(lambda: client.publish("gnsq", b"one")) == b"OK"
    assert await in_thread(lambda: client.multipublish("gnsq", [b"two", b"three"])) == b"OK"
    binary = [b"four\nwith newline", b"\x00five"]
    assert await in_thread(lambda: client.multipublish("gnsq", binary, binary=True)) == b"OK"
    assert await in_thread(lambda: client.publish("gnsq", b"later", defer=0)) == b"OK"
    received = [(await consumer.message()).body for _ in range(6)]
    assert received == [b"one", b"two", b"three", *binary, b"later"]
    topic = server.nsqd.topics["gnsq"]
    assert (topic.message_count, topic.message_bytes) == (6, sum(map(len, received)))
    await consumer.aclose()


async def test_gnsq_admin_methods(server: NSQDWithHTTP) -> None:
    client = gnsq_client(server)
    nsqd = server.nsqd
    assert await in_thread(client.ping) == b"OK"
    info = await in_thread(client.info)
    assert (info["version"], info["tcp_port"]) == ("1.3.0", server.tcp[1])

    await in_thread(lambda: client.create_topic("t"))
    await in_thread(lambda: client.create_channel("t", "c"))
    assert "c" in nsqd.topics["t"].channels
    await in_thread(lambda: client.pause_topic("t"))
    await in_thread(lambda: client.pause_channel("t", "c"))
    assert nsqd.topics["t"].paused
    assert nsqd.topics["t"].channels["c"].paused
    await in_thread(lambda: client.unpause_topic("t"))
    await in_thread(lambda: client.unpause_channel("t", "c"))
    assert not nsqd.topics["t"].paused
    assert not nsqd.topics["t"].channels["c"].paused
    await in_thread(lambda: client.publish("t", b"x"))
    await in_thread(lambda: client.empty_channel("t", "c"))
    assert nsqd.topics["t"].channels["c"].depth() == 0
    await in_thread(lambda: client.empty_topic("t"))

    stats = await in_thread(lambda: client.stats(topic="t", channel="c"))
    assert stats["topics"][0]["topic_name"] == "t"
    assert stats["topics"][0]["channels"][0]["channel_name"] == "c"
    text = await in_thread(lambda: client.stats(text=True))
    assert b"[t              ] depth: 0" in text

    await in_thread(lambda: client.delete_channel("t", "c"))
    assert "c" not in nsqd.topics["t"].channels
    await in_thread(lambda: client.delete_topic("t"))
    assert "t" not in nsqd.topics


async def test_gnsq_sees_nsq_errors(server: NSQDWithHTTP) -> None:
    client = gnsq_client(server)
    with pytest.raises(NSQHttpError, match="<404>"):
        await in_thread(lambda: client.delete_topic("missing"))
    with pytest.raises(NSQHttpError, match="<400>"):
        await in_thread(lambda: client.publish("t", b""))
    with pytest.raises(NSQHttpError, match="<404>"):
        await in_thread(lambda: client.empty_channel("missing", "c"))


def _tornado_fetch(url: str, method: str = "GET", body: bytes | None = None) -> Any:
    client = tornado_httpclient.HTTPClient()
    try:
        return client.fetch(url, method=method, body=body, headers=PYNSQ_ACCEPT, raise_error=False)
    finally:
        client.close()


async def test_tornado_client_as_pynsq_uses_it(server: NSQDWithHTTP) -> None:
    url = server.url
    pub = await in_thread(lambda: _tornado_fetch(f"{url}/pub?topic=py", "POST", b"hello"))
    assert (pub.code, pub.body) == (200, b"OK")
    assert pub.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"
    mpub = await in_thread(lambda: _tornado_fetch(f"{url}/mpub?topic=py", "POST", b"a\nb"))
    assert (mpub.code, mpub.body) == (200, b"OK")
    stats = await in_thread(lambda: _tornado_fetch(f"{url}/stats?format=json&topic=py"))
    assert stats.headers["Content-Type"] == "application/json; charset=utf-8"
    topic = json.loads(stats.body)["topics"][0]
    assert (topic["topic_name"], topic["message_count"], topic["message_bytes"]) == ("py", 3, 7)
    missing = await in_thread(lambda: _tornado_fetch(f"{url}/lookup?topic=py"))
    assert (missing.code, json.loads(missing.body)) == (404, {"message": "NOT_FOUND"})
