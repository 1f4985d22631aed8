"""Random HTTP requests against every nsqd and nsqlookupd route, and damaged raw HTTP.

Every answer must be one the real server gives for that route (status and
``{"message": ...}``), carry NSQ's content-type header, and come back in time;
the server must survive everything, keep the canary's messages flowing, and
never hold a topic or channel whose name it should have refused.
"""

from __future__ import annotations

import re
import socket
from collections import Counter
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote

import httpx
from hypothesis import given
from hypothesis import strategies as st

from nsqbox.nsqd.config import NSQD_OPTION_FLAGS
from nsqbox.wire import lookupd as v1
from nsqbox.wire.names import is_valid_channel_name, is_valid_topic_name
from tests.reliability import figures
from tests.reliability.blocking import IO_TIMEOUT, exchange
from tests.reliability.canary import Canary
from tests.reliability.figures import (
    HTTP_EXAMPLES,
    LOOKUPD_TCP_EXAMPLES,
    PUB_EXAMPLES,
    RAW_HTTP_EXAMPLES,
    reliability_settings,
)
from tests.reliability.http_tables import (
    FUZZED_LOOKUPD_ROUTES,
    FUZZED_NSQD_ROUTES,
    Answer,
    Limits,
    allowed,
)
from tests.reliability.observe import FUZZ_FLAGS, MAX_BODY, MAX_MSG, invalid_names
from tests.reliability.process import LookupdProcess, NSQDProcess, ServerProcess
from tests.reliability.strategies import CANARY, VALID_NAMES, mutated, names, v1_streams

NSQD_LIMITS: Limits = {
    ("POST", "/pub"): (MAX_MSG, (413, "MSG_TOO_BIG")),
    ("POST", "/put"): (MAX_MSG, (413, "MSG_TOO_BIG")),
    ("PUT", "/config/:opt"): (MAX_MSG, (413, "INVALID_VALUE")),
}
LOOKUPD_BODY_LIMIT = 64 * 1024
METHODS = ["GET", "POST", "PUT", "DELETE", "HEAD", "OPTIONS", "PATCH"]
CONFIG_KEYS = [flag.config_key for flag in NSQD_OPTION_FLAGS]
#: Never let the fuzzer point nsqd at real hosts.
LOOKUPD_ADDRESSES_PATH = "/config/nsqlookupd_tcp_addresses"
SAFE_LOOKUPD_BODIES = [b'["127.0.0.1:1"]', b"[]", b"null", b'["nohost"]', b"[1]", b"{", b""]


def _paths(routes: dict[tuple[str, str], frozenset[Answer]]) -> list[str]:
    out = sorted({p for _, p in routes if ":" not in p})
    out += [f"/config/{key}" for key in CONFIG_KEYS if ("GET", "/config/:opt") in routes]
    out += ["/", "/nope", "/pub/", "/stats/", "//ping", "/p%75b", "/topic", "/config/", "/a/b/c"]
    return out


def _numbers() -> st.SearchStrategy[str]:
    return st.one_of(
        st.integers(min_value=-1, max_value=3_600_001).map(str),
        st.integers(min_value=-(2**70), max_value=2**70).map(str),
        st.sampled_from(["", "x", "1.5", "+1", " 1", "0x10"]),
        st.sampled_from([19, 20, 309, 4300]).map(lambda n: "9" * n),
        st.just("9" * 4301),  # more digits than CPython's int() takes
    )


#: Values for each query parameter a route reads; other keys get any value.
_PARAM_VALUES: dict[str, st.SearchStrategy[str]] = {
    "topic": st.one_of(st.sampled_from(VALID_NAMES), names),
    "channel": st.one_of(st.sampled_from(VALID_NAMES), names),
    "defer": _numbers(),
    "binary": st.sampled_from(["true", "false", "1", "0", "x", ""]),
    "format": st.sampled_from(["json", "text", "", "xml"]),
    "include_clients": st.sampled_from(["true", "false", "x"]),
    "include_mem": st.sampled_from(["true", "false", "x"]),
    "node": st.sampled_from(["127.0.0.1:4151", "", "x", "canary:1"]),
}


