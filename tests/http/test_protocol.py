"""ServerConnection, sans I/O: bytes in (often one at a time), events and bytes out."""

from __future__ import annotations

import h11
import pytest

from nsqbox.http import HTTPError, Request, Response, Router, ServerConnection
from nsqbox.http.protocol import NEED_DATA, CloseConnection, Dispatch, SendBytes


async def _ok(request: Request) -> str:
    return "OK"


def _router() -> Router:
    router = Router(max_body_size=10)
    router.add("GET", "/ping", _ok)
    router.add("POST", "/pub", _ok, max_body_size=5, too_large=HTTPError(413, "MSG_TOO_BIG"))
    return router


def _feed_bytewise(conn: ServerConnection, data: bytes) -> object:
    """Feed one byte at a time until the connection has something other than NEED_DATA."""
    for i in range(len(data)):
        conn.receive_data(data[i : i + 1])
        event = conn.next_event()
        if event is not NEED_DATA:
            assert i == len(data) - 1, f"event {event!r} before the end of input"
            return event
    return conn.next_event()


def _parse_response(data: bytes) -> tuple[h11.Response, bytes]:
    client = h11.Connection(h11.CLIENT)
    client.send(h11.Request(method="GET", target="/", headers=[("Host", "x")]))
    client.send(h11.EndOfMessage())
    client.receive_data(data)
    head = client.next_event()
    assert isinstance(head, h11.Response)
    body = b""
    while True:
        event = client.next_event()
        if isinstance(event, h11.Data):
            body += event.data
        elif event is h11.NEED_DATA:
            client.receive_data(b"")  # a body that ends where the server closes
        else:
            assert isinstance(event, h11.EndOfMessage)
            return head, body


def test_request_parsed_one_byte_at_a_time() -> None:
    conn = ServerConnection(_router(), remote_address="127.0.0.1:1234")
    assert conn.next_event() is NEED_DATA
    event = _feed_bytewise(
        conn, b"POST /pub?topic=a%20b&x=1 HTTP/1.1\r\nHost: h\r\nContent-Length: 3\r\n\r\nabc"
    )
    assert isinstance(event, Dispatch)
    request = event.request
    assert request.method == "POST"
    assert request.path == "/pub"
    assert request.raw_query == "topic=a%20b&x=1"
    assert request.args() == {"topic": ["a b"], "x": ["1"]}
    assert request.body == b"abc"
    assert request.header("content-length") == "3"
    assert request.remote_address == "127.0.0.1:1234"


@pytest.mark.parametrize("fast_path", [True, False], ids=["fast-path", "h11"])
def test_requests_and_events_are_frozen_values(fast_path: bool) -> None:
    conn = ServerConnection(_router(), fast_path=fast_path)
    conn.receive_data(b"POST /pub HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\n\r\nx")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    assert event.request == Request("POST", "/pub", "/pub", "", event.request.headers, b"x")
    assert event.request.headers == ((b"host", b"h"), (b"content-length", b"1"))
    with pytest.raises(AttributeError):
        event.request.body = b"y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        event.request = event.request  # type: ignore[misc]
    assert event.request.body == b"x"


async def test_response_bytes_and_keep_alive_with_pipelining() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(b"GET /ping HTTP/1.1\r\nHost: h\r\n\r\nGET /nope HTTP/1.1\r\nHost: h\r\n\r\n")
    first = conn.next_event()
    assert isinstance(first, Dispatch)
    assert first.request.path == "/ping"
    with pytest.raises(RuntimeError):
        conn.next_event()
    data = conn.respond(await first.endpoint.respond(first.request))
    assert data == (
        b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"X-NSQ-Content-Type: nsq; version=1.0\r\nContent-Length: 2\r\n\r\nOK"
    )
    second = conn.next_event()
    assert isinstance(second, Dispatch)
    head, body = _parse_response(conn.respond(await second.endpoint.respond(second.request)))
    assert head.status_code == 404
    assert body == b'{"message":"NOT_FOUND"}'
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"")
    assert conn.next_event() == CloseConnection(drain=False)


def test_respond_without_request_is_an_error() -> None:
    conn = ServerConnection(_router())
    with pytest.raises(RuntimeError):
        conn.respond(Response())


def test_declared_body_too_large_is_refused_before_reading() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(b"POST /pub HTTP/1.1\r\nHost: h\r\nContent-Length: 6\r\n\r\n")
    event = conn.next_event()
    assert isinstance(event, SendBytes)
    head, body = _parse_response(event.data)
    assert head.status_code == 413
    assert body == b'{"message":"MSG_TOO_BIG"}'
    assert (b"connection", b"close") in head.headers
    assert conn.next_event() == CloseConnection(drain=True)


