"""nsqd's /pub and /mpub through the server's hot path give the general path's bytes.

The hot path (a repeated request head reusing its parse, cached static routes,
constant answers encoded once, the inline socket pump, the plain-query parse)
must answer exactly as h11 and the general code do, bad input included.
"""

from __future__ import annotations

import struct
from pathlib import Path
from urllib.parse import unquote_to_bytes

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from nsqbox.http import Request, Response, Router, ServerConnection, parse_query
from nsqbox.http.router import App
from nsqbox.nsqd.routes import nsqd as http_api
from nsqbox.nsqd.routes.nsqd import make_app
from tests.http.nsqd_app import TIMEOUT, NSQDWithHTTP, start_nsqd_http
from tests.http.test_fastpath import SETTINGS, converse, plain_requests, requests
from tests.http.test_fastpath import _converse as converse_on_router

OK = (
    b"HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"X-NSQ-Content-Type: nsq; version=1.0\r\nContent-Length: 2\r\n\r\nOK"
)


def _bad_request(code: bytes) -> bytes:
    """nsqd's answer ``400 {"message": code}``."""
    body = b'{"message":"%s"}' % code
    return (
        b"HTTP/1.1 400 Bad Request\r\nContent-Type: application/json; charset=utf-8\r\n"
        b"X-NSQ-Content-Type: nsq; version=1.0\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)
    )


def _post(target: bytes, body: bytes) -> bytes:
    head = b"POST %s HTTP/1.1\r\nHost: h\r\nContent-Length: %d\r\n\r\n" % (target, len(body))
    return head + body


def _binary(bodies: list[bytes]) -> bytes:
    return struct.pack(">i", len(bodies)) + b"".join(struct.pack(">i", len(b)) + b for b in bodies)


# (request, the status line of its answer); max_msg_size=100, max_body_size=1000.
CASES = [
    (_post(b"/pub?topic=t", b"hello"), b"200 OK"),
    (_post(b"/pub?topic=t", b"world"), b"200 OK"),  # the same head: its parse is reused
    (_post(b"/pub?topic=t", b"hi"), b"200 OK"),  # another Content-Length
    (_post(b"/put?topic=t", b"old"), b"200 OK"),
    (_post(b"/pub", b"x"), b"400 Bad Request"),  # MISSING_ARG_TOPIC
    (_post(b"/pub?topic=", b"x"), b"400 Bad Request"),  # INVALID_TOPIC
    (_post(b"/pub?topic=bad!name", b"x"), b"400 Bad Request"),
    (_post(b"/pub?topic=" + b"a" * 65, b"x"), b"400 Bad Request"),
    (_post(b"/pub?topic=a+b", b"x"), b"400 Bad Request"),  # a space
    (_post(b"/pub?topic=%zz", b"x"), b"400 Bad Request"),  # INVALID_REQUEST
    (_post(b"/pub?topic=t;x", b"x"), b"400 Bad Request"),
    (_post(b"/pub?topic=t", b""), b"400 Bad Request"),  # MSG_EMPTY
    (_post(b"/pub?topic=t&defer=10", b"later"), b"200 OK"),
    (_post(b"/pub?topic=t&defer=-1", b"x"), b"400 Bad Request"),  # INVALID_DEFER
    (_post(b"/pub?topic=%74", b"escaped"), b"200 OK"),
    (_post(b"/pub?topic=t#ephemeral", b"x"), b"200 OK"),
    (b"GET /pub?topic=t HTTP/1.1\r\nHost: h\r\n\r\n", b"405 Method Not Allowed"),
    (_post(b"/pub/?topic=t", b"x"), b"307 Temporary Redirect"),
    (_post(b"/PUB?topic=t", b"x"), b"307 Temporary Redirect"),
    (_post(b"/mpub?topic=t", b"a\nb\n\nc\n"), b"200 OK"),
    (_post(b"/mpub?topic=t", b"d\ne"), b"200 OK"),
    (_post(b"/mpub?topic=t", b"\n"), b"200 OK"),  # nothing to publish
    (_post(b"/mpub?topic=t", b"x" * 101 + b"\nok"), b"413 Request Entity Too Large"),
    (_post(b"/mpub?topic=t&binary=true", _binary([b"f", b"g"])), b"200 OK"),
    (_post(b"/mpub?topic=t&binary=true", _binary([b""])), b"413 Request Entity Too Large"),
    (_post(b"/mpub", b"x"), b"400 Bad Request"),
    (_post(b"/pub?topic=u", b"elsewhere"), b"200 OK"),
]
#: Messages the cases publish to topic "t" (deferred included).
PUBLISHED = 3 + 1 + 1 + 1 + 3 + 2 + 2
#: Refused before its body is read; the connection closes after the answer.
TOO_BIG = _post(b"/pub?topic=t", b"x" * 101)


