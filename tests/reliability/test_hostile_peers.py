"""Peers that send what no well-behaved peer would, and what the servers do about it.

Regression tests for issue "Hardening" cases 1 to 3: an AUTH secret that is not
UTF-8, an IDENTIFY body nested deeper than Python's recursion limit, and a
lookupd whose IDENTIFY reply is such a document. Each runs real servers on
127.0.0.1 and asserts the reply, that the connection ends where nsqd's would,
and that a bystander is still served. JSON is judged as Go's encoding/json
judges it: nesting up to 10,000 levels is valid JSON.
"""

from __future__ import annotations

import json
import logging
import re
import resource
import socket
import struct
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
import trio

from nsqbox.http import Request, Response, Router, serve_http
from nsqbox.nsqd.routes import tap
from nsqbox.nsqd.tcp.connection import COMMANDS_PER_TURN
from nsqbox.wire import commands
from nsqbox.wire.lookupd import MAGIC_V1, encode_register, encode_response
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn, eventually, publish, wait_until
from tests.lookupd.lookupd_helpers import open_lookupd, open_v1
from tests.nsqd.test_auth import authed
from tests.reliability.blocking import wait_for

GRANT_ALL = (
    b'{"ttl":60,"authorizations":'
    b'[{"topic":".*","channels":[".*"],"permissions":["subscribe","publish"]}]}'
)


async def auth_server(nursery: trio.Nursery, reply: bytes, queries: list[str] | None = None) -> str:
    """An auth server that answers every query with ``reply``; its address."""

    async def auth(request: Request) -> Response:
        if queries is not None:
            queries.append(request.raw_query)
        return Response(200, reply, (("Content-Type", "application/json"),))

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    router = Router()
    router.add("GET", "/auth", auth)
    await nursery.start(serve_http, router, listeners)
    return f"127.0.0.1:{listeners[0].socket.getsockname()[1]}"


def deep(levels: int, inner: bytes = b"") -> bytes:
    """``levels`` nested arrays around ``inner``."""
    return b"[" * levels + inner + b"]" * levels


# -- 1. AUTH with a secret that is not UTF-8 ----------------------------------------------------


async def test_auth_secret_that_is_not_utf8_is_percent_encoded_byte_for_byte(
    start_nsqd: StartNSQD, nursery: trio.Nursery
) -> None:
    queries: list[str] = []
    nsqd = await start_nsqd(auth_http_addresses=[await auth_server(nursery, GRANT_ALL, queries)])

    watcher = await authed(nsqd.tcp, b"fine")
    await watcher.sub("bystander", "ch", rdy=5)

    client = await RawConn.open(nsqd.tcp)
    await client.identify()
    await client.send(commands.auth(b"\xff\xfe\xfd"))
    assert b'"permission_count":1' in await client.response()
    await client.send(commands.pub("bystander", b"from the odd secret"))
    assert await client.response() == b"OK"
    assert (await watcher.message()).body == b"from the odd secret"
    # Go's url.Values.Encode: sorted keys, every byte of the secret percent-encoded
    assert queries[-1] == "common_name=&remote_ip=127.0.0.1&secret=%FF%FE%FD&tls=false"
    await client.aclose()
    await watcher.aclose()


# -- 2. a deep IDENTIFY body at nsqlookupd and at nsqd --------------------------------------------


def lookupd_identify(extra: bytes) -> bytes:
    body = (
        b'{"broadcast_address":"127.0.0.1","hostname":"h","tcp_port":4150,'
        b'"http_port":4151,"version":"1.3.0"' + extra + b"}"
    )
    return b"IDENTIFY\n" + struct.pack(">i", len(body)) + body


@pytest.mark.parametrize(
    ("body", "reply"),
    [
        pytest.param(
            b'{"x":' + deep(1000) + b"}", b"E_BAD_BODY IDENTIFY missing fields", id="1000-deep"
        ),
        pytest.param(
            b'{"x":' + deep(10_001) + b"}",
            b"E_BAD_BODY IDENTIFY failed to decode JSON body",
            id="deeper-than-go",
        ),
        pytest.param(
            b'{"x":' + deep(5000, b"1,") + b"}",
            b"E_BAD_BODY IDENTIFY failed to decode JSON body",
            id="deep-and-invalid",
        ),
    ],
)
async def test_lookupd_answers_a_deep_identify_with_bad_body(body: bytes, reply: bytes) -> None:
    async with open_lookupd() as lookupd, open_v1(lookupd) as healthy:
        await healthy.identify(http_port=1)
        async with open_v1(lookupd) as hostile:
            await hostile.send(b"IDENTIFY\n" + struct.pack(">i", len(body)) + body)
            assert await hostile.read_to_eof() == encode_response(reply)
        assert await healthy.command(encode_register("still", "here")) == b"OK"
        assert (await lookupd.get("/lookup", topic="still"))["channels"] == ["here"]


