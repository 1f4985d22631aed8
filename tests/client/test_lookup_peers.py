"""The clients ask lookupds as every nsqbox peer is asked: no proxy, a size cap, one deadline.

``HTTP_PROXY`` names the user's web proxy; a cluster's own addresses are not reached through
it (nsqbox's admin, nsqd and tools never were). The blocking client used ``urllib``, which
honoured it: with an unreachable proxy in the environment ``lookup_nsqds`` failed. Here the
proxy is unreachable and the lookup still answers. A rogue "lookupd" that answers too much or
never finishes is that lookupd's error (:mod:`nsqbox.net.peer_http`'s bounds); no timing is
asserted, the answer's own deadline bounds the test.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from nsqbox.client.blocking import lookup_nsqds
from nsqbox.client.discovery import lookup_url, open_lookupd_client, query_lookupd
from nsqbox.net.addresses import format_address
from nsqbox.net.peer_http import MAX_PEER_DOCUMENT
from nsqbox.testing import ClusterSpec, NSQBox, ThreadBox
from tests.bounds.test_peer_documents import Rogue
from tests.client.helpers import TIMEOUT, TrioThread, start_lookupd

#: A proxy nothing listens on: a request sent through it fails to connect.
DEAD_PROXY = "http://127.0.0.1:1"


@pytest.fixture
def proxied(monkeypatch: pytest.MonkeyPatch) -> None:
    """Every proxy variable httpx and urllib read names the dead proxy, and nothing is exempt."""
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        monkeypatch.setenv(name, DEAD_PROXY)
        monkeypatch.setenv(name.lower(), DEAD_PROXY)
    for name in ("NO_PROXY", "no_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def trio_thread() -> Iterator[TrioThread]:
    with TrioThread() as thread:
        yield thread


@pytest.mark.usefixtures("proxied")
def test_a_proxy_in_the_environment_does_not_touch_lookupd_queries(tmp_path: Path) -> None:
    box = ThreadBox(ClusterSpec(nsqd=1), str(tmp_path))
    try:
        with NSQBox(box, timeout=10.0) as handle:
            handle.publish("t", b"x")
            handle.wait_for_producers("t", 1)
            lookupd = handle.lookupd_http_address
            assert lookupd is not None
            nsqd = [str(a) for a in handle.nsqd_tcp_addresses]
            assert lookup_nsqds(str(lookupd), "t") == nsqd
            assert lookup_nsqds(lookupd.url, "t") == nsqd
    finally:
        box.stop()


@pytest.mark.usefixtures("proxied")
async def test_the_trio_consumers_lookupd_client_takes_no_proxy(nursery: trio.Nursery) -> None:
    lookupd = await start_lookupd(nursery)
    url = lookup_url(format_address(lookupd.http), "t")
    with trio.fail_after(TIMEOUT):
        async with open_lookupd_client(TIMEOUT, [url]) as client:
            # 404 (no nsqd has the topic) is an empty answer; through the proxy, a query error
            assert await query_lookupd(client, url) == []


async def oversized(rogue: Rogue, stream: trio.SocketStream) -> None:
    """Says its answer is one byte over the cap, and sends the start of it."""
    length = MAX_PEER_DOCUMENT + 1
    await rogue.send(stream, f"HTTP/1.1 200 OK\r\nContent-Length: {length}\r\n\r\n".encode())
    await rogue.send(stream, b'{"producers":[')
    await trio.sleep_forever()


async def endless(rogue: Rogue, stream: trio.SocketStream) -> None:
    """Headers, then a byte now and then, never the end."""
    await rogue.send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
    while True:
        await rogue.send(stream, b" ")
        await trio.sleep(0.05)


def test_an_oversized_answer_is_that_lookupds_error(
    trio_thread: TrioThread, caplog: pytest.LogCaptureFixture
) -> None:
    rogue = Rogue(oversized)
    trio_thread.start(rogue.serve)
    url = f"http://127.0.0.1:{rogue.port}/lookup?topic=t"
    with pytest.raises(ConnectionError, match="no nsqlookupd answered") as raised:
        lookup_nsqds(f"127.0.0.1:{rogue.port}", "t")
    assert f"{url}: query error: answer of {MAX_PEER_DOCUMENT + 1} bytes is over" in str(
        raised.value
    )
    assert f"lookupd {url} query error" in caplog.text


def test_an_endless_answer_ends_at_the_deadline(trio_thread: TrioThread) -> None:
    rogue = Rogue(endless)
    trio_thread.start(rogue.serve)
    with pytest.raises(ConnectionError, match=r"query error: no complete answer within 0\.5s"):
        lookup_nsqds(f"127.0.0.1:{rogue.port}", "t", timeout=0.5)


def test_a_rogue_is_skipped_while_a_real_lookupd_answers(
    tmp_path: Path, trio_thread: TrioThread
) -> None:
    rogue = Rogue(endless)
    trio_thread.start(rogue.serve)
    box = ThreadBox(ClusterSpec(nsqd=1), str(tmp_path))
    try:
        with NSQBox(box, timeout=10.0) as handle:
            handle.publish("t", b"x")
            handle.wait_for_producers("t", 1)
            lookupd = handle.lookupd_http_address
            assert lookupd is not None
            nsqd = [str(a) for a in handle.nsqd_tcp_addresses]
            assert lookup_nsqds([f"127.0.0.1:{rogue.port}", str(lookupd)], "t", timeout=1) == nsqd
    finally:
        box.stop()
