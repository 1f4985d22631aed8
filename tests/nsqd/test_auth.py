"""AUTH against a real auth server (nsqbox's own HTTP layer on 127.0.0.1, port 0).

Covers nsqd's TestClientAuth cases and CheckAuth (nsqd/protocol_v2.go,
internal/auth): the query nsqd sends, success, denial by topic, channel and
permission, ttl expiry and the re-query, unreachable or broken auth servers.
Error frames are compared byte for byte.
"""

from __future__ import annotations

import json
import socket
import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from nsqbox.http import Request, Response, Router, serve_http
from nsqbox.wire import commands
from nsqbox.wire.frames import FrameType, encode_frame
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn
from tests.nsqd.transport import HOST, client_context, connect, make_certs, tls_options

GRANT_ALL = {"topic": ".*", "channels": [".*"], "permissions": ["subscribe", "publish"]}


@dataclass
class AuthServer:
    """An auth server whose answer the test sets; it records every query."""

    address: str
    reply: Any = field(default_factory=lambda: {"ttl": 60, "authorizations": [GRANT_ALL]})
    status: int = 200
    queries: list[dict[str, str]] = field(default_factory=list)
    methods: list[str] = field(default_factory=list)
    accept: list[str | None] = field(default_factory=list)

    async def handle(self, request: Request) -> Response:
        self.queries.append({k: v[0] for k, v in request.args().items()})
        self.methods.append(request.method)
        self.accept.append(request.header("Accept"))
        body = self.reply if isinstance(self.reply, bytes) else json.dumps(self.reply).encode()
        return Response(self.status, body, (("Content-Type", "application/json"),))


async def start_auth_server(nursery: trio.Nursery, path: str = "/auth") -> AuthServer:
    listeners = await trio.open_tcp_listeners(0, host=HOST)
    port = listeners[0].socket.getsockname()[1]
    server = AuthServer(address=f"{HOST}:{port}")
    router = Router()
    router.add("GET", path, server.handle)
    router.add("POST", path, server.handle)
    await nursery.start(serve_http, router, listeners)
    return server


@pytest.fixture
async def authd(nursery: trio.Nursery) -> AuthServer:
    return await start_auth_server(nursery)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return int(sock.getsockname()[1])


async def authed(address: tuple[str, int], secret: bytes = b"s3cret") -> RawConn:
    conn = await RawConn.open(address)
    reply = await conn.identify()
    assert reply["auth_required"] is True
    await conn.send(commands.auth(secret))
    json.loads(await conn.response())
    return conn


async def expect_error(conn: RawConn, command: bytes, error: bytes) -> None:
    """``command`` gets exactly this fatal error frame, then the connection closes."""
    await conn.send(command)
    await conn.expect_closed()
    assert conn.reader.take_buffered() == encode_frame(FrameType.ERROR, error)
    await conn.aclose()