@st.composite
def _query(draw: st.DrawFn) -> Query:
    query: Query = [
        (key, draw(values))
        for key, values in _PARAM_VALUES.items()
        if draw(st.integers(0, 3)) > (0 if key in ("topic", "channel", "defer") else 2)
    ]
    extra = st.tuples(st.text(max_size=6), st.one_of(names, _numbers()))
    query += draw(st.lists(extra, max_size=2))
    return draw(st.permutations(query))


Query = list[tuple[str, str | int | float | bool | None]]
Request = tuple[str, str, Query, bytes]


@st.composite
def requests(
    draw: st.DrawFn,
    routes: dict[tuple[str, str], frozenset[Answer]],
    only: list[tuple[str, str]] | None = None,
) -> Request:
    """``(method, path, query, body)``: usually a real route with its method, often not.

    With ``only``, always one of those routes (to dig deep into the publishing ones).
    """
    if only is not None:
        method, path = draw(st.sampled_from(only))
    elif draw(st.integers(0, 3)):
        method, path = draw(st.sampled_from(sorted(routes)))
        if ":" in path:
            option = draw(st.one_of(st.sampled_from(CONFIG_KEYS), st.text(max_size=8)))
            path = "/config/" + quote(option, safe="")
    else:
        method = draw(st.sampled_from(METHODS))
        path = draw(
            st.one_of(
                st.sampled_from(_paths(routes)),
                st.text(alphabet="/abcdefgimnoptu_.-%0123456789", max_size=20).map("/".__add__),
            )
        )
    query = draw(_query())
    body = draw(
        st.one_of(
            st.binary(min_size=1, max_size=64),
            st.just(b""),
            st.lists(st.binary(max_size=20), max_size=6).map(b"\n".join),
            st.sampled_from([MAX_MSG, MAX_MSG + 1, MAX_BODY, MAX_BODY + 1]).map(b"m".__mul__),
            st.lists(st.binary(min_size=1, max_size=30), min_size=1, max_size=5).flatmap(
                lambda bodies: mutated(_binary_mpub(bodies))
            ),
        )
    )
    return method, path, query, body


def _binary_mpub(bodies: list[bytes]) -> bytes:
    parts = [len(bodies).to_bytes(4, "big")]
    for body in bodies:
        parts += [len(body).to_bytes(4, "big"), body]
    return b"".join(parts)


def _answer(response: httpx.Response) -> Answer:
    if response.status_code < 400:
        return response.status_code, None
    if response.headers.get("Content-Type", "").startswith("text/plain"):  # /ping's NOK
        return response.status_code, response.text
    message = response.json()["message"]
    assert isinstance(message, str)
    return response.status_code, message


def check_response(
    response: httpx.Response, body: bytes, expected: frozenset[Answer], seen: Counter[str]
) -> None:
    if response.request.method == "HEAD":  # no body to read the message from
        expected = frozenset((status, None) for status, _ in expected)
        answer: Answer = (response.status_code, None)
    else:
        answer = _answer(response)
    seen[str(answer[0])] += 1
    assert answer in expected, (response.request.method, response.request.url, answer, expected)
    # nsqd's header is on V1 answers, not on redirects, OPTIONS or /ping (PlainText)
    plain = answer[0] in (301, 307) or (response.request.method, answer[0]) == ("OPTIONS", 200)
    plain = plain or (response.request.method, response.request.url.path) == ("GET", "/ping")
    if plain:
        assert "X-NSQ-Content-Type" not in response.headers
    else:
        assert response.headers["X-NSQ-Content-Type"] == "nsq; version=1.0"
    if answer == (200, None) and response.headers.get("Content-Type", "").startswith(
        "application/json"
    ):
        response.json()


