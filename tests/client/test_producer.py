"""The trio Producer against a real nsqbox nsqd (127.0.0.1, port 0)."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from nsqbox.client import Config, ConnectionClosed, NSQError, open_producer
from nsqbox.nsqd.server import NSQDAddresses
from tests.client.helpers import TIMEOUT, Node, RecordingProxy, tcp, wait_for
from tests.conftest import StartNSQD
from tests.helpers import RawConn


async def test_pub_mpub_dpub(nsqd: NSQDAddresses, autojump_clock: trio.testing.MockClock) -> None:
    with trio.fail_after(TIMEOUT):
        reader = await RawConn.open(nsqd.tcp)
        await reader.identify()
        await reader.sub("t", "c", rdy=10)
        async with open_producer(tcp(nsqd)) as producer:
            await producer.pub("t", b"one")
            await producer.mpub("t", [b"two", b"three"])
            await producer.dpub("t", b"later", delay=2.5)
        bodies = [(await reader.message()).body for _ in range(3)]
        assert bodies == [b"one", b"two", b"three"]
        channel = nsqd.nsqd.topics["t"].channels["c"]
        assert channel.deferred_count() == 1
        start = trio.current_time()
        assert (await reader.message()).body == b"later"
        assert trio.current_time() - start >= 2.0
        await reader.aclose()


async def test_commands_on_the_wire(nsqd: NSQDAddresses, nursery: trio.Nursery) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    with trio.fail_after(TIMEOUT):
        async with open_producer(proxy.address, config=Config(client_id="me")) as producer:
            await producer.pub("t", b"x")
            await producer.dpub("t", b"y", delay=1.5)
            await producer.mpub("t", [b"a", b"b"])
    assert proxy.commands() == [b"IDENTIFY", b"PUB t", b"DPUB t 1500", b"MPUB t"]


async def test_invalid_input_is_refused_before_the_wire(nsqd: NSQDAddresses) -> None:
    with trio.fail_after(TIMEOUT):
        async with open_producer(tcp(nsqd)) as producer:
            with pytest.raises(ValueError, match="topic"):
                await producer.pub("bad topic", b"x")
            with pytest.raises(ValueError, match="empty"):
                await producer.pub("t", b"")
            with pytest.raises(ValueError, match="at least one"):
                await producer.mpub("t", [])
            with pytest.raises(ValueError, match="delay"):
                await producer.dpub("t", b"x", delay=-1)
            assert producer.connected == 1


async def test_error_frame_raises_and_the_next_publish_reconnects(start_nsqd: StartNSQD) -> None:
    nsqd = await start_nsqd(max_msg_size=8)
    with trio.fail_after(TIMEOUT):
        async with open_producer(tcp(nsqd)) as producer:
            with pytest.raises(NSQError) as info:
                await producer.pub("t", b"x" * 9)
            assert info.value.code == "E_BAD_MESSAGE"
            assert info.value.fatal
            await producer.pub("t", b"ok")  # on a fresh connection
    assert nsqd.nsqd.topics["t"].message_count == 1


async def test_pool_spreads_concurrent_publishes(nsqd: NSQDAddresses) -> None:
    peak = 0

    def observe() -> None:
        nonlocal peak
        peak = max(peak, len(nsqd.nsqd.clients))

    with trio.fail_after(TIMEOUT):
        async with open_producer(tcp(nsqd), pool_size=3) as producer:

            async def publish(i: int) -> None:
                await producer.pub("t", b"m%d" % i)
                observe()

            async with trio.open_nursery() as nursery:
                for i in range(60):
                    nursery.start_soon(publish, i)
            assert 1 < producer.connected <= 3
    assert 1 < peak <= 3
    assert nsqd.nsqd.topics["t"].message_count == 60


async def test_reconnects_after_the_node_comes_back(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    node = Node(nursery, tmp_path / "n")
    await node.start()
    with trio.fail_after(TIMEOUT):
        async with open_producer(node.address) as producer:
            await producer.pub("t", b"before")
            await node.stop()
            with pytest.raises((ConnectionClosed, OSError)):
                await producer.pub("t", b"while down")
            await node.start()
            await producer.pub("t", b"after")
            assert node.addrs is not None
            assert node.addrs.nsqd.topics["t"].message_count >= 1


async def test_wrong_address_fails_on_open() -> None:
    with trio.fail_after(TIMEOUT), pytest.raises(OSError, match="connect"):
        async with open_producer("127.0.0.1:1"):
            pass  # pragma: no cover


async def test_pending_publish_fails_when_the_connection_drops(
    nsqd: NSQDAddresses, nursery: trio.Nursery
) -> None:
    proxy = RecordingProxy(nsqd.tcp)
    await nursery.start(proxy.serve)
    with trio.fail_after(TIMEOUT):
        async with open_producer(proxy.address) as producer:
            await producer.pub("t", b"x")
            await proxy.drop_all()
            await wait_for(lambda: producer.connected == 0)
            await producer.pub("t", b"y")  # the broken connection is replaced
    assert len(proxy.sent) == 2