async def test_allowed(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    authd.reply = {
        "ttl": 60,
        "identity": "alice",
        "identity_url": "https://id.example/alice",
        "authorizations": [GRANT_ALL],
    }
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await RawConn.open(nsqd.tcp)
    assert (await conn.identify())["auth_required"] is True
    await conn.send(commands.auth(b"s3cret"))
    assert await conn.response() == (
        b'{"identity":"alice","identity_url":"https://id.example/alice","permission_count":1}'
    )
    assert authd.queries == [
        {"common_name": "", "remote_ip": "127.0.0.1", "secret": "s3cret", "tls": "false"}
    ]
    assert authd.methods == ["GET"]
    assert authd.accept == ["application/vnd.nsq; version=1.0"]
    await conn.pub("t", b"one")
    await conn.mpub("t", [b"two", b"three"])
    await conn.send(commands.dpub("t", 0, b"four"))
    assert await conn.response() == b"OK"
    await conn.sub("t", "ch", rdy=4)
    got = sorted([(await conn.message()).body for _ in range(4)])
    assert got == [b"four", b"one", b"three", b"two"]
    assert len(authd.queries) == 1  # every check used the cached answer
    async with httpx.AsyncClient() as http:
        with trio.fail_after(TIMEOUT):
            stats = (await http.get(f"http://{HOST}:{nsqd.http[1]}/stats?format=json")).json()
    [row] = stats["topics"][0]["channels"][0]["clients"]
    assert (row["authed"], row["auth_identity"], row["auth_identity_url"]) == (
        True,
        "alice",
        "https://id.example/alice",
    )
    await conn.aclose()


async def test_identify_says_auth_is_not_required_without_auth_servers(
    start_nsqd: StartNSQD,
) -> None:
    nsqd = await start_nsqd()
    conn = await RawConn.open(nsqd.tcp)
    assert (await conn.identify())["auth_required"] is False
    await conn.aclose()


@pytest.mark.parametrize(
    ("command", "error"),
    [
        pytest.param(
            commands.pub("other", b"x"),
            b'E_UNAUTHORIZED AUTH failed for PUB on "other" ""',
            id="pub",
        ),
        pytest.param(
            commands.mpub("other", [b"x"]),
            b'E_UNAUTHORIZED AUTH failed for MPUB on "other" ""',
            id="mpub",
        ),
        pytest.param(
            commands.dpub("other", 5, b"x"),
            b'E_UNAUTHORIZED AUTH failed for DPUB on "other" ""',
            id="dpub",
        ),
        pytest.param(
            commands.sub("other", "ch"),
            b'E_UNAUTHORIZED AUTH failed for SUB on "other" "ch"',
            id="sub",
        ),
    ],
)
async def test_denied_by_topic(
    start_nsqd: StartNSQD, authd: AuthServer, command: bytes, error: bytes
) -> None:
    authd.reply = {
        "ttl": 60,
        "authorizations": [
            {"topic": "^allowed$", "channels": [".*"], "permissions": ["subscribe", "publish"]}
        ],
    }
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await authed(nsqd.tcp)
    await conn.pub("allowed", b"fine")
    await expect_error(conn, command, error)
    assert "other" not in nsqd.nsqd.topics  # refused before the topic was created


async def test_denied_by_channel(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    authd.reply = {
        "ttl": 60,
        "authorizations": [{"topic": "t", "channels": ["^ok$"], "permissions": ["subscribe"]}],
    }
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await authed(nsqd.tcp)
    await conn.sub("t", "ok")
    await conn.aclose()
    conn = await authed(nsqd.tcp)
    await expect_error(
        conn, commands.sub("t", "nope"), b'E_UNAUTHORIZED AUTH failed for SUB on "t" "nope"'
    )


@pytest.mark.parametrize(
    ("grant", "command", "error"),
    [
        pytest.param(
            {"topic": ".*", "channels": [".*"], "permissions": ["subscribe"]},
            commands.pub("t", b"x"),
            b'E_UNAUTHORIZED AUTH failed for PUB on "t" ""',
            id="subscribe-only",
        ),
        pytest.param(
            {"topic": ".*", "channels": [".*"], "permissions": ["publish"]},
            commands.sub("t", "c"),
            b'E_UNAUTHORIZED AUTH failed for SUB on "t" "c"',
            id="publish-only",
        ),
        pytest.param(
            # v1.3.0: publishing also needs a channel pattern that matches ""
            {"topic": ".*", "channels": ["^c$"], "permissions": ["publish"]},
            commands.pub("t", b"x"),
            b'E_UNAUTHORIZED AUTH failed for PUB on "t" ""',
            id="publish-needs-a-channel-pattern",
        ),
    ],
)
async def test_denied_by_permission(
    start_nsqd: StartNSQD, authd: AuthServer, grant: dict[str, Any], command: bytes, error: bytes
) -> None:
    authd.reply = {"ttl": 60, "authorizations": [grant]}
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    await expect_error(await authed(nsqd.tcp), command, error)


async def test_expired_ttl_is_queried_again(
    start_nsqd: StartNSQD, authd: AuthServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1.0  # real pace, plus the jumps below
    authd.reply = {"ttl": 10, "authorizations": [GRANT_ALL]}
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await authed(nsqd.tcp)
    await conn.pub("t", b"fresh")
    assert len(authd.queries) == 1
    mock_clock.jump(11)
    # both PUBs and the NOP arrive in one read: the first waits for the re-query,
    # the rest run after it, in order, on the new answer
    await conn.send(commands.pub("t", b"a") + commands.pub("t", b"b") + commands.nop())
    assert await conn.response() == b"OK"
    assert await conn.response() == b"OK"
    assert len(authd.queries) == 2
    assert authd.queries[1]["secret"] == "s3cret"
    # the next answer takes the topic away
    authd.reply = {"ttl": 10, "authorizations": [{**GRANT_ALL, "topic": "^elsewhere$"}]}
    mock_clock.jump(11)
    await expect_error(
        conn, commands.pub("t", b"c"), b'E_UNAUTHORIZED AUTH failed for PUB on "t" ""'
    )
    assert len(authd.queries) == 3
    assert nsqd.nsqd.topics["t"].message_count == 3


async def test_expired_and_auth_server_gone(
    start_nsqd: StartNSQD, authd: AuthServer, mock_clock: trio.testing.MockClock
) -> None:
    mock_clock.rate = 1.0
    authd.reply = {"ttl": 10, "authorizations": [GRANT_ALL]}
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await authed(nsqd.tcp)
    authd.status = 500
    mock_clock.jump(11)
    await expect_error(conn, commands.sub("t", "c"), b"E_AUTH_FAILED AUTH failed")


async def test_auth_server_down(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(auth_http_addresses=[f"{HOST}:{closed_port()}"])
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify()
    await expect_error(conn, commands.auth(b"s3cret"), b"E_AUTH_FAILED AUTH failed")


@pytest.mark.parametrize(
    ("status", "reply"),
    [
        pytest.param(500, {"message": "INTERNAL_ERROR"}, id="http-500"),
        pytest.param(200, b"not json", id="not-json"),
        pytest.param(200, {"ttl": "60", "authorizations": []}, id="ttl-type"),
        pytest.param(200, {"ttl": 0, "authorizations": [GRANT_ALL]}, id="ttl-zero"),
        pytest.param(
            200,
            {"ttl": 60, "authorizations": [{**GRANT_ALL, "permissions": ["admin"]}]},
            id="unknown-permission",
        ),
        pytest.param(
            200, {"ttl": 60, "authorizations": [{**GRANT_ALL, "topic": "("}]}, id="bad-regex"
        ),
    ],
)
async def test_unusable_answer_fails(
    start_nsqd: StartNSQD, authd: AuthServer, status: int, reply: Any
) -> None:
    authd.status, authd.reply = status, reply
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify()
    await expect_error(conn, commands.auth(b"s3cret"), b"E_AUTH_FAILED AUTH failed")


async def test_no_authorizations(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    authd.reply = {"ttl": 1, "authorizations": []}
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify()
    await expect_error(
        conn, commands.auth(b"s3cret"), b"E_UNAUTHORIZED AUTH no authorizations found"
    )


async def test_auth_already_set(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    conn = await authed(nsqd.tcp)
    await expect_error(conn, commands.auth(b"again"), b"E_INVALID AUTH already set")
    assert len(authd.queries) == 1


async def test_one_server_down_the_other_answers(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    nsqd = await start_nsqd(auth_http_addresses=[f"{HOST}:{closed_port()}", authd.address])
    for _ in range(4):  # whichever one nsqd starts with
        conn = await authed(nsqd.tcp)
        await conn.pub("t", b"x")
        await conn.aclose()
    assert len(authd.queries) == 4


async def test_post_and_full_url(start_nsqd: StartNSQD, nursery: trio.Nursery) -> None:
    """``--auth-http-request-method post``; an address with ``://`` is the whole URL."""
    authd = await start_auth_server(nursery, path="/v2/check")
    nsqd = await start_nsqd(
        auth_http_addresses=[f"http://{authd.address}/v2/check"], auth_http_request_method="post"
    )
    conn = await authed(nsqd.tcp, b"with space&amp")
    await conn.pub("t", b"x")
    assert authd.methods == ["POST"]
    assert authd.queries[0]["secret"] == "with space&amp"
    await conn.aclose()


async def test_tls_and_common_name(
    start_nsqd: StartNSQD, authd: AuthServer, tmp_path: Path
) -> None:
    certs = make_certs(tmp_path)
    nsqd = await start_nsqd(
        auth_http_addresses=[authd.address],
        **tls_options(
            certs, tls_client_auth_policy="require-verify", tls_root_ca_file=certs.ca_file
        ),
    )
    conn, reply = await connect(nsqd.tcp, client_context(certs, certs.client), tls_v1=True)
    assert reply["auth_required"] is True
    await conn.send(commands.auth(b"s3cret"))
    await conn.response()
    assert authd.queries == [
        {"common_name": "client.test", "remote_ip": "127.0.0.1", "secret": "s3cret", "tls": "true"}
    ]
    await conn.sub("t", "c")
    await conn.aclose()


async def test_https_auth_server_behind_tls_required(
    start_nsqd: StartNSQD, nursery: trio.Nursery, tmp_path: Path
) -> None:
    """An auth server answering 403 TLS_REQUIRED is asked again on the HTTPS port it names."""
    certs = make_certs(tmp_path)
    secure = await start_auth_server(nursery)
    plain_listeners = await trio.open_tcp_listeners(0, host=HOST)
    plain_port = plain_listeners[0].socket.getsockname()[1]
    https_listeners = await trio.open_tcp_listeners(0, host=HOST)
    https_port = https_listeners[0].socket.getsockname()[1]

    async def tls_required(request: Request) -> Response:
        body = b'{"message": "TLS_REQUIRED", "https_port": %d}' % https_port
        return Response(403, body)

    redirect = Router()
    redirect.add("GET", "/auth", tls_required)
    await nursery.start(serve_http, redirect, plain_listeners)
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    certs.ca.issue_cert(HOST).configure_cert(server_context)
    router = Router()
    router.add("GET", "/auth", secure.handle)
    await nursery.start(
        serve_http, router, [trio.SSLListener(lst, server_context) for lst in https_listeners]
    )
    nsqd = await start_nsqd(
        auth_http_addresses=[f"{HOST}:{plain_port}"], tls_root_ca_file=certs.ca_file
    )
    conn = await authed(nsqd.tcp)
    await conn.pub("t", b"x")
    assert len(secure.queries) == 1
    await conn.aclose()


async def test_http_publishing_is_not_checked(start_nsqd: StartNSQD, authd: AuthServer) -> None:
    """Real nsqd checks only the TCP protocol; /pub needs no AUTH."""
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    async with httpx.AsyncClient() as http:
        with trio.fail_after(TIMEOUT):
            response = await http.post(
                f"http://{HOST}:{nsqd.http[1]}/pub?topic=t", content=b"unchecked"
            )
    assert (response.status_code, response.text) == (200, "OK")
    assert authd.queries == []
