"""The blocking client (plain sockets, no trio in the caller) against real nsqbox servers.

These are synchronous tests: the servers run on a trio loop in a background
thread (:class:`TrioThread`), the client in the test's own thread.
"""

from __future__ import annotations

import logging
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from itertools import islice
from pathlib import Path
from typing import Any

import msgspec
import pytest
import trustme

from nsqbox.client import Config, ConnectionClosed, HandshakeError, Message, NSQError
from nsqbox.client.blocking import BlockingConsumer, Publisher, lookup_nsqds
from nsqbox.client.sync_conn import SyncConnection
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd
from nsqbox.testing import ClusterSpec, NSQBox, ThreadBox
from tests.client.fake_nsqd import FakeNSQD
from tests.client.helpers import SECRET, TrioThread, serve_auth, tcp
from tests.conftest import make_options


@pytest.fixture
def trio_thread() -> Iterator[TrioThread]:
    with TrioThread() as thread:
        yield thread


def start(thread: TrioThread, **overrides: Any) -> NSQDAddresses:
    overrides.setdefault("data_path", tempfile.mkdtemp(prefix="nsqbox-client-"))
    addrs: NSQDAddresses = thread.start(serve_nsqd, make_options(**overrides))
    return addrs


@pytest.fixture
def nsqd(trio_thread: TrioThread) -> NSQDAddresses:
    return start(trio_thread)


def channel_state_now(nsqd: NSQDAddresses) -> tuple[int, int, int]:
    """(depth, in flight, deferred) of t/c; call on the server's thread."""
    ch = nsqd.nsqd.topics["t"].channels["c"]
    return ch.depth(), ch.in_flight_count(), ch.deferred_count()


def channel_state(thread: TrioThread, nsqd: NSQDAddresses) -> tuple[int, int, int]:
    """(depth, in flight, deferred) of t/c, read on the server's thread."""
    result: tuple[int, int, int] = thread.call(lambda: channel_state_now(nsqd))
    return result