def fuzz_http(
    server: ServerProcess,
    routes: dict[tuple[str, str], frozenset[Answer]],
    limits: Limits,
    default_limit: int,
    seen: Counter[str],
    *,
    only: list[tuple[str, str]] | None = None,
    examples: int = HTTP_EXAMPLES,
) -> int:
    """Send ``examples`` random requests (see :func:`requests`); the number sent."""
    sent = 0
    with httpx.Client(
        base_url=server.http_url, timeout=IO_TIMEOUT, follow_redirects=False
    ) as client:

        @reliability_settings(examples)
        @given(request=requests(routes, only), chunked=st.booleans())
        def case(request: Request, chunked: bool) -> None:
            nonlocal sent
            method, path, query, body = request
            if unquote(path).rstrip("/") == LOOKUPD_ADDRESSES_PATH and body not in (
                SAFE_LOOKUPD_BODIES
            ):
                body = b'["127.0.0.1:1"]'
            content: Any = iter([body[:5], body[5:]]) if chunked and body else body
            sent += 1
            try:
                response = client.request(method, path, params=query, content=content)
            finally:
                server.check_alive((method, path, query, body))
            raw_path = response.request.url.raw_path.decode("ascii").partition("?")[0]
            expected = allowed(routes, method, unquote(raw_path), len(body), limits, default_limit)
            check_response(response, body, expected, seen)

        case()
    return sent


@st.composite
def raw_requests(draw: st.DrawFn, paths: list[str]) -> bytes:
    """One to three HTTP/1.1 requests in a row, perhaps damaged, perhaps cut short."""
    out = []
    for _ in range(draw(st.integers(1, 3))):
        method = draw(st.sampled_from(["GET", "POST", *METHODS, "BREW", ""]))
        target = draw(
            st.one_of(
                st.sampled_from(paths),
                st.sampled_from(["/pub?topic=%zz", "/stats?a;b", "*", "http://x/ping", "/ping#x"]),
                st.sampled_from(paths).map(lambda p: p + "?topic=fuzz&channel=fuzz"),
            )
        )
        version = draw(st.sampled_from(["HTTP/1.1"] * 6 + ["HTTP/1.0", "HTTP/2", "HTTP/x"]))
        body = draw(st.binary(max_size=32))
        headers = [f"Host: fuzz\r\nContent-Length: {len(body)}"]
        headers += draw(
            st.lists(
                st.sampled_from(
                    [
                        "Transfer-Encoding: chunked",
                        "Content-Length: -1",
                        "Content-Length: 99999999999999999999999",
                        "Expect: 100-continue",
                        "Connection: close",
                        "X-Long: " + "x" * 70000,
                        "Bad Header: x",
                    ]
                ),
                max_size=2,
            )
        )
        head = f"{method} {target} {version}\r\n" + "\r\n".join(headers) + "\r\n\r\n"
        out.append(head.encode() + body)
    return draw(mutated(b"".join(out)))


_STATUS = re.compile(rb"(?:^|\r\n)HTTP/1\.1 ([0-9]{3}) ")
#: Statuses nsqbox's HTTP layer may answer malformed or unknown requests with
#: (Go's net/http answers 400, 405, 413, 431, 501 and 505 the same way).
RAW_STATUSES = {100, 200, 301, 307, 400, 404, 405, 413, 431, 501, 505}


def fuzz_raw_http(server: ServerProcess, paths: list[str], seen: Counter[str]) -> int:
    sent = 0

    @reliability_settings(RAW_HTTP_EXAMPLES)
    @given(data=raw_requests(paths))
    def case(data: bytes) -> None:
        nonlocal sent
        sent += 1
        try:
            received = exchange(server.http, data)
        finally:
            server.check_alive(data)
        statuses = [int(s) for s in _STATUS.findall(received)]
        assert received == b"" or received.startswith(b"HTTP/1.1 "), received[:200]
        for status in statuses:
            seen[f"raw {status}"] += 1
            assert status in RAW_STATUSES, (status, data[:300], received[:300])

    case()
    return sent


