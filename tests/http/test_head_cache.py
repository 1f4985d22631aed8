"""The fast path is a cache in front of h11: what it answers, h11 answered the same way.

h11 parses a head the first time; a request with the same head bytes (its
Content-Length digits aside) is then dispatched without h11. Each case below is
sent, whole or cut, by itself and pipelined, with and without the cache, and the
server's bytes and the requests its handlers saw must be the same; the plain ones
must have been answered from the cache, the others by h11 alone.
"""

from __future__ import annotations

import h11
import pytest

from nsqbox.http import ServerConnection
from nsqbox.http.fastpath import MAX_REMEMBERED_HEAD, PlainHead
from nsqbox.http.protocol import MAX_HEADER_SIZE, NEED_DATA, Dispatch
from tests.http.test_fastpath import _converse, _router, _run, converse


def _post(body: bytes, *headers: bytes, version: bytes = b"HTTP/1.1") -> bytes:
    head = b"POST /pub?topic=t " + version + b"\r\nHost: h\r\n" + b"".join(headers)
    return head + b"Content-Length: %d\r\n\r\n" % len(body) + body


FOLDED = b"X-A: a\r\n b\r\n"
CHUNKED = b"POST /pub HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n0\r\n\r\n"
BIG_HEADER = b"X-Big: " + b"x" * (MAX_HEADER_SIZE + 10) + b"\r\n"
#: (case, answered from the cache the second time)
CASES = {
    "plain": ([_post(b"ab"), _post(b"ab")], True),
    "other-length": ([_post(b"ab"), _post(b"abc"), _post(b"")], True),
    "padded-digits": ([b"GET /ping HTTP/1.1\r\nHost: h\r\ncontent-length: 007 \r\n\r\n1234567"] * 2,
                      True),
    "obs-fold": ([_post(b"ab", FOLDED), _post(b"a", FOLDED)], True),
    "two-lengths": ([b"GET /ping HTTP/1.1\r\nHost: h\r\nContent-Length: 1\r\nContent-Length: 1"
                     b"\r\n\r\nx"] * 2, True),
    "keep-alive": ([_post(b"ab", b"Connection: keep-alive\r\n")] * 2, True),
    "chunked": ([CHUNKED, CHUNKED], False),
    "http-1.0": ([_post(b"ab", version=b"HTTP/1.0")] * 2, False),
    "http-1.0-keep-alive": ([_post(b"ab", b"Connection: keep-alive\r\n", version=b"HTTP/1.0")] * 2,
                            False),
    "expect-100": ([_post(b"ab", b"Expect: 100-continue\r\n")] * 2, False),
    "close": ([_post(b"ab", b"Connection: close\r\n")] * 2, False),
    "bare-lf": ([b"GET /ping HTTP/1.1\nHost: h\n\n"] * 2, False),
    "head": ([b"HEAD /ping HTTP/1.1\r\nHost: h\r\n\r\n"] * 2, False),
    "too-long-body": ([_post(b"ab"), _post(b"abcdefgh")], True),
    "oversized-head": ([_post(b"ab", BIG_HEADER)] * 2, False),
    "long-head": ([_post(b"ab", b"X-Long: " + b"x" * MAX_REMEMBERED_HEAD + b"\r\n")] * 2, False),
    "bad-after-good": ([_post(b"ab"), b"POST /pub?topic=t HTTP/1.1\r\nHost: h\r\nContent-Length: x"
                        b"\r\n\r\n"], True),
}  # fmt: skip


def _conversation(pieces: list[bytes], fast_path: bool) -> tuple[bytes, ServerConnection]:
    conn = ServerConnection(_router([]), remote_address="1.2.3.4:5", fast_path=fast_path)
    return _run(converse(conn, pieces)), conn


@pytest.mark.parametrize("name", list(CASES))
@pytest.mark.parametrize("how", ["one-by-one", "pipelined", "cut"])
def test_a_case_is_answered_the_same_with_and_without_the_cache(name: str, how: str) -> None:
    requests, cached = CASES[name]
    stream = b"".join(requests)
    if how == "one-by-one":
        cuts = [sum(map(len, requests[:i])) for i in range(1, len(requests))]
    elif how == "pipelined":
        cuts = []
    else:  # each request cut in its head
        cuts = sorted({sum(map(len, requests[:i])) + 10 for i in range(len(requests))})
    assert _converse(True, stream, cuts) == _converse(False, stream, cuts)
    if how == "one-by-one":
        _, conn = _conversation(requests, True)
        assert (conn._plain is not None) is cached


def test_a_repeated_head_is_dispatched_without_h11() -> None:
    conn = ServerConnection(_router([]), fast_path=True)
    seen = []
    for body in (b"ab", b"abc"):
        conn.receive_data(_post(body))
        event = conn.next_event()
        assert isinstance(event, Dispatch)
        seen.append(event.request)
        conn.respond(_run(event.endpoint.respond(event.request)))
        assert conn.next_event() is NEED_DATA
    assert conn._h11.their_state is h11.IDLE  # h11 saw only the first request, long done
    assert seen[1].body == b"abc"
    assert (b"content-length", b"3") in seen[1].headers
    assert seen[1].headers[:1] == seen[0].headers[:1] == ((b"host", b"h"),)


def test_a_plain_head_takes_other_digits_only_in_its_content_length() -> None:
    raw = _post(b"ab", b"X-N: 2\r\n")
    conn = h11.Connection(h11.SERVER)
    conn.receive_data(raw)
    event = conn.next_event()
    assert isinstance(event, h11.Request)
    head = PlainHead.of(event, raw)
    assert head is not None
    assert head.match(raw) == (len(raw) - 2, len(raw), head.headers)
    assert head.match(_post(b"abc", b"X-N: 2\r\n")) is not None
    assert head.match(_post(b"ab", b"X-N: 3\r\n")) is None  # another header's digits
    assert head.match(raw[:-1]) is None  # the body is not all there
    longer = raw.replace(b"Length: 2", b"Length: " + b"9" * 19)
    assert head.match(longer) is None  # more digits than the cache reads: h11 decides
