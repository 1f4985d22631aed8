"""The differential test's table: edge-case inputs for nsqd and nsqlookupd, and the allow-list.

TCP cases are nsqd's whole V2 error table (:mod:`tests.nsqd.test_errors`:
IDENTIFY ranges, names, PUB/MPUB/DPUB/RDY/FIN/REQ/TOUCH/AUTH edges) and a few
successes; HTTP cases are routes with bad parameters, path cleaning, the
``X-NSQ-Content-Type`` rules, requests Go's net/http refuses, and
``/config``. Replies are compared as :mod:`tests.compat.differential` reduces
them.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

from tests.compat.differential import Reply, Server, body, http_reply, request, tcp_reply
from tests.nsqd.test_errors import CASES as ERROR_CASES
from tests.nsqd.test_errors import SETUPS


@dataclass(frozen=True)
class Case:
    """One input: TCP (setup steps, a command, how many frames it answers) or HTTP requests."""

    id: str
    server: str = "nsqd"  # or "nsqlookupd"
    steps: tuple[bytes, ...] = ()
    command: bytes = b""
    frames: int = 1
    requests: tuple[bytes, ...] = field(default=())


def run_case(case: Case, servers: Mapping[str, Server]) -> Reply:
    """``case``'s reply from the matching server in ``servers``."""
    server = servers[case.server]
    if case.requests:
        return http_reply(server, case.requests)
    return tcp_reply(server, case.steps, case.command, case.frames)


def _identify(fields: dict[str, object]) -> bytes:
    return b"IDENTIFY\n" + body(json.dumps(fields).encode())


def _mpub(*bodies: bytes) -> bytes:
    data = len(bodies).to_bytes(4, "big") + b"".join(body(b) for b in bodies)
    return body(data)


_TCP: list[Case] = [
    Case(f"tcp-{id_}", steps=tuple(SETUPS[setup]), command=command)
    for id_, setup, command, *_ in ERROR_CASES
]
_TCP += [
    Case("tcp-identify-features", command=_identify({"feature_negotiation": True})),
    Case(
        "tcp-identify-ranges-ok",
        command=_identify(
            {
                "feature_negotiation": True,
                "heartbeat_interval": 1000,
                "output_buffer_size": 64,
                "output_buffer_timeout": 1000,
                "sample_rate": 99,
                "msg_timeout": 1000,
                "user_agent": "diff/1.0",
            }
        ),
    ),
    Case("tcp-identify-unknown-field", command=_identify({"nope": 1})),
    Case("tcp-identify-not-object", command=b"IDENTIFY\n" + body(b"[1]")),
    Case("tcp-pub-ok", command=b"PUB diff_pub\n" + body(b"x")),
    Case("tcp-pub-max", command=b"PUB diff_pub\n" + body(b"m" * 1024)),
    Case("tcp-pub-topic-64", command=b"PUB " + b"t" * 64 + b"\n" + body(b"x")),
    Case("tcp-pub-ephemeral", command=b"PUB diff#ephemeral\n" + body(b"x")),
    Case(  # pipelined: one run of three, then one too big (the generic way: its error)
        "tcp-pub-run-then-too-big",
        command=b"".join(b"PUB diff_pub\n" + body(b) for b in (b"a", b"b", b"c", b"m" * 1025)),
        frames=4,
    ),
    Case(  # pipelined, the same topic spelt with a CR, and a bad one last
        "tcp-pub-run-crlf-then-bad-topic",
        command=b"PUB diff_pub\n"
        + body(b"a")
        + b"PUB diff_pub\r\n"
        + body(b"b")
        + b"PUB diff_pub\n"
        + body(b"c")
        + b"PUB a*b\n"
        + body(b"d"),
        frames=4,
    ),
    Case("tcp-mpub-ok", command=b"MPUB diff_pub\n" + _mpub(b"a", b"b")),
    Case("tcp-mpub-extra-bytes", command=b"MPUB diff_pub\n" + body(_mpub(b"a")[4:] + b"zz")),
    Case("tcp-dpub-ok", command=b"DPUB diff_pub 10\n" + body(b"x")),
    Case("tcp-dpub-max", command=b"DPUB diff_pub 3600000\n" + body(b"x")),
    Case("tcp-dpub-negative", command=b"DPUB diff_pub -1\n" + body(b"x")),
    Case("tcp-rdy-max", steps=(b"SUB diff_sub c\n",), command=b"RDY 2500\n", frames=0),
    Case("tcp-rdy-0", steps=(b"SUB diff_sub c\n",), command=b"RDY 0\n", frames=0),
    Case("tcp-rdy-none", steps=(b"SUB diff_sub c\n",), command=b"RDY\n", frames=0),
    Case("tcp-nop", command=b"NOP\n", frames=0),
    Case("tcp-cls", steps=(b"SUB diff_sub c\n",), command=b"CLS\n"),
    Case("tcp-sub-ephemeral", command=b"SUB diff_sub c#ephemeral\n"),
    Case("tcp-sub-channel-long", command=b"SUB diff_sub " + b"c" * 65 + b"\n"),
    Case("tcp-req-negative", steps=(b"SUB diff_sub c\n",), command=b"REQ " + b"0" * 16 + b" -1\n"),
    Case("tcp-req-too-long", steps=(b"SUB diff_sub c\n",), command=b"REQ " + b"0" * 16 + b" 9e9\n"),
    Case("tcp-touch-bad-id", steps=(b"SUB diff_sub c\n",), command=b"TOUCH 12\n"),
    Case("tcp-lowercase", command=b"pub diff_pub\n"),
    Case("tcp-crlf", command=b"NOP\r\n", frames=0),
    Case("tcp-line-too-long", command=b"X" * (16 * 1024 + 1), frames=0),
]

