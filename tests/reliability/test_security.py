"""Security under abuse: AUTH on every publish and subscribe command, TLS-required refusing
plaintext on every command, and half-written TLS handshakes that must not stall anyone else."""

from __future__ import annotations

import socket
import ssl
from pathlib import Path

import httpx
import pytest

from nsqbox.nsqd.domain.options import TLS_REQUIRED
from nsqbox.wire import commands
from tests.conftest import StartNSQD
from tests.helpers import RawConn, publish
from tests.nsqd.transport import Certs, make_certs, tls_options
from tests.reliability import figures

ID = b"0123456789abcdef"


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    return make_certs(tmp_path)


def closed_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


PUBLISH_AND_SUBSCRIBE = [
    pytest.param(commands.pub("t", b"m"), b"PUB", id="PUB"),
    pytest.param(commands.mpub("t", [b"m", b"n"]), b"MPUB", id="MPUB"),
    pytest.param(commands.dpub("t", 10, b"m"), b"DPUB", id="DPUB"),
    pytest.param(commands.sub("t", "c"), b"SUB", id="SUB"),
]


@pytest.mark.parametrize(("command", "name"), PUBLISH_AND_SUBSCRIBE)
async def test_auth_is_enforced_on_every_publish_and_subscribe_command(
    start_nsqd: StartNSQD, command: bytes, name: bytes
) -> None:
    # nsqd checks for an AUTH before it asks any auth server: none needs to answer here
    nsqd = await start_nsqd(auth_http_addresses=[f"127.0.0.1:{closed_port()}"])
    conn = await RawConn.open(nsqd.tcp)
    reply = await conn.identify()
    assert reply["auth_required"] is True
    await conn.send(command)
    assert await conn.error() == b"E_AUTH_FIRST AUTH required before " + name
    await conn.expect_closed()
    await conn.aclose()
    topic = nsqd.nsqd.topics.get("t")
    assert topic is None or topic.message_count == 0
    figures.add("security: commands refused without AUTH", 1)


PLAIN_COMMANDS = [
    commands.sub("t", "c"),
    commands.pub("t", b"m"),
    commands.mpub("t", [b"m"]),
    commands.dpub("t", 10, b"m"),
    commands.rdy(1),
    commands.fin(ID),
    commands.req(ID, 0),
    commands.touch(ID),
    commands.nop(),
    commands.cls(),
    commands.auth("secret"),
    b"BOGUS\n",
]


async def test_tls_required_refuses_plaintext_on_every_command(
    start_nsqd: StartNSQD, certs: Certs
) -> None:
    nsqd = await start_nsqd(**tls_options(certs, tls_required=TLS_REQUIRED))
    for command in PLAIN_COMMANDS:
        name = command.split(b"\n")[0].split(b" ")[0]
        conn = await RawConn.open(nsqd.tcp)
        await conn.send(command)
        assert await conn.error() == (
            b"E_INVALID cannot " + name + b" in current state (TLS required)"
        )
        await conn.expect_closed()
        await conn.aclose()
    assert "t" not in nsqd.nsqd.topics  # nothing got through
    assert nsqd.http is not None
    async with httpx.AsyncClient() as http:
        response = await http.post(f"http://127.0.0.1:{nsqd.http[1]}/pub?topic=t", content=b"m")
    assert response.status_code == 403
    assert response.json()["message"] == "TLS_REQUIRED"
    figures.record("security: plaintext commands refused with TLS required", len(PLAIN_COMMANDS))


def client_hello(certs: Certs) -> bytes:
    """The first flight of a real TLS client (a ClientHello), from an in-memory handshake."""
    context = ssl.create_default_context()
    certs.ca.configure_trust(context)
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = context.wrap_bio(incoming, outgoing, server_hostname="127.0.0.1")
    with pytest.raises(ssl.SSLWantReadError):
        tls.do_handshake()
    return outgoing.read()


async def test_half_written_tls_handshakes_do_not_stall_other_clients(
    start_nsqd: StartNSQD, certs: Certs
) -> None:
    nsqd = await start_nsqd(**tls_options(certs))
    hello = client_hello(certs)
    cuts = sorted({0, 1, 5, 11, len(hello) // 2, len(hello) - 1})
    # a consumer that keeps working while the half-open handshakes sit on the server
    consumer = await RawConn.open(nsqd.tcp)
    await consumer.sub("canary", "c", rdy=100)
    stuck = []
    for cut in cuts:
        for tail in (b"", b"\x00garbage\xff" * 3):
            conn = await RawConn.open(nsqd.tcp)
            reply = await conn.identify(tls_v1=True)
            assert reply["tls_v1"] is True
            await conn.send(hello[:cut] + tail)
            stuck.append(conn)
    sent = [b"canary-%d" % i for i in range(50)]
    await publish(nsqd.tcp, "canary", *sent)
    got = [(await consumer.message()).body for _ in sent]
    assert sorted(got) == sorted(sent)
    # the half-written ones end: closed (garbage) or at nsqd's handshake timeout
    for conn in stuck:
        conn.timeout = 30
        await conn.expect_closed()
        await conn.aclose()
    await consumer.aclose()
    figures.record("security: half-written TLS handshakes survived", len(stuck))
