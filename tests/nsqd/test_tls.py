"""TLS: the upgrade after IDENTIFY, client certificates, --tls-required and HTTPS.

Certificates are made per test with trustme; every server is real and listens on
127.0.0.1, port 0. Mirrors nsqd's TestTLS* tests (nsqd/protocol_v2_test.go).
"""

from __future__ import annotations

import json
import ssl
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from nsqbox.nsqd.domain.options import TLS_REQUIRED, TLS_REQUIRED_EXCEPT_HTTP
from nsqbox.nsqd.tcp import negotiate
from nsqbox.wire import commands
from nsqbox.wire.frames import MAGIC_V2, FrameReader, FrameType, encode_frame
from tests.conftest import StartNSQD
from tests.helpers import TIMEOUT, RawConn
from tests.nsqd.transport import (
    HOST,
    Certs,
    client_context,
    connect,
    consume_one,
    make_certs,
    tls_options,
    upgrade,
)


@pytest.fixture
def certs(tmp_path: Path) -> Certs:
    directory = tmp_path / "certs"
    directory.mkdir()
    return make_certs(directory)


async def stats_client(http: tuple[str, int]) -> dict[str, Any]:
    """The one client of the one channel, from GET /stats (plain HTTP)."""
    async with httpx.AsyncClient() as client:
        with trio.fail_after(TIMEOUT):
            response = await client.get(f"http://{http[0]}:{http[1]}/stats?format=json")
    [topic] = response.json()["topics"]
    [channel] = topic["channels"]
    [client_row] = channel["clients"]
    return dict(client_row)


async def test_tls_upgrade(start_nsqd: StartNSQD, certs: Certs) -> None:
    nsqd = await start_nsqd(**tls_options(certs))
    conn, reply = await connect(nsqd.tcp, client_context(certs), tls_v1=True)
    assert (reply["tls_v1"], reply["snappy"], reply["deflate"]) == (True, False, False)
    await consume_one(conn, "tls_topic", b"over TLS")
    row = await stats_client(nsqd.http)
    assert row["tls"] is True
    assert row["tls_version"] in ("TLS1.2", "TLS1.3")
    assert row["tls_cipher_suite"]
    assert row["tls_negotiated_protocol"] == ""
    assert row["tls_negotiated_protocol_is_mutual"] is True
    await conn.aclose()


