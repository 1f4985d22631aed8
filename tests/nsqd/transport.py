"""Helpers for the TLS, compression and AUTH tests: certificates and the client side of upgrades."""

from __future__ import annotations

import ssl
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio
import trustme

from nsqbox.net.streams import DeflateStream, SnappyStream, upgrade_tls
from nsqbox.wire import commands
from tests.helpers import RawConn

HOST = "127.0.0.1"


@dataclass(frozen=True)
class Certs:
    """A CA, nsqd's certificate and two client certificates, as PEM files made for one test."""

    ca: trustme.CA
    ca_file: str
    server_file: str  # key and certificate chain in one PEM (nsqd gets it as cert and key)
    client: trustme.LeafCert  # signed by ``ca``
    stranger: trustme.LeafCert  # signed by another CA


def make_certs(directory: Path) -> Certs:
    ca = trustme.CA()
    ca_file = directory / "ca.pem"
    ca.cert_pem.write_to_path(str(ca_file))
    server_file = directory / "server.pem"
    ca.issue_cert(HOST).private_key_and_cert_chain_pem.write_to_path(str(server_file))
    client = ca.issue_cert("client.test", common_name="client.test")
    stranger = trustme.CA().issue_cert("stranger.test", common_name="stranger.test")
    return Certs(ca, str(ca_file), str(server_file), client, stranger)


def tls_options(certs: Certs, **more: object) -> dict[str, object]:
    """nsqd options that enable TLS (and HTTPS on a free port)."""
    return {
        "tls_cert": certs.server_file,
        "tls_key": certs.server_file,
        "https_address": f"{HOST}:0",
        **more,
    }


def client_context(certs: Certs, cert: trustme.LeafCert | None = None) -> ssl.SSLContext:
    """A client context that trusts the test CA, presenting ``cert`` if given."""
    context = ssl.create_default_context()
    certs.ca.configure_trust(context)
    if cert is not None:
        cert.configure_cert(context)
    return context


async def upgrade(conn: RawConn, reply: dict[str, Any], context: ssl.SSLContext | None) -> None:
    """The client's half of the upgrades ``reply`` agreed to, each confirmed by ``OK``."""
    if reply["tls_v1"]:
        assert context is not None
        assert conn.reader.buffered == 0  # nsqd waits for the ClientHello
        with trio.fail_after(conn.timeout):
            conn.stream = await upgrade_tls(
                conn.stream, context, server_side=False, server_hostname=HOST
            )
        assert await conn.response() == b"OK"
    if reply["snappy"]:
        conn.stream = SnappyStream(conn.stream, initial=conn.reader.take_buffered())
        assert await conn.response() == b"OK"
    if reply["deflate"]:
        level = reply["deflate_level"]
        conn.stream = DeflateStream(conn.stream, level, initial=conn.reader.take_buffered())
        assert await conn.response() == b"OK"


async def connect(
    address: tuple[str, int], context: ssl.SSLContext | None = None, **features: Any
) -> tuple[RawConn, dict[str, Any]]:
    """Connect, IDENTIFY with ``features`` (tls_v1, snappy, deflate...), perform the upgrades."""
    conn = await RawConn.open(address)
    reply = await conn.identify(**features)
    await upgrade(conn, reply, context)
    return conn, reply


async def consume_one(conn: RawConn, topic: str, body: bytes) -> None:
    """PUB ``body``, SUB, RDY 1, receive it and FIN it, all through the upgraded stream."""
    await conn.pub(topic, body)
    await conn.sub(topic, "ch", rdy=1)
    msg = await conn.message()
    assert msg.body == body
    await conn.send(commands.fin(msg.id))
