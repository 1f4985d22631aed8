"""The fast path past h11 gives h11's results: request heads, answers, whole conversations."""

from __future__ import annotations

from collections.abc import Coroutine
from typing import Any, TypeVar

import h11
from hypothesis import given, settings
from hypothesis import strategies as st

from nsqbox.http import Request, Response, Router, ServerConnection
from nsqbox.http.fastpath import encode_response, parse_request
from nsqbox.http.protocol import _REASONS, NEED_DATA, CloseConnection, Dispatch, SendBytes
from nsqbox.http.server import _answer as answer

T = TypeVar("T")

# Derandomized and without a deadline: the same cases every run, however loaded the machine.
SETTINGS = settings(max_examples=400, derandomize=True, deadline=None, database=None)
NSQ_LINE = b"X-NSQ-Content-Type: nsq; version=1.0\r\n"

METHODS = [b"GET", b"POST", b"PUT", b"DELETE", b"OPTIONS", b"PATCH", b"HEAD", b"get", b"CONNECT"]
TARGETS = [b"/ping", b"/ping/", b"/pub?topic=t", b"/pub?topic=a%20b", b"/custom", b"/missing",
           b"*", b"http://h/ping?x=1", b"/a\x7fb", b"/\xff", b""]  # fmt: skip
VERSIONS = [b"HTTP/1.1", b"HTTP/1.1", b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1 "]
NAMES = [b"Host", b"host", b"HOST", b"Content-Length", b"content-length", b"Connection",
         b"Transfer-Encoding", b"Expect", b"Upgrade", b"X-A", b"Bad Name", b""]  # fmt: skip
VALUES = [b"", b"x", b" x ", b"\tx\t", b"a b", b"a  b", b"0", b"3", b"03", b"3,3", b"-1",
          b"99999999999999999999999", b"keep-alive", b"Keep-Alive", b"close", b"chunked",
          b"100-continue", b"\x01", b"\xff", b"a\rb", b"a\nb", b" "]  # fmt: skip
SEPARATORS = [b"\r\n", b"\r\n", b"\r\n", b"\n"]


# What h11 accepts and the fast path must take as h11 does (odd but valid values).
PLAIN_NAMES = [b"X-A", b"User-Agent", b"content-type", b"ACCEPT", b"!#$%&'*+.^_`|~"]
PLAIN_VALUES = [b"", b"x", b" x ", b"\tx\t", b"a b", b"a \t b", b"\x01", b"\xff\x80", b'/;,="']


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """One request: half of them plain (the fast path's), the rest anything h11 might see."""
    if draw(st.booleans()):
        return draw(plain_requests())
    sep = st.sampled_from(SEPARATORS)
    method, target, version = (draw(st.sampled_from(c)) for c in (METHODS, TARGETS, VERSIONS))
    body = draw(st.binary(max_size=6))
    headers = draw(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(VALUES)), max_size=4))
    if draw(st.booleans()):
        headers.insert(draw(st.integers(0, len(headers))), (b"Host", b"h"))
    if draw(st.booleans()):
        headers.append((b"Content-Length", str(len(body)).encode()))
    head = method + b" " + target + b" " + version + draw(sep)
    head += b"".join(name + b":" + value + draw(sep) for name, value in headers)
    return head + draw(sep) + body


@st.composite
def plain_requests(draw: st.DrawFn) -> bytes:
    """A complete HTTP/1.1 request with one Host and plain framing."""
    method = draw(st.sampled_from(METHODS[:6]))
    target = draw(st.sampled_from(TARGETS[:9]))
    body = draw(st.binary(max_size=6))
    pairs = st.tuples(st.sampled_from(PLAIN_NAMES), st.sampled_from(PLAIN_VALUES))
    headers = draw(st.lists(pairs, max_size=3))
    headers.insert(draw(st.integers(0, len(headers))), (b"Host", draw(st.sampled_from(VALUES))))
    if body or draw(st.booleans()):
        name = draw(st.sampled_from([b"Content-Length", b"content-length"]))
        headers.insert(draw(st.integers(0, len(headers))), (name, str(len(body)).encode()))
    if draw(st.booleans()):
        headers.append((b"Connection", draw(st.sampled_from([b"keep-alive", b"Keep-Alive"]))))
    lines = [method + b" " + target + b" HTTP/1.1"] + [n + b":" + v for n, v in headers]
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _plain(body: bytes = b"") -> bytes:
    return b"POST /pub?topic=t HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % len(body) + body


def test_plain_requests_take_the_fast_path() -> None:
    fast = parse_request(_plain(b"hello") + b"GET /ping HTTP/1.1\r\n")
    assert fast is not None
    assert (fast.method, fast.target, fast.body) == (b"POST", b"/pub?topic=t", b"hello")
    assert fast.headers == ((b"host", b"h"), (b"content-length", b"5"))
    assert fast.size == len(_plain(b"hello"))
    keep_alive = b"GET /ping HTTP/1.1\r\nhost: h\r\nConnection: Keep-Alive\r\nX-A:  a b \r\n\r\n"
    assert parse_request(keep_alive) is not None