async def test_lookupd_accepts_a_complete_identify_with_a_deep_unknown_field() -> None:
    # Go ignores unknown fields however deep (up to its limit); so does nsqbox
    async with open_lookupd() as lookupd, open_v1(lookupd) as peer:
        await peer.send(lookupd_identify(b',"x":' + deep(3000, b'{"a":[1,2,"\xff"]}')))
        assert (await peer.response()).startswith(b"{")
        assert await peer.command(encode_register("deep")) == b"OK"
        producers = (await lookupd.get("/lookup", topic="deep"))["producers"]
        assert [p["tcp_port"] for p in producers] == [4150]


@pytest.mark.parametrize(
    ("body", "expect_ok"),
    [
        pytest.param(b'{"x":' + deep(2000) + b"}", True, id="2000-deep-unknown-field"),
        pytest.param(b'{"heartbeat_interval":' + deep(2000) + b"}", False, id="deep-known-field"),
        pytest.param(b'{"x":' + deep(10_001) + b"}", False, id="deeper-than-go"),
    ],
)
async def test_nsqd_identify_with_deep_json(
    start_nsqd: StartNSQD, body: bytes, expect_ok: bool
) -> None:
    nsqd = await start_nsqd()
    watcher = await RawConn.open(nsqd.tcp)
    await watcher.sub("bystander", "ch", rdy=5)
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(b"IDENTIFY\n" + struct.pack(">i", len(body)) + body)
    if expect_ok:
        assert await conn.response() == b"OK"
    else:
        assert await conn.error() == b"E_BAD_BODY IDENTIFY failed to decode JSON body"
        await conn.expect_closed()
    await conn.aclose()
    await publish(nsqd.tcp, "bystander", b"alive")
    assert (await watcher.message()).body == b"alive"
    await watcher.aclose()


# -- 3. a lookupd that answers IDENTIFY with a hostile document -----------------------------------


@pytest.mark.parametrize(
    "reply",
    [
        pytest.param(b'{"x":' + deep(10_001) + b"}", id="deeper-than-go"),
        pytest.param(b'{"tcp_port":' + deep(1000) + b"}", id="deep-known-field"),
        pytest.param(b'{"tcp_port":1e999}', id="huge-number"),
        pytest.param(b"\xff\xfe not json", id="garbage"),
    ],
)
async def test_nsqd_outlives_a_lookupd_with_a_hostile_identify_reply(
    start_nsqd: StartNSQD,
    nursery: trio.Nursery,
    caplog: pytest.LogCaptureFixture,
    reply: bytes,
) -> None:
    connections: list[bytes] = []

    async def hostile_lookupd(stream: trio.SocketStream) -> None:
        async with stream:
            received = b""
            with trio.move_on_after(TIMEOUT):
                while not received.startswith(MAGIC_V1 + b"IDENTIFY\n") or len(received) < 17:
                    chunk = await stream.receive_some()
                    if not chunk:
                        return
                    received += chunk
            connections.append(received)
            await stream.send_all(encode_response(reply))
            with trio.move_on_after(TIMEOUT):
                while await stream.receive_some():
                    pass

    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    await nursery.start(trio.serve_listeners, hostile_lookupd, listeners)
    nsqd = await start_nsqd(lookupd_tcp_addresses=[f"127.0.0.1:{port}"])

    await wait_until(lambda: len(connections) >= 1)
    consumer = await RawConn.open(nsqd.tcp)
    await consumer.sub("served", "ch", rdy=5)  # a new topic: nsqd dials the lookupd again
    await publish(nsqd.tcp, "served", b"despite the lookupd")
    assert (await consumer.message()).body == b"despite the lookupd"
    await wait_until(lambda: len(connections) >= 2)
    assert all(c.startswith(MAGIC_V1 + b"IDENTIFY\n") for c in connections)
    refusals = [
        r
        for r in caplog.records
        if r.name == "nsqbox.nsqd.lookup" and r.levelno == logging.ERROR and "LOOKUPD(" in r.msg
    ]
    assert refusals, "each refused session is logged"
    assert all(r.exc_info is None for r in refusals), "one line each, no traceback"
    await consumer.aclose()


