"""serve_http over real sockets on 127.0.0.1, with httpx and raw streams as clients."""

from __future__ import annotations

import socket

import httpx
import pytest
import trio

from nsqbox.http import HTTPError, Request, Router, serve_http

TIMEOUT = 10


def _app(seen: list[str]) -> Router:
    router = Router(max_body_size=1000)

    @router.route("GET", "/ping", plain_text=True)
    async def ping(request: Request) -> str:
        seen.append(request.remote_address)
        return "OK"

    @router.route("POST", "/echo", max_body_size=64, too_large=HTTPError(413, "MSG_TOO_BIG"))
    async def echo(request: Request) -> bytes:
        return request.body

    @router.route("GET", "/boom")
    async def boom(request: Request) -> str:
        raise RuntimeError("handler bug")

    @router.route("GET", "/slow")
    async def slow(request: Request) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    return router


async def _serve(nursery: trio.Nursery, seen: list[str] | None = None) -> str:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    await nursery.start(serve_http, _app(seen if seen is not None else []), listeners)
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


async def _raw(url: str, data: bytes) -> bytes:
    """Send ``data`` on a fresh connection; everything the server sends until it closes."""
    host, port = url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(data)
        received = b""
        while chunk := await stream.receive_some(65536):
            received += chunk
        return received


async def test_keep_alive_reuses_one_connection(nursery: trio.Nursery) -> None:
    seen: list[str] = []
    url = await _serve(nursery, seen)
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as client:
            for _ in range(3):
                response = await client.get("/ping")
                assert response.text == "OK"
                # a plain-text route, as nsqd's /ping: no NSQ content type
                assert "X-NSQ-Content-Type" not in response.headers
    assert len(seen) == 3
    assert len(set(seen)) == 1
    assert seen[0].startswith("127.0.0.1:")


async def test_body_limits_over_the_wire(nursery: trio.Nursery) -> None:
    url = await _serve(nursery)
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as client:
            ok = await client.post("/echo", content=b"x" * 64)
            assert (ok.status_code, ok.content) == (200, b"x" * 64)
            big = await client.post("/echo", content=b"x" * 65)
            assert big.status_code == 413
            assert big.json() == {"message": "MSG_TOO_BIG"}
            assert big.headers["connection"] == "close"

            async def chunks() -> object:
                for _ in range(10):
                    yield b"y" * 10

            streamed = await client.post("/echo", content=chunks())  # type: ignore[arg-type]
            assert streamed.status_code == 413
            # The server is still there.
            assert (await client.get("/ping")).text == "OK"


async def test_large_refused_body_is_drained_so_the_client_sees_the_answer(
    nursery: trio.Nursery,
) -> None:
    url = await _serve(nursery)
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as client:
            response = await client.post("/echo", content=b"z" * (4 * 1024 * 1024))
    assert response.status_code == 413


async def test_handler_crash_is_500_and_the_server_lives(nursery: trio.Nursery) -> None:
    url = await _serve(nursery)
    with trio.fail_after(TIMEOUT):
        async with httpx.AsyncClient(base_url=url) as client:
            response = await client.get("/boom")
            assert (response.status_code, response.json()) == (500, {"message": "INTERNAL_ERROR"})
            assert (await client.get("/ping")).text == "OK"


@pytest.mark.parametrize(
    "garbage",
    [
        pytest.param(
            b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03" + b"\x00" * 40, id="tls-hello"
        ),
        pytest.param(b"GET / HTTP/1.1\r\nHost x\r\n\r\n", id="bad-header"),
        pytest.param(b"GET /ping HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n", id="bad-cl"),
        pytest.param(b"  V2", id="nsq-magic"),
    ],
)
async def test_malformed_http_gets_400_and_never_takes_the_server_down(
    nursery: trio.Nursery, garbage: bytes
) -> None:
    url = await _serve(nursery)
    with trio.fail_after(TIMEOUT):
        answer = await _raw(url, garbage + b"\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 400 Bad Request\r\n")
        assert answer.endswith(b"\r\n\r\n400 Bad Request")
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/ping")).text == "OK"