def test_publish_and_consume(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.pub("t", b"one")
        publisher.mpub("t", [b"two", b"three"])
        publisher.dpub("t", b"later", delay=0.2)
    config = Config(max_in_flight=10)
    with BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer:
        bodies = []
        for message in consumer.messages(timeout=5.0):
            bodies.append(message.body)
            message.finish()
            if len(bodies) == 4:
                break
        assert consumer.total_rdy == 10
    assert bodies == [b"one", b"two", b"three", b"later"]
    assert channel_state(trio_thread, nsqd) == (0, 0, 0)


def test_run_with_auto_answers_requeue_and_give_up(
    trio_thread: TrioThread, nsqd: NSQDAddresses, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG, logger="nsqbox.client")
    with Publisher(tcp(nsqd)) as publisher:
        publisher.mpub("t", [b"ok-%d" % i for i in range(5)] + [b"poison"])
    given_up: list[Message] = []
    handled: list[tuple[bytes, int]] = []

    def handler(message: Message) -> None:
        handled.append((message.body, message.attempts))
        if message.body == b"poison":
            raise ValueError("cannot process")

    config = Config(max_in_flight=3, max_attempts=2, requeue_delay=0, max_backoff_duration=0)
    with BlockingConsumer(
        tcp(nsqd), "t", "c", config=config, on_give_up=given_up.append
    ) as consumer:
        count = consumer.run(handler, max_messages=8, timeout=5.0)
    assert count == 8
    assert sorted(handled) == sorted(
        [(b"ok-%d" % i, 1) for i in range(5)] + [(b"poison", 1), (b"poison", 2)]
    )
    assert [(m.body, m.attempts) for m in given_up] == [(b"poison", 3)]
    assert channel_state(trio_thread, nsqd) == (0, 0, 0)
    # raising is the documented way to requeue, and on_give_up is set: nothing above INFO,
    # one line per failure, the traceback only at DEBUG
    mine = [r for r in caplog.records if r.name == "nsqbox.client"]
    assert [r.levelname for r in mine if r.levelno >= logging.WARNING] == []
    info = [r.getMessage() for r in mine if r.levelno == logging.INFO]
    assert sum("handler raised ValueError('cannot process')" in m for m in info) == 2
    assert sum("giving up on message" in m and "after 3 attempts" in m for m in info) == 1
    assert all(r.exc_info is None for r in mine if r.levelno > logging.DEBUG)
    assert any(r.exc_info is not None for r in mine if r.levelno == logging.DEBUG)


def test_give_up_without_a_callback_warns(
    trio_thread: TrioThread, nsqd: NSQDAddresses, caplog: pytest.LogCaptureFixture
) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.pub("t", b"poison")

    def handler(message: Message) -> None:
        raise ValueError("cannot process")

    config = Config(max_attempts=1, requeue_delay=0, max_backoff_duration=0)
    with BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer:
        assert consumer.run(handler, max_messages=2, timeout=5.0) == 2
    warnings = [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING]
    assert len(warnings) == 1
    assert "giving up on message" in warnings[0]
    assert channel_state(trio_thread, nsqd) == (0, 0, 0)


def test_backoff_in_the_blocking_consumer(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.pub("t", b"flaky")
    attempts: list[int] = []

    def handler(message: Message) -> None:
        attempts.append(message.attempts)
        if message.attempts == 1:
            message.requeue(delay=0.1)  # back after the 20ms backoff: the test message

    config = Config(max_in_flight=2, backoff_multiplier=0.01)
    with BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer:
        consumer.run(handler, max_messages=2, timeout=5.0)
        assert not consumer._rdy.in_backoff
        assert consumer.total_rdy == 2
    assert attempts == [1, 2]


def test_touch_and_explicit_requeue(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.pub("t", b"x")
    with BlockingConsumer(tcp(nsqd), "t", "c") as consumer:
        message = next(consumer.messages(timeout=5.0))
        consumer.touch(message)
        message.requeue(delay=60.0, backoff=False)
        trio_thread.wait_for(lambda: channel_state_now(nsqd) == (0, 0, 1))


def test_is_starved(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.mpub("t", [b"%d" % i for i in range(4)])
    held = []
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=4)) as consumer:
        for message in consumer.messages(timeout=5.0):
            held.append(message)
            if len(held) == 4:
                break
        assert consumer.is_starved()
        for message in held:
            message.finish()
        assert not consumer.is_starved()


def test_publisher_errors_and_reconnects(trio_thread: TrioThread) -> None:
    nsqd = start(trio_thread, max_msg_size=8)
    with Publisher(tcp(nsqd)) as publisher:
        with pytest.raises(NSQError) as info:
            publisher.pub("t", b"x" * 9)
        assert info.value.code == "E_BAD_MESSAGE"
        publisher.pub("t", b"fine")  # a new connection
        with pytest.raises(ValueError, match="topic"):
            publisher.pub("no spaces", b"x")


def test_consumer_sees_the_connection_go(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    consumer = BlockingConsumer(tcp(nsqd), "t", "c")

    def close_clients() -> None:
        for client in list(nsqd.nsqd.clients.values()):
            client.close()

    trio_thread.call(close_clients)
    with pytest.raises(ConnectionClosed):
        for _ in consumer.messages(timeout=5.0):
            pass  # pragma: no cover
    consumer.close()


@pytest.mark.parametrize("feature", ["snappy", "deflate"])
def test_compression(trio_thread: TrioThread, nsqd: NSQDAddresses, feature: str) -> None:
    config = Config(**{feature: True})  # type: ignore[arg-type]
    with Publisher(tcp(nsqd), config=config) as publisher:
        publisher.mpub("t", [b"a" * 10000, b"b" * 100000])
    with BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer:
        assert consumer.run(lambda m: None, max_messages=2, timeout=5.0) == 2

        def flags() -> list[bool]:
            return [getattr(c, feature) for c in nsqd.nsqd.clients.values()]

        assert trio_thread.call(flags) == [True]


@pytest.mark.parametrize("feature", ["snappy", "deflate"])
def test_bytes_buffered_before_the_upgrade(trio_thread: TrioThread, feature: str) -> None:
    reply = msgspec.json.encode({"max_rdy_count": 50, feature: True})
    fake = FakeNSQD(reply, upgrade=feature)
    trio_thread.start(fake.serve)
    fake.messages = [b"hello"]
    config = Config(**{feature: True})  # type: ignore[arg-type]
    with BlockingConsumer(fake.address, "t", "c", config=config) as consumer:
        assert [m.body for m in islice(consumer.messages(timeout=5.0), 1)] == [b"hello"]


def test_old_nsqd_means_max_rdy_2500(trio_thread: TrioThread) -> None:
    fake = FakeNSQD(b"OK")
    trio_thread.start(fake.serve)
    fake.messages = [b"m"]
    with BlockingConsumer(fake.address, "t", "c", config=Config(max_in_flight=9000)) as consumer:
        assert consumer.run(lambda m: None, max_messages=1) == 1
        assert consumer.total_rdy == 2500


@pytest.fixture(scope="module")
def tls_pem(tmp_path_factory: pytest.TempPathFactory) -> tuple[trustme.CA, str]:
    ca = trustme.CA()
    path = tmp_path_factory.mktemp("tls") / "server.pem"
    ca.issue_cert("127.0.0.1").private_key_and_cert_chain_pem.write_to_path(str(path))
    return ca, str(path)


@pytest.mark.parametrize("compression", [{}, {"snappy": True}, {"deflate": True}])
def test_tls(
    trio_thread: TrioThread, tls_pem: tuple[trustme.CA, str], compression: dict[str, bool]
) -> None:
    ca, pem = tls_pem
    nsqd = start(trio_thread, tls_cert=pem, tls_key=pem)
    context = ssl.create_default_context()
    ca.configure_trust(context)
    config = Config(tls=context, **compression)  # type: ignore[arg-type]
    with Publisher(tcp(nsqd), config=config) as publisher:
        publisher.pub("t", b"encrypted")
    with BlockingConsumer(tcp(nsqd), "t", "c", config=config) as consumer:
        assert [m.body for m in islice(consumer.messages(timeout=5.0), 1)] == [b"encrypted"]
    with pytest.raises(HandshakeError, match="TLS"):
        SyncConnection(tcp(nsqd), Config(tls=ssl.create_default_context()))


def test_auth(trio_thread: TrioThread) -> None:
    auth_address = trio_thread.start(serve_auth)
    nsqd = start(trio_thread, auth_http_addresses=[auth_address])
    conn = SyncConnection(tcp(nsqd), Config(auth_secret=SECRET))
    assert conn.auth is not None
    assert conn.auth.identity == "tester"
    conn.close()
    with Publisher(tcp(nsqd), config=Config(auth_secret=SECRET)) as publisher:
        publisher.pub("t", b"authorized")
    with pytest.raises(HandshakeError, match="auth_secret"):
        SyncConnection(tcp(nsqd), Config())
    with pytest.raises(NSQError, match="E_UNAUTHORIZED"):
        SyncConnection(tcp(nsqd), Config(auth_secret="wrong"))


def test_the_blocking_client_does_not_import_trio() -> None:
    code = (
        "import sys, nsqbox.client.blocking, nsqbox.client; "
        "from nsqbox.client import Config, Message; "
        "print(sorted(m for m in ('trio', 'httpx', 'anyio') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_receive_and_batched_answers(trio_thread: TrioThread, nsqd: NSQDAddresses) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.mpub("t", [b"%d" % i for i in range(5)])
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=5)) as consumer:
        got: list[Message] = []
        while len(got) < 5:
            got += consumer.receive(timeout=5.0)
        with consumer.batched_answers():
            for message in got:
                message.finish()
            assert channel_state(trio_thread, nsqd)[1] == 5  # nothing sent yet
        trio_thread.wait_for(lambda: channel_state_now(nsqd) == (0, 0, 0))


def test_leaving_the_block_requeues_what_was_taken_and_not_answered(
    trio_thread: TrioThread, nsqd: NSQDAddresses
) -> None:
    with Publisher(tcp(nsqd)) as publisher:
        publisher.mpub("t", [b"a", b"b", b"c"])
    taken: list[Message] = []
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=3)) as consumer:
        while len(taken) < 3:
            batch = consumer.receive(timeout=5.0)
            assert batch, "no message within 5 s"
            taken.extend(batch)
        taken[0].finish()
    # (depth, in flight, deferred): the two unanswered ones are back on the channel now
    assert channel_state(trio_thread, nsqd) == (2, 0, 0)
    assert all(m.has_responded for m in taken)
    with BlockingConsumer(tcp(nsqd), "t", "c", config=Config(max_in_flight=2)) as consumer:
        again = list(islice(consumer.messages(timeout=5.0), 2))
        for message in again:
            message.finish()
    assert sorted((m.body, m.attempts) for m in again) == [(b"b", 2), (b"c", 2)]
    assert channel_state(trio_thread, nsqd) == (0, 0, 0)


