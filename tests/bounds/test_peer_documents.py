"""A peer's document is read with a size cap and an overall deadline (issue #37, "Bounds").

Two rogue "nsqd"s on 127.0.0.1 register with a real nsqbox lookupd over its TCP V1
protocol: one answers ``/stats`` with 200 MB, made lazily as it is sent; the other
trickles a byte at a time and never ends. The admin's ``/api/topics/:topic`` still
answers, with the real nsqd's numbers and each rogue as that node's error, and the
bytes the rogue managed to send stay near the 16 MiB cap (socket buffers aside), far
from its 200 MB. No timing is asserted: the request's own timeout bounds the test.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import httpx
import pytest
import trio

from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import AdminAddresses, serve_admin
from nsqbox.net.addresses import format_address
from nsqbox.net.peer_http import MAX_PEER_DOCUMENT
from tests.admin.conftest import register_ghost

from .conftest import GUARD, Box

#: What the big rogue would send: 200 MB.
BIG = 200 * 1000 * 1000
CHUNK = 64 * 1024


class Rogue:
    """A rogue HTTP server: ``answer`` writes whatever it likes; ``sent`` counts bytes out."""

    def __init__(self, answer: Callable[[Rogue, trio.SocketStream], object]) -> None:
        self.answer = answer
        self.sent = 0
        self.port = 0

    async def serve(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
        self.port = listeners[0].socket.getsockname()[1]
        task_status.started()
        await trio.serve_listeners(self._handle, listeners)

    async def _handle(self, stream: trio.SocketStream) -> None:
        try:
            request = b""
            while b"\r\n\r\n" not in request:
                chunk = await stream.receive_some(4096)
                if not chunk:
                    return
                request += chunk
            await self.answer(self, stream)  # type: ignore[misc]
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the reader gave up on us: what the test expects
        finally:
            await stream.aclose()

    async def send(self, stream: trio.SocketStream, data: bytes) -> None:
        await stream.send_all(data)
        self.sent += len(data)


async def big_stats(rogue: Rogue, stream: trio.SocketStream) -> None:
    """200 MB of a JSON string, made chunk by chunk, no Content-Length (read to the end)."""
    await rogue.send(stream, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n")
    await rogue.send(stream, b"Connection: close\r\n\r\n")
    await rogue.send(stream, b'{"version":"1.3.0","topics":[],"pad":"')
    filler = b"x" * CHUNK
    while rogue.sent < BIG:
        await rogue.send(stream, filler)
    await rogue.send(stream, b'"}')


async def trickle(rogue: Rogue, stream: trio.SocketStream) -> None:
    """Headers, then one byte at a time, forever."""
    await rogue.send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n")
    while True:
        await rogue.send(stream, b" ")
        await trio.sleep(0.05)


async def test_a_huge_or_endless_stats_is_that_nodes_error(box: Box, nursery: trio.Nursery) -> None:
    big, slow = Rogue(big_stats), Rogue(trickle)
    await nursery.start(big.serve)
    await nursery.start(slow.serve)
    lookupd_tcp = box.addresses.lookupd.tcp
    ghosts = [await register_ghost(lookupd_tcp, r.port, "shared") for r in (big, slow)]
    # the real nsqd has the topic too, with two messages
    answer = await box.client.post(f"{box.nsqd}/mpub", params={"topic": "shared"}, content=b"a\nb")
    assert answer.status_code == 200

    options = AdminOptions(
        http_address="127.0.0.1:0",
        lookupd_http_addresses=[format_address(box.addresses.lookupd.http)],
        http_client_request_timeout=5.0,  # the trickle's bound; 16 MiB arrive well within it
    )
    admin: AdminAddresses = await nursery.start(partial(serve_admin, options))
    url = f"http://{format_address(admin.http)}/api/topics/shared"
    with trio.fail_after(GUARD):
        # wait until lookupd lists all three producers of the topic
        while True:
            lookup = await box.client.get(f"{box.lookupd}/lookup", params={"topic": "shared"})
            if lookup.status_code == 200 and len(lookup.json()["producers"]) == 3:
                break
            await trio.sleep(0.05)
        response = await box.client.get(url, timeout=GUARD)
    assert response.status_code == 200, response.text
    doc = response.json()
    assert doc["depth"] == 2  # the real nsqd's two messages, whatever the rogues did
    message = doc["message"]
    assert f"127.0.0.1:{big.port}/stats" in message
    assert f"is over {MAX_PEER_DOCUMENT} bytes" in message
    assert f"127.0.0.1:{slow.port}/stats" in message
    assert "no complete answer within 5s" in message
    # the admin stopped reading at the cap: the rogue got its 16 MiB out, plus what the
    # kernel's socket buffers took, never its 200 MB
    assert MAX_PEER_DOCUMENT < big.sent < MAX_PEER_DOCUMENT + 32 * 1024 * 1024
    for ghost in ghosts:
        await ghost.aclose()


async def test_a_declared_length_over_the_cap_is_refused_unread(box: Box) -> None:
    from nsqbox.net.peer_http import DocumentTooLarge, fetch

    async def declared(rogue: Rogue, stream: trio.SocketStream) -> None:
        await rogue.send(stream, b"HTTP/1.1 200 OK\r\nContent-Length: 200000000\r\n\r\n")
        await rogue.send(stream, b"x" * CHUNK)

    rogue = Rogue(declared)
    async with trio.open_nursery() as nursery:
        await nursery.start(rogue.serve)
        async with httpx.AsyncClient(timeout=GUARD, trust_env=False) as client:
            with pytest.raises(DocumentTooLarge, match="of 200000000 bytes is over 16777216"):
                await fetch(client, "GET", f"http://127.0.0.1:{rogue.port}/stats")
        nursery.cancel_scope.cancel()