async def test_lookupd_forgets_a_producer_that_resets_its_connection() -> None:
    # a reset (not a FIN) used to skip the cleanup: the producer stayed registered forever
    async with open_lookupd() as lookupd:
        async with open_v1(lookupd) as peer:
            await peer.send(lookupd_identify(b""))
            assert (await peer.response()).startswith(b"{")
            assert await peer.command(encode_register("reset", "ch")) == b"OK"
            assert len((await lookupd.get("/lookup", topic="reset"))["producers"]) == 1
            linger = struct.pack("ii", 1, 0)  # close with RST
            peer.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, linger)

        async def forgotten() -> bool:
            return not (await lookupd.get("/lookup", topic="reset"))["producers"]

        await eventually(forgotten)


# -- auth patterns: RE2, as nsqd's Go regexp -------------------------------------------------------


@pytest.mark.parametrize(
    ("pattern", "topic", "reply"),
    [
        # nested quantifiers: Python's re backtracks 2^40 steps here; RE2 is linear
        pytest.param("^(a+)+$", "a" * 40 + "_", b"E_UNAUTHORIZED", id="backtracking-bomb"),
        pytest.param("^(a+)+$", "a" * 40, b"OK", id="matches"),
        # a lookahead is not RE2 (nor Go): the reply is refused, as nsqd refuses it
        pytest.param("^(?=a)a$", "a", b"E_AUTH_FAILED", id="not-re2-syntax"),
    ],
)
async def test_auth_patterns_are_re2(
    start_nsqd: StartNSQD, nursery: trio.Nursery, pattern: str, topic: str, reply: bytes
) -> None:
    grant = (
        '{"ttl":60,"authorizations":[{"topic":'
        + json.dumps(pattern)
        + ',"channels":[".*"],"permissions":["publish"]}]}'
    ).encode()

    nsqd = await start_nsqd(auth_http_addresses=[await auth_server(nursery, grant)])
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify()
    await conn.send(commands.auth(b"s"))
    _, data = await conn.read_frame()
    if reply == b"E_AUTH_FAILED":
        assert data == b"E_AUTH_FAILED AUTH failed"
        await conn.aclose()
        return
    assert b'"permission_count":1' in data
    with trio.fail_after(TIMEOUT):  # a guard: a backtracking engine would hold the loop for hours
        await conn.send(commands.pub(topic, b"x"))
        _, data = await conn.read_frame()
    assert data.split(b" ")[0] == reply
    await conn.aclose()


# -- nsqbox's own tap routes -----------------------------------------------------------------------


async def test_no_nsqbox_routes_with_auth(start_nsqd: StartNSQD, nursery: trio.Nursery) -> None:
    # tap and peek would let a client without a secret read what authorized clients
    # publish, and faults would let it break their publishes: none exists with auth
    nsqd = await start_nsqd(auth_http_addresses=[await auth_server(nursery, GRANT_ALL)])
    assert nsqd.http is not None
    async with httpx.AsyncClient(base_url="http://{}:{}".format(*nsqd.http)) as http:
        opened = await http.post("/nsqbox/tap/open", params={"topic": "secret"})
        assert opened.status_code == 404
        peeked = await http.get("/nsqbox/peek", params={"topic": "secret"})
        assert peeked.status_code == 404
        for method, path in [
            ("GET", "/nsqbox/faults"),
            ("POST", "/nsqbox/faults/fail_publishes"),
            ("POST", "/nsqbox/faults/drop_connections"),
            ("POST", "/nsqbox/faults/latency"),
            ("POST", "/nsqbox/faults/stall"),
            ("DELETE", "/nsqbox/faults"),
        ]:
            assert (await http.request(method, path)).status_code == 404, path