async def _converse(app: App, fast_path: bool, pieces: list[bytes]) -> bytes:
    """Everything the server writes for ``pieces`` arriving one by one, then EOF: with
    ``fast_path``, as the server does (quick handlers too); else by h11 and ``respond``."""
    conn = ServerConnection(app, remote_address="1.2.3.4:5", fast_path=fast_path)
    return await converse(conn, pieces, quick=fast_path)


@pytest.fixture
async def server(nursery: trio.Nursery, tmp_path: Path) -> NSQDWithHTTP:
    return await start_nsqd_http(nursery, tmp_path, max_msg_size=100, max_body_size=1000)


def _count(server: NSQDWithHTTP, topic: str) -> int:
    return server.nsqd.topics[topic].message_count


@pytest.mark.parametrize("pipelined", [False, True], ids=["one-by-one", "pipelined"])
async def test_nsqd_answers_are_the_same_bytes_with_and_without_the_fast_path(
    server: NSQDWithHTTP, pipelined: bool
) -> None:
    app = make_app(server.nsqd)
    requests = [raw for raw, _ in CASES] + [TOO_BIG]
    pieces = [b"".join(requests)] if pipelined else requests
    with trio.fail_after(TIMEOUT):
        fast = await _converse(app, True, pieces)
        assert _count(server, "t") == PUBLISHED
        general = await _converse(app, False, pieces)
    assert fast == general
    assert _count(server, "t") == 2 * PUBLISHED
    answers = fast.split(b"HTTP/1.1 ")[1:]
    statuses = [status for _, status in CASES] + [b"413 Request Entity Too Large"]
    assert [a[: len(s)] for a, s in zip(answers, statuses, strict=True)] == statuses
    assert answers[0] == OK[len(b"HTTP/1.1 ") :]
    assert answers[-1].endswith(b'Connection: close\r\n\r\n{"message":"MSG_TOO_BIG"}')


async def test_repeated_publishes_over_a_socket_get_nsqd_answers(server: NSQDWithHTTP) -> None:
    host, port = server.url.removeprefix("http://").split(":")
    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            # Pipelined in one write, then one more in two writes (head, body).
            await stream.send_all(_post(b"/pub?topic=s", b"abc") * 3)
            request = _post(b"/pub?topic=s", b"def")
            await stream.send_all(request[:-2])
            await trio.testing.wait_all_tasks_blocked()
            await stream.send_all(request[-2:])
            await stream.send_all(_post(b"/pub?topic=s", b"") + _post(b"/mpub?topic=s", b"g\nh"))
            expected = OK * 4 + _bad_request(b"MSG_EMPTY") + OK
            received = b""
            while len(received) < len(expected):
                received += await stream.receive_some(65536)
    assert received == expected
    assert _count(server, "s") == 6


async def test_pub_remembers_a_plain_query_and_still_answers_as_nsqd(
    server: NSQDWithHTTP,
) -> None:
    """A /pub query with a valid topic and no defer is parsed once: the same query
    again publishes to that topic (made anew if deleted meanwhile), others are parsed,
    and the queries remembered are bounded."""
    app = make_app(server.nsqd)
    plain, late = _post(b"/pub?topic=r", b"a"), _post(b"/pub?topic=r&defer=999999999", b"b")
    with trio.fail_after(TIMEOUT):
        assert (
            await _converse(app, True, [plain, late, plain])
            == OK + _bad_request(b"INVALID_DEFER") + OK
        )
        assert http_api._pub_query("topic=r") == ("r", "", None)
        assert http_api._pub_query("topic=r&defer=999999999") == ("r", "", 999999999)
        assert _count(server, "r") == 2
        assert server.nsqd.delete_existing_topic("r")
        assert await _converse(app, True, [plain, late]) == OK + _bad_request(b"INVALID_DEFER")
        assert _count(server, "r") == 1
        many = [_post(b"/pub?topic=r&n=%d" % n, b"c") for n in range(1100)]
        assert await _converse(app, True, many) == OK * len(many)
    remembered = http_api._pub_query.cache_info()
    assert remembered.maxsize is not None
    assert 0 < remembered.currsize <= remembered.maxsize < len(many)
    assert _count(server, "r") == 1 + len(many)