def test_what_h11_must_decide_is_declined() -> None:
    assert parse_request(_plain(b"hello")[:-1]) is None  # incomplete body
    assert parse_request(b"GET /ping HTTP/1.1\r\nHost: h\r\n") is None  # incomplete head
    assert parse_request(b"GET /ping HTTP/1.0\r\nHost: h\r\n\r\n") is None
    assert parse_request(b"HEAD /ping HTTP/1.1\r\nHost: h\r\n\r\n") is None
    assert parse_request(b"GET /ping HTTP/1.1\r\n\r\n") is None  # no Host
    assert parse_request(b"GET /ping HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n") is None
    chunked = b"POST /pub HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"
    assert parse_request(chunked) is None


@SETTINGS
@given(requests(), st.binary(max_size=20))
def test_a_request_taken_by_the_fast_path_is_what_h11_parses(raw: bytes, after: bytes) -> None:
    buf = raw + after
    fast = parse_request(buf)
    if fast is None:
        return
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(buf)
    head = conn.next_event()
    assert isinstance(head, h11.Request)
    assert (head.method, head.target, head.http_version) == (fast.method, fast.target, b"1.1")
    assert tuple((bytes(k), bytes(v)) for k, v in head.headers) == fast.headers
    body = b""
    while not isinstance(event := conn.next_event(), h11.EndOfMessage):
        assert isinstance(event, h11.Data)
        body += event.data
    assert body == fast.body
    assert conn.trailing_data == (buf[fast.size :], False)
    assert not conn.client_is_waiting_for_100_continue
    conn.send(h11.Response(status_code=200, headers=[(b"Content-Length", b"0")]))
    conn.send(h11.EndOfMessage())
    assert (conn.our_state, conn.their_state) == (h11.DONE, h11.DONE)  # kept alive


def _run(coro: Coroutine[Any, Any, T]) -> T:
    """Run a coroutine that never waits (these handlers) without an event loop."""
    try:
        coro.send(None)
    except StopIteration as done:
        result: T = done.value
        return result
    raise AssertionError("handler suspended")


def _router(seen: list[Request]) -> Router:
    router = Router(max_body_size=64)

    async def echo(request: Request) -> bytes:
        seen.append(request)
        return request.body

    async def custom(request: Request) -> Response:
        seen.append(request)
        return Response(200, b"c", (("X-Custom", "1"),))

    router.add("GET", "/ping", echo, plain_text=True)
    router.add("POST", "/pub", echo, max_body_size=4)
    router.add("GET", "/custom", custom)
    return router


async def converse(conn: ServerConnection, pieces: list[bytes], *, quick: bool = False) -> bytes:
    """Everything ``conn`` writes for ``pieces`` arriving one by one, then EOF.

    ``quick``: requests are answered as the server does, by quick handlers when
    they can (``Endpoint.respond_now``); else always by ``Endpoint.respond``.
    """
    out = []
    for piece in [*pieces, b""]:
        conn.receive_data(piece)
        while (event := conn.next_event()) is not NEED_DATA:
            if isinstance(event, SendBytes):
                out.append(event.data)
            elif isinstance(event, Dispatch):
                if quick:
                    response = await answer(conn, event)
                else:
                    response = await event.endpoint.respond(event.request)
                out.append(conn.respond(response))
            else:
                assert isinstance(event, CloseConnection)
                return b"".join(out)
        assert piece, "NEED_DATA after EOF"
    raise AssertionError("no end after EOF")


def _converse(fast_path: bool, data: bytes, cuts: list[int]) -> tuple[bytes, list[Request]]:
    """Everything the server writes for ``data`` arriving in pieces, then EOF."""
    seen: list[Request] = []
    conn = ServerConnection(_router(seen), remote_address="1.2.3.4:5", fast_path=fast_path)
    pieces = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    return _run(converse(conn, pieces)), seen


@SETTINGS
@given(st.lists(requests(), min_size=1, max_size=4), st.data())
def test_a_conversation_is_the_same_with_and_without_the_fast_path(
    batch: list[bytes], data: st.DataObject
) -> None:
    stream = b"".join(batch)
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=3))))
    assert _converse(True, stream, cuts) == _converse(False, stream, cuts)


STATUSES = [100, 200, 201, 204, 299, 301, 304, 307, 400, 404, 405, 413, 500, 503, 600]
HEADER_NAMES = ["Content-Type", "Allow", "Location", "X-Other", "Connection"]
HEADER_VALUES = ["text/plain; charset=utf-8", "GET, OPTIONS", "/ping?x=1", " x", "x ", "a  b",
                 "", "\xe9", "a\tb", "close"]  # fmt: skip


@SETTINGS
@given(
    st.sampled_from(STATUSES),
    st.lists(st.tuples(st.sampled_from(HEADER_NAMES), st.sampled_from(HEADER_VALUES)), max_size=3),
    st.binary(max_size=5),
)
def test_an_answer_encoded_by_the_fast_path_is_what_h11_writes(
    status: int, headers: list[tuple[str, str]], body: bytes
) -> None:
    fast = encode_response(status, _REASONS.get(status, b""), tuple(headers), body, NSQ_LINE)
    if fast is None:
        return
    conn = ServerConnection(_router([]), fast_path=False)
    conn.receive_data(b"GET /ping HTTP/1.1\r\nHost: h\r\n\r\n")
    assert isinstance(conn.next_event(), Dispatch)
    assert conn.respond(Response(status, body, tuple(headers))) == fast
