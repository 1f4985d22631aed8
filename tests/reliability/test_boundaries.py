"""One boundary per server: a bug in one connection ends that connection, never the server.

Each test injects an unexpected exception (``RuntimeError``) into the code that
serves one request or connection, on a real server over real sockets, and then
shows that (a) the failure is logged with the peer's address, (b) only that
connection or request failed, and (c) a second client, connected before and
after, is served as if nothing happened. Injection replaces one method of the
live server object for one input; nothing of the server is mocked.
"""

from __future__ import annotations

import logging
import ssl
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.admin.clusterinfo import ClusterInfo
from nsqbox.admin.options import AdminOptions
from nsqbox.admin.server import serve_admin
from nsqbox.nsqd.tcp.auth import ConnectionAuth
from nsqbox.nsqd.tcp.client_state import ClientState
from nsqbox.wire import commands
from nsqbox.wire.frames import FrameType
from nsqbox.wire.lookupd import encode_register
from nsqbox.wire.message import decode_message
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn, publish
from tests.lookupd.lookupd_helpers import open_lookupd, open_v1
from tests.nsqd.test_auth import authed, start_auth_server
from tests.nsqd.transport import client_context, make_certs, tls_options

BUG = "injected bug"


def failing_for(original: Callable[..., Any], bad: object) -> Callable[..., Any]:
    """``original``, except that a call whose first argument is ``bad`` raises RuntimeError."""

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if args and args[0] == bad:
            raise RuntimeError(BUG)
        return original(*args, **kwargs)

    return wrapper


def logged_bug(caplog: pytest.LogCaptureFixture, peer: str) -> list[logging.LogRecord]:
    """The error records that carry the injected bug and name ``peer``."""
    return [
        r
        for r in caplog.records
        if r.levelno >= logging.ERROR
        and r.exc_info is not None
        and str(r.exc_info[1]).find(BUG) >= 0
        and peer in r.getMessage()
    ]


def local_address(conn: RawConn) -> str:
    host, port = conn.stream.socket.getsockname()[:2]
    return f"{host}:{port}"


async def bystander(address: tuple[str, int], topic: str = "bystander") -> RawConn:
    """A consumer subscribed to ``topic`` with RDY 10."""
    conn = await RawConn.open(address)
    await conn.identify()
    await conn.sub(topic, "ch", rdy=10)
    return conn


async def assert_still_served(conn: RawConn, address: tuple[str, int], body: bytes) -> None:
    await publish(address, "bystander", body)
    assert (await conn.message()).body == body


# -- nsqd TCP ---------------------------------------------------------------------------------