async def test_taps_are_bounded(start_nsqd: StartNSQD, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tap, "MAX_BYTES", 10_000)
    nsqd = await start_nsqd()
    assert nsqd.http is not None
    async with httpx.AsyncClient(base_url="http://{}:{}".format(*nsqd.http)) as http:
        ids = []
        for _ in range(tap.MAX_TAPS):
            opened = await http.post("/nsqbox/tap/open", params={"topic": "t"})
            ids.append(opened.json()["id"])
        refused = await http.post("/nsqbox/tap/open", params={"topic": "t"})
        assert (refused.status_code, refused.json()) == (503, {"message": "TOO_MANY_TAPS"})
        # 64 taps share 10,000 bytes: the 1,000-byte publishes fill it, then taps overflow
        for _ in range(3):
            assert (
                await http.post("/pub", params={"topic": "t"}, content=b"x" * 1000)
            ).text == "OK"
        docs = [(await http.get("/nsqbox/tap/read", params={"id": i})).json() for i in ids]
        recorded = sum(len(doc["messages"]) for doc in docs)
        publisher = docs[0]["messages"][0]["publisher"]  # its fields count too
        assert publisher["protocol"] == "http"
        extra = sum(len(k) + len(v) for k, v in publisher.items())
        assert recorded == 10_000 // (1000 + tap._RECORD_COST + extra)
        assert all(doc["overflow"] for doc in docs[recorded:])
        # the publishes themselves were never refused
        stats = (await http.get("/stats", params={"format": "json", "topic": "t"})).json()
        assert stats["topics"][0]["message_count"] == 3
        for tap_id in ids:
            await http.post("/nsqbox/tap/close", params={"id": tap_id})
        reopened = await http.post("/nsqbox/tap/open", params={"topic": "t"})
        assert reopened.status_code == 200


# -- one client's flood of tiny commands -----------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "flood"),
    [(b"NOP\n", 200_000), (commands.pub("t", b"x"), 200_000)],  # PUBs: runs of 512 each
    ids=["nop", "pub-runs"],
)
async def test_a_flood_of_tiny_commands_yields_to_others(
    start_nsqd: StartNSQD, command: bytes, flood: int
) -> None:
    # the commands arrive in a few large chunks; each is executed synchronously, so
    # without a turn limit the server ran none of its other tasks for a whole chunk
    nsqd = await start_nsqd()
    ticks = 0
    done = trio.Event()

    async def ticker() -> None:
        nonlocal ticks
        while not done.is_set():
            ticks += 1
            await trio.lowlevel.checkpoint()

    answers = flood if command.startswith(b"PUB") else 0
    async with trio.open_nursery() as nursery:
        conn = await RawConn.open(nsqd.tcp)
        nursery.start_soon(ticker)
        # sent while the answers are read: 200,000 OKs fill the socket buffers
        nursery.start_soon(conn.send, command * flood + commands.pub("after.flood", b"x"))
        for _ in range(answers + 1):
            assert await conn.response() == b"OK"
        done.set()
    await conn.aclose()
    assert ticks >= flood // COMMANDS_PER_TURN, ticks  # a turn at least per so many


# -- out of file descriptors ---------------------------------------------------------------------


def test_out_of_file_descriptors_logs_one_line_per_retry_and_recovers(tmp_path: Path) -> None:
    # trio's serve_listeners logged a traceback every 0.1 s while accept() failed
    def few_files() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (80, 80))

    log_path = tmp_path / "nsqd.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [sys.executable, "-m", "nsqbox", "nsqd", "--tcp-address=127.0.0.1:0",
             "--http-address=127.0.0.1:0", f"--data-path={tmp_path}"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log,
            preexec_fn=few_files,
        )  # fmt: skip
    try:

        def listening() -> bool:
            assert proc.poll() is None, log_path.read_text()
            return "TCP: listening on" in log_path.read_text()

        wait_for(listening, timeout=TIMEOUT * 3)
        tcp = re.findall(r"TCP: listening on 127\.0\.0\.1:(\d+)", log_path.read_text())[0]
        held = [socket.create_connection(("127.0.0.1", int(tcp)), timeout=5) for _ in range(120)]
        wait_for(lambda: "accept failed" in log_path.read_text(), timeout=TIMEOUT)
        for sock in held:
            sock.close()
        with socket.create_connection(("127.0.0.1", int(tcp)), timeout=TIMEOUT) as sock:
            sock.sendall(b"  V2" + commands.pub("after.emfile", b"x"))
            sock.settimeout(TIMEOUT)
            reply = b""
            while len(reply) < 10:
                reply += sock.recv(64)
        assert reply == b"\x00\x00\x00\x06\x00\x00\x00\x00OK"
    finally:
        proc.terminate()
        proc.wait(TIMEOUT)
    log = log_path.read_text()
    assert "Traceback" not in log, log
    accept_lines = [line for line in log.splitlines() if "accept failed" in line]
    assert accept_lines, log  # one line per retry, each naming the errno
    assert all("Too many open files" in line for line in accept_lines), accept_lines
