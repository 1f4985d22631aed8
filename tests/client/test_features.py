"""TLS, snappy, deflate and AUTH with the trio client, against real nsqbox servers."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path

import msgspec
import pytest
import trio
import trustme

from nsqbox.client import Config, HandshakeError, NSQError, open_consumer, open_producer
from nsqbox.client.conn import open_connection
from nsqbox.nsqd.server import NSQDAddresses
from tests.client.fake_nsqd import FakeNSQD
from tests.client.helpers import SECRET, TIMEOUT, Collector, serve_auth, tcp, wait_for
from tests.conftest import StartNSQD


@dataclass
class TLSFiles:
    ca: trustme.CA
    cert: str

    def client_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context()
        self.ca.configure_trust(context)
        return context


@pytest.fixture(scope="module")
def tls_files(tmp_path_factory: pytest.TempPathFactory) -> TLSFiles:
    ca = trustme.CA()
    path = tmp_path_factory.mktemp("tls") / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(path))
    return TLSFiles(ca, str(path))


@pytest.fixture
async def tls_nsqd(start_nsqd: StartNSQD, tls_files: TLSFiles) -> NSQDAddresses:
    return await start_nsqd(tls_cert=tls_files.cert, tls_key=tls_files.cert)


async def round_trip(nsqd: NSQDAddresses, config: Config) -> tuple[bool, bool, bool]:
    """Publish and consume with ``config``; nsqd's view of (tls, snappy, deflate)."""
    bodies = [b"x" * 5000, b"small", b"y" * 70000]
    async with open_producer(tcp(nsqd), config=config) as producer:
        await producer.pub("t", bodies[0])
        await producer.mpub("t", bodies[1:])
    handler = Collector(expected=3)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[tcp(nsqd)], config=config
    ) as consumer:
        await handler.wait()
        await wait_for(lambda: consumer.stats().finished == 3)
        (client,) = nsqd.nsqd.clients.values()
        flags = (client.tls, client.snappy, client.deflate)
    assert handler.bodies == bodies
    return flags


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"snappy": True}, (False, True, False)),
        ({"deflate": True}, (False, False, True)),
        ({"deflate": True, "deflate_level": 1}, (False, False, True)),
    ],
    ids=["snappy", "deflate", "deflate-level-1"],
)
async def test_compression(
    nsqd: NSQDAddresses, fields: dict[str, object], expected: tuple[bool, bool, bool]
) -> None:
    assert await round_trip(nsqd, Config(**fields)) == expected  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({}, (True, False, False)),
        ({"snappy": True}, (True, True, False)),
        ({"deflate": True}, (True, False, True)),
    ],
    ids=["tls", "tls+snappy", "tls+deflate"],
)
async def test_tls(
    tls_nsqd: NSQDAddresses,
    tls_files: TLSFiles,
    fields: dict[str, object],
    expected: tuple[bool, bool, bool],
) -> None:
    config = Config(tls=tls_files.client_context(), **fields)  # type: ignore[arg-type]
    assert await round_trip(tls_nsqd, config) == expected


async def test_tls_refused_by_nsqd_is_an_error(nsqd: NSQDAddresses) -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(HandshakeError, match="TLS"):
        async with open_producer(tcp(nsqd), config=Config(tls=True)):
            pass  # pragma: no cover


async def test_untrusted_certificate_is_an_error(tls_nsqd: NSQDAddresses) -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(HandshakeError, match="TLS handshake"):
        async with open_producer(tcp(tls_nsqd), config=Config(tls=ssl.create_default_context())):
            pass  # pragma: no cover


@pytest.mark.parametrize("upgrade", ["snappy", "deflate"])
async def test_bytes_buffered_before_the_upgrade_go_to_the_new_layer(
    nursery: trio.Nursery, upgrade: str
) -> None:
    reply = msgspec.json.encode({"max_rdy_count": 100, upgrade: True, "version": "1.3.0"})
    fake = FakeNSQD(reply, upgrade=upgrade)
    await nursery.start(fake.serve)
    fake.messages = [b"through " + upgrade.encode()]
    config = Config(**{upgrade: True})  # type: ignore[arg-type]
    with trio.fail_after(TIMEOUT):
        conn = await open_connection(fake.address, config)
        assert conn.negotiated.upgrades == [upgrade]
        await conn.aclose()
        async with open_producer(fake.address, config=config) as producer:
            await producer.pub("t", b"compressed")
        handler = Collector(expected=1)
        async with open_consumer(
            "t", "c", handler, nsqd_tcp_addresses=[fake.address], config=config
        ):
            await handler.wait()
    assert handler.bodies == [b"through " + upgrade.encode()]
    assert b"PUB t" in fake.commands


async def test_nsqd_without_feature_negotiation_means_max_rdy_2500(nursery: trio.Nursery) -> None:
    fake = FakeNSQD(b"OK")  # what nsqd before 0.2.20 answers to IDENTIFY
    await nursery.start(fake.serve)
    fake.messages = [b"old"]
    handler = Collector(expected=1)
    with trio.fail_after(TIMEOUT):
        async with open_consumer(
            "t",
            "c",
            handler,
            nsqd_tcp_addresses=[fake.address],
            config=Config(max_in_flight=10_000),
        ) as consumer:
            await handler.wait()
            await wait_for(lambda: b"RDY 2500" in fake.commands)
            state = consumer.rdy_state(fake.address)
            assert state is not None
            assert state.max_rdy_count == 2500
    assert [c for c in fake.commands if c.startswith(b"RDY")] == [b"RDY 1", b"RDY 2500"]


# -- AUTH ------------------------------------------------------------------------------
@pytest.fixture
async def auth_nsqd(start_nsqd: StartNSQD, nursery: trio.Nursery) -> NSQDAddresses:
    return await start_nsqd(auth_http_addresses=[await nursery.start(serve_auth)])


async def test_auth(auth_nsqd: NSQDAddresses) -> None:
    config = Config(auth_secret=SECRET)
    with trio.fail_after(TIMEOUT):
        conn = await open_connection(tcp(auth_nsqd), config)
        assert conn.auth is not None
        assert (conn.auth.identity, conn.auth.permission_count) == ("tester", 1)
        await conn.aclose()
        async with open_producer(tcp(auth_nsqd), config=config) as producer:
            await producer.pub("t", b"secret message")
        handler = Collector(expected=1)
        async with open_consumer(
            "t", "c", handler, nsqd_tcp_addresses=[tcp(auth_nsqd)], config=config
        ):
            await handler.wait()
            (client,) = auth_nsqd.nsqd.clients.values()
            assert client.auth_state is not None
        assert handler.bodies == [b"secret message"]


async def test_auth_required_without_a_secret(auth_nsqd: NSQDAddresses) -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(HandshakeError, match="auth_secret"):
        async with open_producer(tcp(auth_nsqd)):
            pass  # pragma: no cover


async def test_auth_with_a_wrong_secret(auth_nsqd: NSQDAddresses) -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(NSQError) as info:
        async with open_producer(tcp(auth_nsqd), config=Config(auth_secret="wrong")):
            pass  # pragma: no cover
    assert info.value.code == "E_UNAUTHORIZED"


def test_tls_files_fixture_paths(tls_files: TLSFiles) -> None:
    assert Path(tls_files.cert).exists()