async def test_peer_that_vanishes_mid_request_is_harmless(nursery: trio.Nursery) -> None:
    url = await _serve(nursery)
    host, port = url.removeprefix("http://").split(":")
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream(host, int(port))
        await stream.send_all(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\nabc")
        await trio.aclose_forcefully(stream)
        async with httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/ping")).text == "OK"


async def test_pipelined_requests_are_answered_in_order(nursery: trio.Nursery) -> None:
    url = await _serve(nursery)
    with trio.fail_after(TIMEOUT):
        answer = await _raw(
            url,
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\none"
            b"GET /missing HTTP/1.1\r\nHost: x\r\n\r\n"
            b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nConnection: close\r\n\r\ntwo",
        )
    assert answer.count(b"HTTP/1.1 ") == 3
    assert answer.index(b"one") < answer.index(b"NOT_FOUND") < answer.index(b"two")


async def test_cancelling_the_server_closes_open_connections() -> None:
    # Only the server is cancelled: the client waits outside its scope, so what it sees is
    # the server closing the connection (cancelled with it, it would see nothing at all).
    with trio.fail_after(TIMEOUT):
        async with (
            httpx.AsyncClient() as client,
            trio.open_nursery() as clients,
            trio.open_nursery() as server,
        ):
            url = await _serve(server)

            async def stuck() -> None:
                with pytest.raises(httpx.RemoteProtocolError):
                    await client.get(f"{url}/slow")

            clients.start_soon(stuck)
            await trio.testing.wait_all_tasks_blocked()
            server.cancel_scope.cancel()


async def test_a_backlog_of_connections_is_accepted_in_one_scheduler_pass(
    nursery: trio.Nursery,
) -> None:
    # Counts scheduler passes, not time: trio's own accept loop takes one
    # connection per pass, so under load the last of a burst of clients waited
    # (busy connections x burst) turns before its first byte was read.
    url = await _serve(nursery)
    port = int(url.rsplit(":", 1)[1])
    burst = 100
    clients = []
    try:
        # Blocking connects without a checkpoint: the whole burst sits in the
        # kernel's backlog, each with its request sent, before the server runs.
        for _ in range(burst):
            sock = socket.create_connection(("127.0.0.1", port))
            sock.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
            clients.append(sock)
        answered: set[int] = set()
        passes = 0
        with trio.fail_after(TIMEOUT):
            while len(answered) < burst:
                await trio.lowlevel.checkpoint()
                passes += 1
                for i, sock in enumerate(clients):
                    if i not in answered and _answered(sock):
                        answered.add(i)
        assert passes <= 20, f"{burst} queued connections took {passes} scheduler passes"
    finally:
        for sock in clients:
            sock.close()


def _answered(sock: socket.socket) -> bool:
    try:
        data = sock.recv(65536, socket.MSG_DONTWAIT)
    except BlockingIOError:
        return False
    assert data.startswith(b"HTTP/1.1 200 OK\r\n"), data
    return True


async def test_a_connection_with_pipelined_requests_gets_one_answer_per_turn(
    nursery: trio.Nursery,
) -> None:
    # Counts answers per scheduler pass, not time: a client that always has the
    # next request waiting must not be served in a loop while others wait.
    url = await _serve(nursery)
    port = int(url.rsplit(":", 1)[1])
    pipelined = 300
    busy = socket.create_connection(("127.0.0.1", port))
    other = socket.create_connection(("127.0.0.1", port))
    try:
        busy.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n" * pipelined)
        other.sendall(b"GET /ping HTTP/1.1\r\nHost: x\r\n\r\n")
        received = bytearray()
        busy_answers = 0
        most_in_one_pass = 0
        other_answered_after: int | None = None
        with trio.fail_after(TIMEOUT):
            while busy_answers < pipelined:
                await trio.lowlevel.checkpoint()
                new = _count_answers(busy, received)
                busy_answers += new
                most_in_one_pass = max(most_in_one_pass, new)
                if other_answered_after is None and _answered(other):
                    other_answered_after = busy_answers
        assert most_in_one_pass <= 2, f"{most_in_one_pass} answers in one turn"
        assert other_answered_after is not None
        assert other_answered_after < 10, f"waited for {other_answered_after} pipelined answers"
    finally:
        busy.close()
        other.close()


def _count_answers(sock: socket.socket, received: bytearray) -> int:
    """How many more answers ``sock`` has; ``received`` keeps what it sent so far."""
    before = received.count(b"HTTP/1.1 200 OK\r\n")
    while True:
        try:
            received += sock.recv(65536, socket.MSG_DONTWAIT)
        except BlockingIOError:
            return received.count(b"HTTP/1.1 200 OK\r\n") - before