async def test_nsqd_tcp_bug_in_a_command_closes_only_that_client(
    start_nsqd: StartNSQD, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nsqd = await start_nsqd()
    watcher = await bystander(nsqd.tcp)
    monkeypatch.setattr(nsqd.nsqd, "get_topic", failing_for(nsqd.nsqd.get_topic, "boom"))
    victim = await RawConn.open(nsqd.tcp)
    peer = local_address(victim)
    await victim.send(commands.pub("boom", b"x"))
    await victim.expect_closed()
    await victim.aclose()
    assert logged_bug(caplog, peer)
    await assert_still_served(watcher, nsqd.tcp, b"after a bug")
    await watcher.aclose()


async def test_nsqd_tcp_bug_while_awaiting_auth_closes_only_that_client(
    start_nsqd: StartNSQD,
    nursery: trio.Nursery,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    authd = await start_auth_server(nursery)
    nsqd = await start_nsqd(auth_http_addresses=[authd.address])
    original = ConnectionAuth.authenticate

    async def authenticate(self: ConnectionAuth, secret: bytes, **kwargs: Any) -> bytes:
        if secret == b"boom":
            raise RuntimeError(BUG)
        return await original(self, secret, **kwargs)

    monkeypatch.setattr(ConnectionAuth, "authenticate", authenticate)
    watcher = await authed(nsqd.tcp, b"good")
    await watcher.sub("bystander", "ch", rdy=10)

    victim = await RawConn.open(nsqd.tcp)
    peer = local_address(victim)
    await victim.identify()
    await victim.send(commands.auth(b"boom"))
    await victim.expect_closed()
    await victim.aclose()
    assert logged_bug(caplog, peer)
    await watcher.send(commands.pub("bystander", b"still here"))
    frames = {await watcher.read_frame(), await watcher.read_frame()}
    assert (FrameType.RESPONSE, b"OK") in frames
    [(_, message)] = frames - {(FrameType.RESPONSE, b"OK")}
    assert decode_message(message).body == b"still here"
    await watcher.aclose()


async def test_nsqd_tcp_bug_outside_the_protocol_loop_closes_only_that_client(
    start_nsqd: StartNSQD, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    nsqd = await start_nsqd()
    watcher = await bystander(nsqd.tcp)
    victim = await RawConn.open(nsqd.tcp, magic=b"")
    victim_port = victim.stream.socket.getsockname()[1]
    original_run = ClientState.run

    async def run(self: ClientState, initial: bytes) -> None:
        if self.remote_address.endswith(f":{victim_port}"):
            raise RuntimeError(BUG)
        await original_run(self, initial)

    monkeypatch.setattr(ClientState, "run", run)
    await victim.send(b"  V2")
    await victim.expect_closed()
    await victim.aclose()
    assert logged_bug(caplog, f"127.0.0.1:{victim_port}")
    await assert_still_served(watcher, nsqd.tcp, b"after a bug")
    await watcher.aclose()


# -- nsqd HTTP and HTTPS ----------------------------------------------------------------------


@pytest.mark.parametrize("scheme", ["http", "https"])
async def test_nsqd_http_bug_answers_500_and_serves_the_next_request(
    start_nsqd: StartNSQD,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    scheme: str,
) -> None:
    certs = make_certs(tmp_path)
    nsqd = await start_nsqd(**tls_options(certs))
    monkeypatch.setattr(nsqd.nsqd, "get_topic", failing_for(nsqd.nsqd.get_topic, "boom"))
    address = nsqd.http if scheme == "http" else nsqd.https
    assert address is not None
    base = f"{scheme}://{address[0]}:{address[1]}"
    verify: ssl.SSLContext | bool = client_context(certs) if scheme == "https" else False
    watcher = await bystander(nsqd.tcp)
    async with httpx.AsyncClient(base_url=base, verify=verify, timeout=TIMEOUT) as http:
        failed = await http.post("/pub", params={"topic": "boom"}, content=b"x")
        assert failed.status_code == 500
        assert logged_bug(caplog, "127.0.0.1:")
        # the same keep-alive client, and the TCP bystander, carry on
        ok = await http.post("/pub", params={"topic": "bystander"}, content=b"after")
        assert (ok.status_code, ok.text) == (200, "OK")
        assert (await http.get("/ping")).text == "OK"
    assert (await watcher.message()).body == b"after"
    await watcher.aclose()


# -- nsqlookupd TCP and HTTP ------------------------------------------------------------------


async def test_lookupd_tcp_bug_closes_only_that_peer(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_lookupd() as lookupd:
        core = lookupd.addresses.lookupd
        original = core.register

        def register(peer: Any, topic: str, channel: str) -> None:
            if topic == "boom":
                raise RuntimeError(BUG)
            original(peer, topic, channel)

        monkeypatch.setattr(core, "register", register)
        async with open_v1(lookupd) as healthy, open_v1(lookupd) as victim:
            assert (await healthy.identify(http_port=1)).startswith(b"{")
            await victim.identify(http_port=2)
            peer = "{}:{}".format(*victim.stream.socket.getsockname()[:2])
            await victim.send(encode_register("boom"))
            assert await victim.read_to_eof() == b""
            assert logged_bug(caplog, peer)
            assert await healthy.command(encode_register("fine", "ch")) == b"OK"
        assert (await lookupd.get("/lookup", topic="fine"))["channels"] == ["ch"]


async def test_lookupd_http_bug_answers_500_and_serves_the_next_request(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_lookupd() as lookupd:
        core = lookupd.addresses.lookupd
        monkeypatch.setattr(core, "lookup", failing_for(core.lookup, "boom"))
        failed = await lookupd.http.get("/lookup", params={"topic": "boom"})
        assert failed.status_code == 500
        assert logged_bug(caplog, "127.0.0.1:")
        assert (await lookupd.http.get("/ping")).text == "OK"
        missing = await lookupd.http.get("/lookup", params={"topic": "other"})
        assert missing.status_code == 404


# -- admin --------------------------------------------------------------------------------------


async def test_admin_bug_answers_500_and_serves_the_next_request(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_lookupd() as lookupd:
        host, port = lookupd.addresses.http
        options = AdminOptions(
            http_address="127.0.0.1:0", lookupd_http_addresses=[f"{host}:{port}"]
        )
        admin = await nursery.start(serve_admin, options)

        async def topics(self: ClusterInfo, *args: Any) -> Any:
            raise RuntimeError(BUG)

        monkeypatch.setattr(ClusterInfo, "topics", topics)
        base = "http://{}:{}".format(*admin.http)
        async with httpx.AsyncClient(base_url=base, timeout=TIMEOUT) as http:
            failed = await http.get("/api/topics")
            assert failed.status_code == 500
            assert logged_bug(caplog, "127.0.0.1:")
            assert (await http.get("/ping")).status_code == 200
            nodes = await http.get("/api/nodes")
            assert nodes.status_code == 200
        nursery.cancel_scope.cancel()
