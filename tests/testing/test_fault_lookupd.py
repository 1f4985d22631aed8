"""nsqlookupd faults through ``nsqbox.faults``: consumers that discover through nsqlookupd
find nothing while it hides the producers or stops answering, and recover when it
answers again. pynsq (tornado) in thread mode; nsqbox's own consumer in trio mode on an
autojump clock, so "for 30 s" takes no time. Also the routes in subprocess mode.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from nsqbox.client import Config
from nsqbox.client.consumer import open_consumer
from nsqbox.client.message import Message
from nsqbox.testing import NSQBox
from nsqbox.testing.config import Address, BoxAddresses, ClusterSpec
from nsqbox.testing.faults import FaultInfo, FaultsUnsupported
from nsqbox.testing.faults_http import HTTPFaults
from nsqbox.testing.trio_box import open_trio_box

from .conftest import TIMEOUT


@pytest.mark.parametrize("kind", ["hide_producers", "lookupd_down"])
def test_pynsq_reader_discovers_the_node_once_lookupd_answers(handle: NSQBox, kind: str) -> None:
    nsq = pytest.importorskip("nsq")
    import tornado.ioloop

    topic = handle.name("orders")
    handle.publish(topic, b"order 1")  # nsqlookupd lists the node when this returns
    if kind == "hide_producers":
        fault = handle.faults.hide_producers(topic)
    else:
        fault = handle.faults.lookupd_down()
    (listed,) = handle.faults.active()
    assert (listed.server, listed.kind) == ("lookupd", kind)
    received: list[bytes] = []
    connected_while_faulty: list[int] = []
    loop = tornado.ioloop.IOLoop()  # a private loop, closed below

    def handle_message(message: Any) -> bool:
        received.append(bytes(message.body))
        loop.stop()
        return True

    async def make_reader() -> Any:
        return nsq.Reader(
            topic=topic,
            channel="work",
            lookupd_http_addresses=[handle.lookupd_http_address.url],
            message_handler=handle_message,
            lookupd_poll_interval=1,
            lookupd_request_timeout=1,
        )

    def lift() -> None:
        connected_while_faulty.append(len(reader.conns))
        assert fault.lift()

    reader = loop.run_sync(make_reader)
    loop.call_later(1.5, lift)  # after its first queries (or while they wait)
    timeout = loop.call_later(TIMEOUT, loop.stop)
    loop.start()
    loop.remove_timeout(timeout)
    reader.close()
    loop.close(all_fds=True)
    assert connected_while_faulty == [0]  # nsqlookupd told it of no nsqd
    assert received == [b"order 1"]


@pytest.mark.parametrize("kind", ["hide_producers", "lookupd_down"])
async def test_trio_consumer_discovers_again_after_a_lookupd_fault(
    tmp_path: Path, autojump_clock: trio.testing.MockClock, kind: str
) -> None:
    async with trio.open_nursery() as nursery:
        box = await open_trio_box(nursery, ClusterSpec(), str(tmp_path))
        await box.publish("orders", b"order 1")
        if kind == "hide_producers":
            box.faults.hide_producers("orders", duration=30)
        else:
            box.faults.lookupd_down(duration=30)
        started = trio.current_time()
        got: list[bytes] = []
        arrived = trio.Event()

        def take(message: Message) -> None:
            got.append(message.body)
            arrived.set()

        config = Config(lookupd_poll_interval=1.0, lookupd_poll_timeout=2.0)
        async with open_consumer(
            "orders",
            "work",
            take,
            lookupd_http_addresses=[box.lookupd_http_address.url],
            config=config,
        ):
            with trio.fail_after(120):
                await arrived.wait()
            # it polled all along; only when the fault ended did it find the node
            assert trio.current_time() - started >= 30
        assert got == [b"order 1"]
        assert box.faults.active() == []
        await box.aclose()


def test_lookupd_faults_over_http_in_subprocess_mode(remote: NSQBox) -> None:
    topic = remote.name("orders")
    remote.publish(topic, b"x")
    lookup = f"{remote.lookupd_http_address.url}/lookup"
    with remote.faults.hide_producers(topic) as hidden:
        assert isinstance(hidden.info, FaultInfo)
        assert (hidden.info.server, hidden.info.topic) == ("lookupd", topic)
        assert remote.faults.active() == [hidden.info]
        answer = httpx.get(lookup, params={"topic": topic}, timeout=TIMEOUT).json()
        assert answer["producers"] == []
    answer = httpx.get(lookup, params={"topic": topic}, timeout=TIMEOUT).json()
    assert len(answer["producers"]) == 1
    remote.faults.lookupd_down(duration=60)
    with pytest.raises(httpx.ReadTimeout):
        httpx.get(f"{remote.lookupd_http_address.url}/ping", timeout=0.2)
    assert remote.faults.lift_all() == 1
    assert httpx.get(f"{remote.lookupd_http_address.url}/ping", timeout=TIMEOUT).text == "OK"


def test_a_real_lookupd_has_no_faults(handle: NSQBox, not_nsqbox: Address) -> None:
    addresses = BoxAddresses(
        nsqd_tcp=handle.addresses.nsqd_tcp,
        nsqd_http=handle.addresses.nsqd_http,
        lookupd_http=(not_nsqbox,),
    )
    faults = HTTPFaults(addresses, timeout=TIMEOUT)
    with pytest.raises(FaultsUnsupported, match="faults need nsqbox's lookupd"):
        faults.hide_producers("orders")
    with faults.fail_publishes(count=1) as fault:  # the nsqd is nsqbox's
        assert faults.active() == [fault.info]  # the lookupd without routes is skipped
    assert faults.lift_all() == 0
