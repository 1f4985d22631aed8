"""Streamed answers (a ``Response`` with ``stream``) over real sockets on 127.0.0.1.

The body's pieces go out as they come, chunked; the connection serves the next request
after the body's end; a client that hangs up mid-body ends it and closes the iterator.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import httpx
import trio

from nsqbox.http import Request, Response, Router, serve_http

TIMEOUT = 10


class Pieces:
    """The body's source: pieces handed in by the test, and whether it was closed."""

    def __init__(self) -> None:
        self.send, self.receive = trio.open_memory_channel[bytes](10)
        self.closed = trio.Event()

    async def body(self) -> AsyncIterator[bytes]:
        try:
            async for piece in self.receive:
                yield piece
        finally:
            self.closed.set()


async def _serve(nursery: trio.Nursery, pieces: Pieces) -> str:
    router = Router()

    @router.route("GET", "/stream")
    async def stream(request: Request) -> Response:
        return Response(headers=(("Content-Type", "application/x-ndjson"),), stream=pieces.body())

    @router.route("GET", "/ping", plain_text=True)
    async def ping(request: Request) -> str:
        return "OK"

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(serve_http, router, listeners)
    return f"http://127.0.0.1:{listeners[0].socket.getsockname()[1]}"


async def test_pieces_arrive_as_they_come_then_the_connection_goes_on(
    nursery: trio.Nursery,
) -> None:
    pieces = Pieces()
    url = await _serve(nursery, pieces)
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as client:
            async with client.stream("GET", "/stream") as response:
                assert response.status_code == 200
                assert response.headers["transfer-encoding"] == "chunked"
                assert "content-length" not in response.headers
                received = response.aiter_bytes()
                await pieces.send.send(b'{"a": 1}\n')
                assert await received.__anext__() == b'{"a": 1}\n'  # before the body ends
                await pieces.send.send(b'{"b": 2}\n')
                assert await received.__anext__() == b'{"b": 2}\n'
                await pieces.send.aclose()
                assert [p async for p in received] == []
            await pieces.closed.wait()
            again = await client.get("/ping")  # the same connection, kept alive
            assert again.text == "OK"


async def test_a_client_that_hangs_up_ends_the_body(nursery: trio.Nursery) -> None:
    pieces = Pieces()
    url = await _serve(nursery, pieces)
    host, port = url.removeprefix("http://").split(":")
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream(host, int(port))
        await stream.send_all(b"GET /stream HTTP/1.1\r\nHost: x\r\n\r\n")
        await pieces.send.send(b"first\n")
        head = b""
        while b"first" not in head:
            head += await stream.receive_some(65536)
        assert head.startswith(b"HTTP/1.1 200 ")
        await stream.aclose()  # the server learns it without writing anything more
        await pieces.closed.wait()