async def test_no_tls_without_a_certificate(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd()
    assert nsqd.https is None
    conn = await RawConn.open(nsqd.tcp)
    reply = await conn.identify(tls_v1=True)
    assert reply["tls_v1"] is False
    await consume_one(conn, "plain_topic", b"in the clear")  # no upgrade happened
    await conn.aclose()


async def test_tls_only_with_feature_negotiation(start_nsqd: StartNSQD, certs: Certs) -> None:
    nsqd = await start_nsqd(**tls_options(certs))
    conn = await RawConn.open(nsqd.tcp)
    assert await conn.identify(tls_v1=True, feature_negotiation=False) == b"OK"
    await consume_one(conn, "plain_topic", b"in the clear")
    await conn.aclose()


@pytest.mark.parametrize("compression", ["snappy", "deflate"])
async def test_tls_then_compression(start_nsqd: StartNSQD, certs: Certs, compression: str) -> None:
    nsqd = await start_nsqd(**tls_options(certs))
    conn, reply = await connect(nsqd.tcp, client_context(certs), tls_v1=True, **{compression: True})
    assert reply["tls_v1"] is True
    assert reply[compression] is True
    await consume_one(conn, "tls_compressed", b"x" * 128_000)
    row = await stats_client(nsqd.http)
    assert (row["tls"], row[compression]) == (True, True)
    await conn.aclose()


async def expect_rejected(conn: RawConn, context: ssl.SSLContext) -> None:
    """The handshake fails, or (TLS 1.3: the server checks the certificate last) the first read."""
    reply = await conn.identify(tls_v1=True)
    assert reply["tls_v1"] is True
    with pytest.raises((trio.BrokenResourceError, EOFError)):
        await upgrade(conn, reply, context)
    await conn.aclose()


@pytest.mark.parametrize("policy", ["require", "require-verify"])
async def test_client_certificate_required(
    start_nsqd: StartNSQD, certs: Certs, policy: str
) -> None:
    nsqd = await start_nsqd(
        **tls_options(certs, tls_client_auth_policy=policy, tls_root_ca_file=certs.ca_file)
    )
    # no certificate
    await expect_rejected(await RawConn.open(nsqd.tcp), client_context(certs))
    # a certificate from a CA nsqd does not trust
    await expect_rejected(await RawConn.open(nsqd.tcp), client_context(certs, certs.stranger))
    # a certificate signed by --tls-root-ca-file
    conn, _ = await connect(nsqd.tcp, client_context(certs, certs.client), tls_v1=True)
    await consume_one(conn, "mutual", b"both sides known")
    await conn.aclose()


async def test_min_version(start_nsqd: StartNSQD, certs: Certs) -> None:
    nsqd = await start_nsqd(**tls_options(certs, tls_min_version="tls1.3"))
    old_client = client_context(certs)
    old_client.maximum_version = ssl.TLSVersion.TLSv1_2
    await expect_rejected(await RawConn.open(nsqd.tcp), old_client)
    conn, _ = await connect(nsqd.tcp, client_context(certs), tls_v1=True)
    assert nsqd.nsqd.clients[max(nsqd.nsqd.clients)].tls_info.version() == "TLSv1.3"
    await conn.aclose()


async def test_handshake_timeout(
    start_nsqd: StartNSQD, certs: Certs, autojump_clock: trio.testing.MockClock
) -> None:
    """nsqd gives the handshake 5s (an option here); the error goes out on the connection."""
    nsqd = await start_nsqd(**tls_options(certs), tls_handshake_timeout=2.0)
    conn = await RawConn.open(nsqd.tcp)
    start = trio.current_time()
    await conn.identify(tls_v1=True)
    await conn.expect_closed()
    assert trio.current_time() - start == pytest.approx(2.0, abs=0.1)
    assert conn.reader.take_buffered() == encode_frame(
        FrameType.ERROR, b"E_IDENTIFY_FAILED IDENTIFY failed TLS handshake timeout"
    )
    await conn.aclose()


class PipelinedIdentify(trio.abc.Stream):
    """A client that sends IDENTIFY and its TLS ClientHello in one write, unasked.

    It strips nsqd's plain-text IDENTIFY reply from what it receives before the
    TLS layer above it sees the bytes.
    """

    def __init__(self, stream: trio.abc.Stream, identify: bytes) -> None:
        self.stream = stream
        self.identify: bytes | None = identify
        self.reader = FrameReader()
        self.reply: tuple[int, bytes] | None = None

    async def send_all(self, data: bytes | bytearray | memoryview) -> None:
        if self.identify is not None:
            data, self.identify = self.identify + bytes(data), None
        await self.stream.send_all(data)

    async def wait_send_all_might_not_block(self) -> None:
        await self.stream.wait_send_all_might_not_block()

    async def receive_some(self, max_bytes: int | None = None) -> bytes | bytearray:
        while self.reply is None:
            self.reader.receive_data(await self.stream.receive_some())
            self.reply = self.reader.next_frame()
            if self.reply is not None and self.reader.buffered:
                return self.reader.take_buffered()
        return await self.stream.receive_some(max_bytes)

    async def aclose(self) -> None:
        await self.stream.aclose()


async def test_client_hello_sent_with_identify(
    start_nsqd: StartNSQD, certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What arrived behind IDENTIFY belongs to the TLS layer (the parser's buffered bytes)."""
    handed_over: list[bytes] = []
    original = negotiate.upgrade_transport

    async def spy(transport: Any, upgrades: negotiate.Upgrades, initial: bytes) -> Any:
        handed_over.append(initial)
        return await original(transport, upgrades, initial)

    monkeypatch.setattr(negotiate, "upgrade_transport", spy)
    nsqd = await start_nsqd(**tls_options(certs))
    tcp = await trio.open_tcp_stream(*nsqd.tcp)
    identify = MAGIC_V2 + commands.identify({"feature_negotiation": True, "tls_v1": True})
    pipelined = PipelinedIdentify(tcp, identify)
    tls = trio.SSLStream(pipelined, client_context(certs), server_hostname=HOST)
    conn = RawConn(tls)
    with trio.fail_after(TIMEOUT):
        await tls.do_handshake()
    assert pipelined.reply is not None
    assert json.loads(pipelined.reply[1])["tls_v1"] is True
    assert await conn.response() == b"OK"
    [initial] = handed_over
    assert initial.startswith(b"\x16\x03")  # a TLS handshake record: the ClientHello
    await consume_one(conn, "pipelined", b"hello")
    await conn.aclose()


async def test_tls_required_refuses_plain_commands(start_nsqd: StartNSQD, certs: Certs) -> None:
    nsqd = await start_nsqd(**tls_options(certs, tls_required=TLS_REQUIRED_EXCEPT_HTTP))
    # any command but IDENTIFY, before TLS
    conn = await RawConn.open(nsqd.tcp)
    await conn.send(b"SUB t c\n")
    await conn.expect_closed()
    assert conn.reader.take_buffered() == encode_frame(
        FrameType.ERROR, b"E_INVALID cannot SUB in current state (TLS required)"
    )
    await conn.aclose()
    # IDENTIFY without asking for TLS, then a command
    conn = await RawConn.open(nsqd.tcp)
    await conn.identify()
    await conn.send(commands.pub("t", b"x"))
    await conn.expect_closed()
    assert conn.reader.take_buffered() == encode_frame(
        FrameType.ERROR, b"E_INVALID cannot PUB in current state (TLS required)"
    )
    await conn.aclose()
    # with TLS all is well
    conn, _ = await connect(nsqd.tcp, client_context(certs), tls_v1=True)
    await consume_one(conn, "t", b"secure")
    await conn.aclose()
    # tcp-https: plain HTTP still works
    async with httpx.AsyncClient() as client:
        with trio.fail_after(TIMEOUT):
            response = await client.get(f"http://{HOST}:{nsqd.http[1]}/ping")
    assert (response.status_code, response.text) == (200, "OK")


async def test_tls_required_http_answers_403_and_https_serves(
    start_nsqd: StartNSQD, certs: Certs
) -> None:
    nsqd = await start_nsqd(**tls_options(certs, tls_required=TLS_REQUIRED))
    assert nsqd.https is not None
    https_port = nsqd.https[1]
    assert nsqd.nsqd.https_port == https_port
    async with httpx.AsyncClient() as plain:
        with trio.fail_after(TIMEOUT):
            response = await plain.get(f"http://{HOST}:{nsqd.http[1]}/stats")
    assert response.status_code == 403
    assert response.content == b'{"message": "TLS_REQUIRED", "https_port": %d}' % https_port
    async with httpx.AsyncClient(verify=client_context(certs)) as secure:
        with trio.fail_after(TIMEOUT):
            ping = await secure.get(f"https://{HOST}:{https_port}/ping")
            pub = await secure.post(f"https://{HOST}:{https_port}/pub?topic=t", content=b"hi")
            info = await secure.get(f"https://{HOST}:{https_port}/info")
    assert (ping.status_code, ping.text) == (200, "OK")
    assert (pub.status_code, pub.text) == (200, "OK")
    assert info.json()["tcp_port"] == nsqd.tcp[1]
    assert nsqd.nsqd.topics["t"].message_count == 1


async def test_https_refuses_plain_http_on_its_port(start_nsqd: StartNSQD, certs: Certs) -> None:
    nsqd = await start_nsqd(**tls_options(certs))
    assert nsqd.https is not None
    async with httpx.AsyncClient() as plain:
        with trio.fail_after(TIMEOUT), pytest.raises(httpx.HTTPError):
            await plain.get(f"http://{HOST}:{nsqd.https[1]}/ping")


async def test_unusable_certificate_stops_start_up(start_nsqd: StartNSQD, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="failed to build TLS config"):
        await start_nsqd(tls_cert=str(tmp_path / "missing.pem"), tls_key=str(tmp_path / "k.pem"))
    with pytest.raises(ValueError, match="failed to build TLS config"):
        await start_nsqd(tls_cert=str(tmp_path / "only-a-cert.pem"))


async def test_a_tap_opened_over_http_is_read_over_https(
    start_nsqd: StartNSQD, certs: Certs
) -> None:
    # one node's taps, whichever of its listeners a request came in on
    nsqd = await start_nsqd(**tls_options(certs))
    assert nsqd.https is not None
    async with (
        httpx.AsyncClient(base_url=f"http://{HOST}:{nsqd.http[1]}") as plain,
        httpx.AsyncClient(
            base_url=f"https://{HOST}:{nsqd.https[1]}", verify=client_context(certs)
        ) as secure,
    ):
        with trio.fail_after(TIMEOUT):
            opened = await plain.post("/nsqbox/tap/open", params={"topic": "tapped"})
            tap_id = opened.json()["id"]
            assert (await secure.post("/pub?topic=tapped", content=b"hi")).text == "OK"
            read = await secure.get("/nsqbox/tap/read", params={"id": tap_id})
            closed = await plain.post("/nsqbox/tap/close", params={"id": tap_id})
    assert [m["body"] for m in read.json()["messages"]] == ["aGk="]
    assert [m["body"] for m in closed.json()["messages"]] == ["aGk="]