def test_nsqd_http_fuzz(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()
    with NSQDProcess(tmp_path / "nsqd", *FUZZ_FLAGS) as nsqd, Canary(nsqd.tcp) as canary:
        sent = fuzz_http(nsqd, FUZZED_NSQD_ROUTES, NSQD_LIMITS, MAX_BODY, seen)
        publishing = [("POST", "/pub"), ("POST", "/mpub")]
        sent += fuzz_http(
            nsqd,
            FUZZED_NSQD_ROUTES,
            NSQD_LIMITS,
            MAX_BODY,
            seen,
            only=publishing,
            examples=PUB_EXAMPLES,
        )
        raw = fuzz_raw_http(nsqd, _paths(FUZZED_NSQD_ROUTES), seen)
        report = canary.stop()
        assert report.missing == []
        assert report.duplicates == 0
        with httpx.Client(base_url=nsqd.http_url, timeout=IO_TIMEOUT) as client:
            assert invalid_names(client) == []
            assert client.get("/ping").text == "OK"
    figures.record(
        "http fuzz (nsqd): requests (max_examples)",
        f"{sent} ({HTTP_EXAMPLES} any route + {PUB_EXAMPLES} /pub, /mpub)",
    )
    figures.record("http fuzz (nsqd): raw requests (max_examples)", f"{raw} ({RAW_HTTP_EXAMPLES})")
    figures.record(
        "http fuzz (nsqd): statuses", ", ".join(f"{k}={v}" for k, v in sorted(seen.items()))
    )
    figures.record(
        "http fuzz (nsqd): canary messages sent/received", f"{report.sent}/{len(report.received)}"
    )


class V1Peer:
    """A blocking lookupd V1 connection, registered like an nsqd would be."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=IO_TIMEOUT)
        self.reader = v1.ResponseReader()

    def command(self, data: bytes) -> bytes:
        self.sock.sendall(data)
        while (reply := self.reader.next_response()) is v1.NEED_DATA:
            chunk = self.sock.recv(65536)
            assert chunk, "lookupd closed the connection"
            self.reader.receive_data(chunk)
        assert isinstance(reply, bytes)
        return reply

    def close(self) -> None:
        self.sock.close()


def test_lookupd_tcp_and_http_fuzz(tmp_path: Path) -> None:
    seen: Counter[str] = Counter()
    with LookupdProcess(tmp_path / "lookupd") as lookupd:
        peer = V1Peer(lookupd.tcp)
        try:
            identify = v1.encode_identify(
                broadcast_address="127.0.0.1",
                hostname="canary",
                tcp_port=4150,
                http_port=4151,
                version="1.3.0",
            )
            assert peer.command(v1.MAGIC_V1 + identify).startswith(b"{")
            assert peer.command(v1.encode_register(CANARY, CANARY)) == b"OK"
            tcp_sent = 0

            @reliability_settings(LOOKUPD_TCP_EXAMPLES)
            @given(stream=v1_streams())
            def case(stream: bytes) -> None:
                nonlocal tcp_sent
                tcp_sent += 1
                try:
                    received = exchange(lookupd.tcp, stream)
                finally:
                    lookupd.check_alive(stream)
                reader = v1.ResponseReader()
                reader.receive_data(received)
                while (reply := reader.next_response()) is not v1.NEED_DATA:
                    assert isinstance(reply, bytes)
                    seen["v1 " + (reply.split(b" ")[0][:20].decode("latin-1"))] += 1

            case()
            sent = fuzz_http(lookupd, FUZZED_LOOKUPD_ROUTES, {}, LOOKUPD_BODY_LIMIT, seen)
            raw = fuzz_raw_http(lookupd, _paths(FUZZED_LOOKUPD_ROUTES), seen)
            # the canary producer is still registered, with its channel
            assert peer.command(v1.encode_ping()) == b"OK"
            with httpx.Client(base_url=lookupd.http_url, timeout=IO_TIMEOUT) as client:
                found = client.get("/lookup", params={"topic": CANARY}).json()
                assert found["channels"] == [CANARY]
                assert [p["hostname"] for p in found["producers"]] == ["canary"]
                topics = client.get("/topics").json()["topics"]
                assert [t for t in topics if not is_valid_topic_name(t)] == []
                for topic in topics:
                    channels = client.get("/channels", params={"topic": topic}).json()
                    bad = [c for c in channels["channels"] if not is_valid_channel_name(c)]
                    assert bad == []
        finally:
            peer.close()
    figures.record(
        "lookupd fuzz: V1 streams (max_examples)", f"{tcp_sent} ({LOOKUPD_TCP_EXAMPLES})"
    )
    figures.record("lookupd fuzz: HTTP requests (max_examples)", f"{sent} ({HTTP_EXAMPLES})")
    figures.record("lookupd fuzz: raw HTTP requests (max_examples)", f"{raw} ({RAW_HTTP_EXAMPLES})")
    figures.record("lookupd fuzz: answers", ", ".join(f"{k}={v}" for k, v in sorted(seen.items())))