def test_chunked_body_too_large_is_refused_as_it_grows() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(
        b"POST /pub HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n"
    )
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"3\r\ndef\r\n")
    event = conn.next_event()
    assert isinstance(event, SendBytes)
    assert _parse_response(event.data)[1] == b'{"message":"MSG_TOO_BIG"}'
    assert conn.next_event() == CloseConnection(drain=True)


def test_body_of_exactly_the_limit_is_accepted() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(b"POST /pub HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n12345")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    assert event.request.body == b"12345"


def test_expect_100_continue() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(
        b"POST /pub HTTP/1.1\r\nHost: h\r\nContent-Length: 2\r\nExpect: 100-continue\r\n\r\n"
    )
    event = conn.next_event()
    assert event == SendBytes(b"HTTP/1.1 100 Continue\r\n\r\n")
    assert conn.next_event() is NEED_DATA
    conn.receive_data(b"hi")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    assert event.request.body == b"hi"


@pytest.mark.parametrize(
    ("data", "status"),
    [
        pytest.param(b"GARBAGE\r\n\r\n", 400, id="no-version"),
        pytest.param(b"GET / HTTP/1.1\r\n\r\n", 400, id="no-host"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: x\r\n\r\n", 400, id="bad-cl"),
        pytest.param(b"GET / HTTP/1.1\r\nHost: h\r\nX: " + b"a" * 70_000, 431, id="huge-head"),
    ],
)
def test_malformed_requests_get_an_error_and_close(data: bytes, status: int) -> None:
    conn = ServerConnection(_router())
    conn.receive_data(data)
    event = conn.next_event()
    assert isinstance(event, SendBytes)
    head, body = _parse_response(event.data)
    assert head.status_code == status
    assert body.startswith(str(status).encode())
    assert conn.next_event() == CloseConnection(drain=True)


@pytest.mark.parametrize(
    ("data", "text"),
    [
        pytest.param(b"GARBAGE\r\n\r\n", b"400 Bad Request", id="no-version"),
        pytest.param(
            b"GET / HTTP/1.1\r\n\r\n",
            b"400 Bad Request: missing required Host header",
            id="no-host",
        ),
        pytest.param(
            b"GET /ping HTTP/2.0\r\nHost: h\r\n\r\n",
            b"505 HTTP Version Not Supported: unsupported protocol version",
            id="http2",
        ),
    ],
)
def test_refusals_are_go_net_http_bytes(data: bytes, text: bytes) -> None:
    # Go writes these itself: no Content-Length, Date or NSQ header.
    conn = ServerConnection(_router())
    conn.receive_data(data)
    event = conn.next_event()
    assert event == SendBytes(
        b"HTTP/1.1 " + text + b"\r\nContent-Type: text/plain; charset=utf-8\r\n"
        b"Connection: close\r\n\r\n" + text
    )
    assert conn.next_event() == CloseConnection(drain=True)


async def test_http10_closes_after_the_response() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(b"GET /ping HTTP/1.0\r\n\r\n")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    data = conn.respond(await event.endpoint.respond(event.request))
    assert data.startswith(b"HTTP/1.1 200 OK\r\n")
    assert b"Connection: close\r\n" in data
    assert conn.next_event() == CloseConnection(drain=False)


async def test_head_response_has_no_body() -> None:
    router = _router()
    router.add("HEAD", "/ping", _ok)
    conn = ServerConnection(router)
    conn.receive_data(b"HEAD /ping HTTP/1.1\r\nHost: h\r\n\r\n")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    data = conn.respond(await event.endpoint.respond(event.request))
    assert data.endswith(b"Content-Length: 2\r\n\r\n")


async def test_malformed_request_after_a_head_request_gets_its_400_with_a_body() -> None:
    router = _router()
    router.add("HEAD", "/ping", _ok)
    conn = ServerConnection(router)
    conn.receive_data(b"HEAD /ping HTTP/1.1\r\nHost: h\r\n\r\n\x00")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    conn.respond(await event.endpoint.respond(event.request))
    event = conn.next_event()
    assert isinstance(event, SendBytes)
    assert event.data.startswith(b"HTTP/1.1 400 Bad Request\r\n")
    assert event.data.endswith(b"\r\n\r\n400 Bad Request")


def test_absolute_form_target() -> None:
    conn = ServerConnection(_router())
    conn.receive_data(b"GET http://h:1/ping?a=1 HTTP/1.1\r\nHost: h\r\n\r\n")
    event = conn.next_event()
    assert isinstance(event, Dispatch)
    assert event.request.path == "/ping"
    assert event.request.raw_query == "a=1"