def test_lookup_nsqds(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    box = ThreadBox(ClusterSpec(nsqd=2), str(tmp_path))
    try:
        with NSQBox(box, timeout=10.0) as handle:
            handle.publish("t", b"x", node=0)
            handle.publish("t", b"y", node=1)
            handle.wait_for_producers("t", 2)
            lookupd = handle.lookupd_http_address
            assert lookupd is not None
            both = sorted(str(a) for a in handle.nsqd_tcp_addresses)
            assert lookup_nsqds([str(lookupd)], "t") == both
            assert lookup_nsqds(lookupd.url, "t") == both  # one address, as a URL
            assert lookup_nsqds(str(lookupd), "no-such-topic") == []
            # a lookupd that is down is skipped while another answers...
            assert lookup_nsqds(["127.0.0.1:1", str(lookupd)], "t") == both
            assert "lookupd http://127.0.0.1:1/lookup?topic=t query error" in caplog.text
            # ... and is an error when none answers
            with pytest.raises(ConnectionError, match="no nsqlookupd answered"):
                lookup_nsqds(["127.0.0.1:1"], "t")
            bodies = []
            for address in lookup_nsqds(str(lookupd), "t"):  # one consumer per nsqd
                with BlockingConsumer(address, "t", "c") as consumer:
                    for message in islice(consumer.messages(timeout=5.0), 1):
                        bodies.append(message.body)
                        message.finish()
            assert sorted(bodies) == [b"x", b"y"]
    finally:
        box.stop()