_CLOSE = b"Connection: close\r\n\r\n"


def _get(target: str) -> tuple[bytes, ...]:
    return (request("GET", target),)


def _post(target: str, data: bytes = b"") -> tuple[bytes, ...]:
    return (request("POST", target, data),)


def _put_config(opt: str, *bodies: bytes) -> tuple[bytes, ...]:
    out: list[bytes] = []
    for data in bodies:
        out += [request("PUT", f"/config/{opt}", data), request("GET", f"/config/{opt}")]
    return tuple(out)


_NSQD_HTTP: list[Case] = [
    Case(f"http-{id_}", requests=requests)
    for id_, requests in [
        # item 6: /config
        (
            "config-lookupd-null-and-utf8",
            _put_config("nsqlookupd_tcp_addresses", b"null", b'["a\xffb:1"]', b"[]"),
        ),
        ("config-lookupd-not-list", _put_config("nsqlookupd_tcp_addresses", b'"a"', b"{")),
        ("config-lookupd-empty-body", (request("PUT", "/config/nsqlookupd_tcp_addresses"),)),
        ("config-log-level", _put_config("log_level", b"WARN", b"nope", b"info")),
        ("config-unknown", (*_get("/config/nope"), request("PUT", "/config/nope", b"x"))),
        ("config-read-only", (request("PUT", "/config/msg_timeout", b"1"),)),
        ("config-statsd-prefix", _get("/config/statsd_prefix")),
        ("config-max-msg-size", _get("/config/max_msg_size")),
        ("config-too-big", (request("PUT", "/config/log_level", b"x" * 1025),)),
        # item 7: paths, headers, protocol versions
        ("ping", _get("/ping")),
        ("ping-upper", _get("/PING")),
        ("ping-double-slash", _get("//ping")),
        ("ping-dot", _get("/./ping")),
        ("ping-dotdot", _get("/a/../ping")),
        ("ping-trailing-slash", _get("/ping/")),
        ("ping-upper-trailing-slash", _get("/PING/")),
        ("ping-empty-query", _get("/ping/?")),
        ("ping-query", _get("/ping?x=1")),
        ("ping-post", _post("/ping")),
        ("ping-post-trailing-slash", _post("/ping/")),
        ("ping-head", (request("HEAD", "/ping"),)),
        ("ping-options", (request("OPTIONS", "/ping"),)),
        ("ping-http2", (b"GET /ping HTTP/2.0\r\nHost: x\r\n" + _CLOSE,)),
        ("ping-http12", (b"GET /ping HTTP/1.2\r\nHost: x\r\n" + _CLOSE,)),
        ("ping-http10", (b"GET /ping HTTP/1.0\r\n\r\n",)),
        ("ping-no-host", (b"GET /ping HTTP/1.1\r\n" + _CLOSE,)),
        ("garbage", (b"GARBAGE\r\n\r\n",)),
        (
            "transfer-encoding-gzip",
            (request("POST", "/pub?topic=t", head=b"Transfer-Encoding: gzip\r\n"),),
        ),
        ("stats-upper-query", _get("/Stats?x=<a>&y")),
        ("stats-trailing-slash", _get("/stats/")),
        ("stats-post", _post("/stats")),
        ("config-upper", _get("/CONFIG/Max_Msg_Size")),
        ("config-empty-opt", _get("/config/")),
        ("pub-options", (request("OPTIONS", "/pub"),)),
        ("pub-upper-post", _post("/PUB?topic=diff_http", b"x")),
        ("pub-double-slash-post", _post("//pub?topic=diff_http", b"x")),
        ("config-upper-put", (request("PUT", "/CONFIG/log_level", b"info"),)),
        ("topic-create-get", _get("/topic/Create")),
        ("root", _get("/")),
        ("not-found", _get("/nope")),
        ("escaped-path", _get("/ping%20x/")),
        ("bad-query-escape", _post("/pub?topic=%zz", b"x")),
        ("bad-query-semicolon", _post("/pub?topic=diff_http;x", b"x")),
        # routes with bad parameters
        ("pub-no-topic", _post("/pub", b"x")),
        ("pub-bad-topic", _post("/pub?topic=a*b", b"x")),
        ("pub-empty-body", _post("/pub?topic=diff_http")),
        ("pub-ok", _post("/pub?topic=diff_http", b"x")),
        ("pub-max", _post("/pub?topic=diff_http", b"m" * 1024)),
        ("pub-too-big", _post("/pub?topic=diff_http", b"m" * 1025)),
        ("pub-defer-bad", _post("/pub?topic=diff_http&defer=x", b"x")),
        ("pub-defer-negative", _post("/pub?topic=diff_http&defer=-1", b"x")),
        ("pub-defer-range", _post("/pub?topic=diff_http&defer=3600001", b"x")),
        ("pub-defer-ok", _post("/pub?topic=diff_http&defer=10", b"x")),
        ("mpub-no-topic", _post("/mpub", b"x")),
        ("mpub-ok", _post("/mpub?topic=diff_http", b"a\nb\n")),
        ("mpub-empty-lines", _post("/mpub?topic=diff_http", b"\n\n")),
        ("mpub-line-too-big", _post("/mpub?topic=diff_http", b"m" * 1025)),
        ("mpub-too-big", _post("/mpub?topic=diff_http", b"m\n" * 2049)),
        ("mpub-binary-ok", _post("/mpub?topic=diff_http&binary=true", _mpub(b"a", b"b")[4:])),
        ("mpub-binary-short", _post("/mpub?topic=diff_http&binary=true", b"\x00\x00\x00\x02")),
        ("mpub-binary-count-0", _post("/mpub?topic=diff_http&binary=true", bytes(4))),
        ("topic-create-no-topic", _post("/topic/create")),
        ("topic-create-bad", _post("/topic/create?topic=a*b")),
        ("topic-create-ok", _post("/topic/create?topic=diff_http2")),
        ("topic-delete-missing", _post("/topic/delete?topic=diff_nope")),
        ("topic-empty-missing", _post("/topic/empty?topic=diff_nope")),
        ("topic-pause-missing", _post("/topic/pause?topic=diff_nope")),
        ("topic-unpause-bad", _post("/topic/unpause?topic=a*b")),
        ("channel-create-no-channel", _post("/channel/create?topic=diff_http")),
        ("channel-create-bad", _post("/channel/create?topic=diff_http&channel=c!")),
        ("channel-delete-missing", _post("/channel/delete?topic=diff_http&channel=nope")),
        ("channel-pause-no-topic", _post("/channel/pause?topic=diff_nope&channel=c")),
        # kept on purpose (see ALLOWED)
        ("put-legacy", _post("/put?topic=diff_http", b"x")),
        ("debug", _get("/debug")),
        ("debug-pprof", _get("/debug/pprof")),
    ]
]