async def test_a_remembered_pub_query_waits_for_its_topics_announcement(
    server: NSQDWithHTTP,
) -> None:
    """A publish to a topic the lookupds are being told about answers once they know
    it (nsqd's GetTopic), a query /pub remembers too: its quick path leaves it to pub."""
    host, port = server.url.removeprefix("http://").split(":")
    released, waiting = trio.Event(), []

    async def announced() -> None:
        waiting.append(1)
        await released.wait()

    with trio.fail_after(TIMEOUT):
        stream = await trio.open_tcp_stream(host, int(port))
        async with stream:
            for _ in range(2):  # the second time by the quick path
                await stream.send_all(_post(b"/pub?topic=w", b"x"))
                assert await _receive(stream, len(OK)) == OK
            assert http_api._pub_query("topic=w").topic == "w"
            server.nsqd.announcing["w"] = announced
            await stream.send_all(_post(b"/pub?topic=w", b"y"))
            await trio.testing.wait_all_tasks_blocked()
            assert waiting == [1]
            assert _count(server, "w") == 3  # published, answered once announced
            released.set()
            assert await _receive(stream, len(OK)) == OK
    del server.nsqd.announcing["w"]


async def _receive(stream: trio.SocketStream, size: int) -> bytes:
    received = b""
    while len(received) < size:
        data = await stream.receive_some(size - len(received))
        assert data, "the server closed the connection"
        received += data
    return received


@SETTINGS
@given(plain_requests(), st.data())
def test_a_repeated_head_is_parsed_as_the_first(raw: bytes, data: st.DataObject) -> None:
    head, _, body = raw.partition(b"\r\n\r\n")
    again = head + b"\r\n\r\n" + data.draw(st.binary(min_size=len(body), max_size=len(body)))
    stream = raw + again + raw + data.draw(requests()) + again
    cuts = sorted(set(data.draw(st.lists(st.integers(0, len(stream)), max_size=3))))
    assert converse_on_router(True, stream, cuts) == converse_on_router(False, stream, cuts)


def _reference_query(raw: str) -> dict[str, list[str]]:
    """parse_query without its shortcuts (Go's url.ParseQuery, as nsqbox had it)."""
    values: dict[str, list[str]] = {}
    for pair in raw.split("&"):
        if not pair:
            continue
        if ";" in pair:
            raise ValueError(pair)
        key, _, value = pair.partition("=")
        values.setdefault(_reference_unescape(key), []).append(_reference_unescape(value))
    return values


def _reference_unescape(text: str) -> str:
    if "%" in text and not all(
        len(part) >= 2 and all(c in "0123456789abcdefABCDEF" for c in part[:2])
        for part in text.split("%")[1:]
    ):
        raise ValueError(text)
    return unquote_to_bytes(text.replace("+", " ")).decode("utf-8", "replace")


@SETTINGS
@given(st.text(alphabet="ab=&;%+2Fz\xe9 ", max_size=12))
def test_the_query_shortcuts_parse_as_go_does(raw: str) -> None:
    try:
        expected: dict[str, list[str]] | None = _reference_query(raw)
    except ValueError:
        expected = None
    if expected is None:
        with pytest.raises(ValueError, match=r"semicolon|escape"):
            parse_query(raw)
    else:
        assert parse_query(raw) == expected


def test_static_routes_resolve_to_one_endpoint_and_parameters_do_not() -> None:
    router = Router()

    async def handler(request: Request) -> Response:
        return Response.text(request.params.get("opt", "static"))

    router.add("POST", "/pub", handler)
    router.add("GET", "/config/:opt", handler)
    first = router.resolve("POST", "/pub")
    assert router.resolve("POST", "/pub") is first
    assert router.resolve("GET", "/config/a").params == {"opt": "a"}
    assert router.resolve("GET", "/config/b").params == {"opt": "b"}
    assert router.resolve("GET", "/pub").too_large.status == 405  # not the cached POST route
    router.add("GET", "/pub", handler)  # a new route is found after a resolve
    assert router.resolve("GET", "/pub").too_large.status == 413
    assert router.resolve("GET", "/pub") is not first
