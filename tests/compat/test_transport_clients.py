"""pynsq and gnsq over TLS, snappy and deflate against nsqbox's nsqd.

Each client publishes and consumes the shared workload (PUB, MPUB, DPUB,
requeues) with the features negotiated, and the server confirms the
connections really were upgraded. Certificates are made per test (trustme);
the clients verify nsqd's certificate against the test CA.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import trustme

from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.testing import ThreadedNSQD
from tests.compat.loop_wait import wait_for

nsq = pytest.importorskip("nsq")
gevent = pytest.importorskip("gevent")
gnsq = pytest.importorskip("gnsq")

pytestmark = [
    # gnsq upgrades with gevent's SSLSocket(ssl_version=PROTOCOL_TLSv1_2) and offers no way
    # to pass a context; the deprecation is theirs
    pytest.mark.filterwarnings(
        "ignore:ssl.PROTOCOL_TLSv1_2 is deprecated:DeprecationWarning:gevent.ssl"
    ),
]

TOPIC = "transport_topic"
CHANNEL = "transport_channel"
TIMEOUT = 20.0

FEATURES = [
    pytest.param({"tls_v1": True}, id="tls"),
    pytest.param({"snappy": True}, id="snappy"),
    pytest.param({"deflate": True, "deflate_level": 9}, id="deflate"),
    pytest.param({"tls_v1": True, "snappy": True}, id="tls-snappy"),
    pytest.param({"tls_v1": True, "deflate": True, "deflate_level": 1}, id="tls-deflate"),
]


@pytest.fixture
def tls_box(start_threaded_nsqd: Callable[..., ThreadedNSQD], tmp_path: Path) -> ThreadedNSQD:
    """An nsqd with TLS (certificate for 127.0.0.1 from a fresh CA; the CA in ``ca.pem``)."""
    ca = trustme.CA()
    ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
    server = tmp_path / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(server))
    return start_threaded_nsqd(
        tls_cert=str(server), tls_key=str(server), https_address="127.0.0.1:0"
    )


def ca_file(box: ThreadedNSQD) -> str:
    return str(Path(box.options.tls_cert).parent / "ca.pem")


def expected_flags(features: dict[str, Any]) -> tuple[bool, bool, bool]:
    return (
        bool(features.get("tls_v1")),
        bool(features.get("snappy")),
        bool(features.get("deflate")),
    )


def connection_flags(box: ThreadedNSQD) -> list[tuple[bool, bool, bool]]:
    """(tls, snappy, deflate) of every TCP client connected to ``box``."""

    def read(nsqd: NSQD) -> list[tuple[bool, bool, bool]]:
        return [(c.tls, c.snappy, c.deflate) for c in nsqd.clients.values()]

    return box.call(read)


# -- pynsq ---------------------------------------------------------------------------------


@pytest.mark.parametrize("features", FEATURES)
def test_pynsq(tls_box: ThreadedNSQD, workload: Any, wait: Any, features: dict[str, Any]) -> None:
    address = tls_box.tcp_address
    options = dict(features)
    if features.get("tls_v1"):
        options["tls_options"] = {
            "ssl_version": ssl.PROTOCOL_TLS_CLIENT,
            "cert_reqs": ssl.CERT_REQUIRED,
            "ca_certs": ca_file(tls_box),
        }
    flags: list[list[tuple[bool, bool, bool]]] = []

    def handler(message: Any) -> bool | None:
        if workload.handle(message.body, message.attempts):
            return True
        message.requeue(backoff=False, delay=0)
        return None

    async def scenario() -> None:
        reader = nsq.Reader(
            topic=TOPIC,
            channel=CHANNEL,
            message_handler=handler,
            nsqd_tcp_addresses=[address],
            max_in_flight=50,
            max_tries=0,
            **options,
        )
        writer = nsq.Writer([address], reconnect_interval=60.0, **options)
        results: list[object] = []
        try:
            await wait_for(lambda: any(c.connected() for c in writer.conns.values()), "writer")
            await wait_for(lambda: len(tls_box.addresses.nsqd.clients) == 2, "both connected")
            for body in workload.pub:
                writer.pub(TOPIC, body, callback=lambda conn, data: results.append(data))
            for batch in workload.mpub:
                writer.mpub(TOPIC, batch, callback=lambda conn, data: results.append(data))
            for body, delay in workload.dpub:
                writer.dpub(TOPIC, delay, body, callback=lambda conn, data: results.append(data))
            total = len(workload.pub) + len(workload.mpub) + len(workload.dpub)
            await wait_for(lambda: len(results) == total, "publish responses")
            assert results == [b"OK"] * total
            await wait_for(lambda: workload.done, "all messages finished")
            flags.append(connection_flags(tls_box))
        finally:
            reader.close()
            for conn in list(writer.conns.values()):
                conn.close()
            await asyncio.sleep(0)

    asyncio.run(scenario())
    workload.check()
    assert flags == [[expected_flags(features)] * 2]


# -- gnsq ----------------------------------------------------------------------------------


@pytest.fixture
def gevent_hub() -> Iterator[None]:
    yield
    gevent.get_hub().destroy(destroy_loop=True)


@pytest.mark.usefixtures("gevent_hub")
@pytest.mark.parametrize("features", FEATURES)
def test_gnsq(tls_box: ThreadedNSQD, workload: Any, wait: Any, features: dict[str, Any]) -> None:
    """gnsq's Consumer, and a bare NsqdTCPClient publishing.

    gnsq 1.0.2's ``Producer`` cannot upgrade a connection (against any nsqd): the
    ``OK`` that confirms an upgrade reaches its response handler before the
    connection has a response queue (``KeyError``). Its connection class can.
    """
    address = tls_box.tcp_address
    options = dict(features)
    if features.get("tls_v1"):
        options["tls_options"] = {"cert_reqs": ssl.CERT_REQUIRED, "ca_certs": ca_file(tls_box)}

    def handler(consumer: Any, message: Any) -> None:
        if not workload.handle(message.body, message.attempts):
            message.requeue(20, backoff=False)

    consumer = gnsq.Consumer(
        TOPIC,
        CHANNEL,
        address,
        message_handler=handler,
        max_in_flight=50,
        max_tries=0,
        max_backoff_duration=0.1,
        **options,
    )
    host, port = address.split(":")
    producer = gnsq.NsqdTCPClient(host, int(port), timeout=TIMEOUT, **options)
    try:
        consumer.start(block=False)
        producer.connect()
        producer.identify()
        wait(lambda: len(connection_flags(tls_box)) == 2, "both connected", sleep=gevent.sleep)
        assert connection_flags(tls_box) == [expected_flags(features)] * 2
        for body in workload.pub:
            producer.publish(TOPIC, body)
        for batch in workload.mpub:
            producer.multipublish(TOPIC, batch)
        for body, delay in workload.dpub:
            producer.publish(TOPIC, body, defer=delay)
        total = len(workload.pub) + len(workload.mpub) + len(workload.dpub)
        responses = [producer.read_response() for _ in range(total)]
        assert responses == [(gnsq.protocol.FRAME_TYPE_RESPONSE, b"OK")] * total
        wait(lambda: workload.done, "all messages finished", sleep=gevent.sleep)
    finally:
        producer.close_stream()
        consumer.close()
        consumer.join(timeout=TIMEOUT)
    workload.check()