_LOOKUPD_HTTP: list[Case] = [
    Case(f"lookupd-{id_}", server="nsqlookupd", requests=requests)
    for id_, requests in [
        ("ping", _get("/ping")),
        ("ping-upper", _get("/PING")),
        ("ping-trailing-slash", _get("/ping/")),
        ("ping-options", (request("OPTIONS", "/ping"),)),
        ("ping-http2", (b"GET /ping HTTP/2.0\r\nHost: x\r\n" + _CLOSE,)),
        ("lookup-no-topic", _get("/lookup")),
        ("lookup-bad-topic", _get("/lookup?topic=a*b")),
        ("lookup-missing", _get("/lookup?topic=diff_nope")),
        ("lookup-bad-escape", _get("/lookup?topic=%zz")),
        ("topics", _get("/topics")),
        ("topics-upper-slash", _get("/Topics/")),
        ("topics-delete", (request("DELETE", "/topics"),)),
        ("channels-missing", _get("/channels?topic=diff_nope")),
        ("nodes", _get("/nodes")),
        ("topic-create-bad", _post("/topic/create?topic=a*b")),
        ("topic-create-none", _post("/topic/create")),
        ("channel-create-no-channel", _post("/channel/create?topic=t")),
        ("topic-tombstone-no-node", _post("/topic/tombstone?topic=t")),
        ("topic-delete-missing", _post("/topic/delete?topic=diff_nope")),
        ("not-found", _get("/nope")),
        # an invalid name, so nsqbox's answer changes no state the other cases see
        ("topic-create-get", _get("/topic/create?topic=a*b")),
        ("tombstone-alias", _post("/tombstone_topic_producer?topic=t")),
    ]
]

CASES: Final = [*_TCP, *_NSQD_HTTP, *_LOOKUPD_HTTP]

#: Cases where nsqbox answers otherwise on purpose: why (the README's "Differences from
#: nsqd"), and the status line nsqbox answers with instead of nsqd's reply.
ALLOWED: Final[dict[str, tuple[str, str]]] = {
    "http-put-legacy": (
        "/put, which nsqd dropped in 1.0, is kept for old scripts",
        "HTTP/1.1 200 OK",
    ),
    "http-debug": (
        "/debug is nsqbox's own JSON snapshot (nsqd has only /debug/pprof/...)",
        "HTTP/1.1 200 OK",
    ),
    "http-debug-pprof": ("no Go profiler: nsqbox has no /debug/pprof", "HTTP/1.1 404 Not Found"),
    "http-ping-http10": (
        "an HTTP/1.0 request is answered as HTTP/1.1 with Connection: close (h11), not as"
        " HTTP/1.0; both mean the same to a client",
        "HTTP/1.1 200 OK",
    ),
}
