"""nsqd <-> nsqlookupd: two nsqd nodes and two lookupds, all real, in one trio run."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any

import trio
import trio.testing

from nsqbox.lookupd.server import LookupdAddresses
from nsqbox.nsqd.domain.nsqd import NSQD
from nsqbox.nsqd.lookup import (
    PING_INTERVAL,
    LookupService,
    lookup_loop,
    lookup_service,
    lookupd_http_addresses,
    set_lookupd_addresses,
)
from nsqbox.nsqd.server import NSQDAddresses
from nsqbox.wire.lookupd import (
    NEED_DATA,
    ConnectionClosed,
    Identify,
    LookupdV1Parser,
    encode_response,
)
from tests.conftest import StartNSQD
from tests.lookupd.lookupd_helpers import RunningLookupd, open_lookupd

TIMEOUT = 10.0


def tcp(lookupd: RunningLookupd) -> str:
    host, port = lookupd.addresses.tcp
    return f"{host}:{port}"


async def start_node(
    nursery: trio.Nursery,
    start_nsqd: StartNSQD,
    data_path: Path,
    *lookupds: RunningLookupd,
    **opts: Any,
) -> tuple[NSQDAddresses, LookupService]:
    """An nsqd registered with ``lookupds``, and its lookup service (started here if need be)."""
    await trio.Path(data_path).mkdir()
    addrs = await start_nsqd(
        data_path=str(data_path), lookupd_tcp_addresses=[tcp(x) for x in lookupds], **opts
    )
    service = lookup_service(addrs.nsqd)
    if service is None:  # serve_nsqd does not run the lookup loop (yet)
        service = await nursery.start(lookup_loop, addrs.nsqd)
    with trio.fail_after(TIMEOUT):
        await service.wait_synced()
    return addrs, service


async def synced(*services: LookupService) -> None:
    with trio.fail_after(TIMEOUT):
        for service in services:
            await service.wait_synced()


async def producer_ports(lookupd: RunningLookupd, topic: str) -> list[int]:
    found = await lookupd.get("/lookup", topic=topic)
    return sorted(p["tcp_port"] for p in found["producers"])


async def test_two_nodes_two_lookupds(
    nursery: trio.Nursery, start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    async with open_lookupd() as l1, open_lookupd() as l2:
        a, sa = await start_node(nursery, start_nsqd, tmp_path / "a", l1, l2)
        b, sb = await start_node(nursery, start_nsqd, tmp_path / "b", l1, l2)
        a.nsqd.get_topic("t").get_channel("c")
        a.nsqd.get_topic("t2").get_channel("e#ephemeral")
        await synced(sa)
        response = await l1.http.post("/channel/create", params={"topic": "t2", "channel": "d"})
        assert response.status_code == 200

        # b learns the channels lookupd knows before its topic delivers anything
        tb = b.nsqd.get_topic("t")
        tb.put_message(b"early")
        t2b = b.nsqd.get_topic("t2")
        assert not tb.started
        await synced(sa, sb)
        assert tb.started
        assert list(tb.channels) == ["c"]
        assert tb.channels["c"].depth() == 1
        assert list(t2b.channels) == ["d"]  # ephemeral channels are not pre-created

        ports = sorted([a.tcp[1], b.tcp[1]])
        for lookupd in (l1, l2):
            assert await producer_ports(lookupd, "t") == ports
            assert await producer_ports(lookupd, "t2") == ports
            assert (await lookupd.get("/lookup", topic="t"))["channels"] == ["c"]
            nodes = (await lookupd.get("/nodes"))["producers"]
            by_port = {n["tcp_port"]: n for n in nodes}
            assert sorted(by_port) == ports
            assert sorted(by_port[a.tcp[1]]["topics"]) == ["t", "t2"]
            node = by_port[b.tcp[1]]
            assert node["broadcast_address"] == "127.0.0.1"
            assert b.http is not None
            assert node["http_port"] == b.http[1]
            assert node["version"] == "1.3.0"
            assert node["hostname"] == b.nsqd.hostname
        assert sorted(lookupd_http_addresses(a.nsqd)) == sorted(
            f"{h}:{p}" for h, p in (l1.addresses.http, l2.addresses.http)
        )


async def test_deletes_unregister(
    nursery: trio.Nursery, start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    async with open_lookupd() as lookupd:
        a, sa = await start_node(nursery, start_nsqd, tmp_path / "a", lookupd)
        b, sb = await start_node(nursery, start_nsqd, tmp_path / "b", lookupd)
        for node in (a, b):
            node.nsqd.get_topic("t").get_channel("c")
            node.nsqd.get_topic("e#ephemeral").get_channel("x#ephemeral")
        await synced(sa, sb)
        assert await producer_ports(lookupd, "t") == sorted([a.tcp[1], b.tcp[1]])

        # deleting a topic on one node unregisters that node only; the key stays
        assert a.nsqd.delete_existing_topic("t")
        await synced(sa)
        assert await producer_ports(lookupd, "t") == [b.tcp[1]]
        b.nsqd.topics["t"].delete_existing_channel("c")
        await synced(sb)
        debug = await lookupd.get("/debug")
        assert "channel:t:c" not in debug
        assert (await lookupd.get("/lookup", topic="t"))["channels"] == ["c"]

        # an ephemeral topic's key goes when its last producer leaves
        assert a.nsqd.delete_existing_topic("e#ephemeral")
        await synced(sa)
        assert "e#ephemeral" in (await lookupd.get("/topics"))["topics"]
        b.nsqd.topics["e#ephemeral"].delete_existing_channel("x#ephemeral")  # deletes the topic
        await synced(sb)
        assert "e#ephemeral" not in b.nsqd.topics
        assert "e#ephemeral" not in (await lookupd.get("/topics"))["topics"]
        response = await lookupd.http.get("/lookup", params={"topic": "e#ephemeral"})
        assert (response.status_code, response.json()) == (404, {"message": "TOPIC_NOT_FOUND"})
        assert await lookupd.get("/channels", topic="e#ephemeral") == {"channels": []}


async def test_pings_keep_a_node_active(
    nursery: trio.Nursery,
    start_nsqd: StartNSQD,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd(inactive_producer_timeout=PING_INTERVAL + 5) as lookupd:
        a, _ = await start_node(nursery, start_nsqd, tmp_path / "a", lookupd)
        a.nsqd.get_topic("t")
        await trio.sleep(10 * PING_INTERVAL)
        assert await producer_ports(lookupd, "t") == [a.tcp[1]]


@asynccontextmanager
async def lookupd_on(addresses: LookupdAddresses) -> AsyncIterator[RunningLookupd]:
    """A fresh lookupd on the ports an earlier one used."""
    (host, tcp_port), (_, http_port) = addresses.tcp, addresses.http
    async with open_lookupd(
        tcp_address=f"{host}:{tcp_port}", http_address=f"{host}:{http_port}"
    ) as lookupd:
        yield lookupd


async def test_lookupd_restart_reregisters_within_one_cycle(
    nursery: trio.Nursery,
    start_nsqd: StartNSQD,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd() as first:
        a, sa = await start_node(nursery, start_nsqd, tmp_path / "a", first)
        b, sb = await start_node(nursery, start_nsqd, tmp_path / "b", first)
        a.nsqd.get_topic("t").get_channel("c")
        b.nsqd.get_topic("u")
        await synced(sa, sb)
        addresses = first.addresses
    await trio.testing.wait_all_tasks_blocked()  # both nsqds have seen the lookupd go
    async with lookupd_on(addresses) as second:
        assert await second.get("/topics") == {"topics": []}
        with trio.fail_after(PING_INTERVAL + 1):
            await sa.wait_synced()
            await sb.wait_synced()
        assert await producer_ports(second, "t") == [a.tcp[1]]
        assert await producer_ports(second, "u") == [b.tcp[1]]
        assert await second.get("/channels", topic="t") == {"channels": ["c"]}


async def test_lookupd_down_does_not_block_new_topics(
    nursery: trio.Nursery,
    start_nsqd: StartNSQD,
    tmp_path: Path,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_lookupd() as first:
        a, sa = await start_node(nursery, start_nsqd, tmp_path / "a", first)
        addresses = first.addresses
    await trio.testing.wait_all_tasks_blocked()
    topic = a.nsqd.get_topic("t")  # lookupd is gone: the channel query fails, the topic starts
    await trio.testing.wait_all_tasks_blocked()
    assert topic.started
    async with lookupd_on(addresses) as second:
        with trio.fail_after(PING_INTERVAL + 1):
            await sa.wait_synced()
        assert await producer_ports(second, "t") == [a.tcp[1]]


async def test_addresses_change_at_runtime(
    nursery: trio.Nursery, start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    async with open_lookupd() as l1, open_lookupd() as l2:
        a, sa = await start_node(nursery, start_nsqd, tmp_path / "a", l1)
        a.nsqd.get_topic("t")
        await synced(sa)
        assert await l2.get("/topics") == {"topics": []}

        set_lookupd_addresses(a.nsqd, [tcp(l1), tcp(l2)])
        await synced(sa)
        assert await producer_ports(l2, "t") == [a.tcp[1]]
        assert a.nsqd.options.lookupd_tcp_addresses == [tcp(l1), tcp(l2)]

        set_lookupd_addresses(a.nsqd, [tcp(l2)])
        await synced(sa)
        await trio.testing.wait_all_tasks_blocked()  # l1 sees the connection close
        assert await producer_ports(l1, "t") == []
        assert await l1.get("/nodes") == {"producers": []}
        assert await producer_ports(l2, "t") == [a.tcp[1]]


async def test_broadcast_options_are_what_lookupd_is_told(
    nursery: trio.Nursery, start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    async with open_lookupd() as lookupd:
        a, _ = await start_node(
            nursery,
            start_nsqd,
            tmp_path / "a",
            lookupd,
            broadcast_address="nsqd.example",
            broadcast_tcp_port=1234,
            broadcast_http_port=5678,
        )
        nodes = (await lookupd.get("/nodes"))["producers"]
        assert [(n["broadcast_address"], n["tcp_port"], n["http_port"]) for n in nodes] == [
            ("nsqd.example", 1234, 5678)
        ]
        assert isinstance(a.nsqd, NSQD)


async def test_loop_exit_restores_topic_hook(start_nsqd: StartNSQD, tmp_path: Path) -> None:
    addrs = await start_nsqd(data_path=str(tmp_path))
    nsqd = addrs.nsqd
    if lookup_service(nsqd) is not None:  # serve_nsqd runs the loop itself: nothing to check
        return
    default_hook = nsqd.on_new_topic
    async with trio.open_nursery() as nursery:
        service: LookupService = await nursery.start(lookup_loop, nsqd)
        assert lookup_service(nsqd) is service
        assert nsqd.on_new_topic != default_hook
        nursery.cancel_scope.cancel()
    assert lookup_service(nsqd) is None
    assert nsqd.on_new_topic == default_hook
    assert nsqd.get_topic("t").started


async def fake_lookupd(stream: trio.SocketStream, http_port: int) -> None:
    """A V1 peer that says its HTTP API is on ``http_port`` and accepts everything."""
    parser = LookupdV1Parser()
    async with stream:
        while True:
            event = parser.next_event()
            if event is NEED_DATA:
                parser.receive_data(await stream.receive_some())
            elif isinstance(event, ConnectionClosed):
                return
            elif isinstance(event, Identify):
                info = {"broadcast_address": "127.0.0.1", "http_port": http_port, "tcp_port": 1}
                await stream.send_all(encode_response(json.dumps(info).encode()))
            else:
                await stream.send_all(encode_response(b"OK"))


async def test_stopping_mid_query_still_starts_the_topic(
    nursery: trio.Nursery, start_nsqd: StartNSQD, tmp_path: Path
) -> None:
    # an "HTTP API" that accepts connections and never answers
    silent_http = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    silent_port = silent_http.socket.getsockname()[1]
    v1 = (await trio.open_tcp_listeners(0, host="127.0.0.1"))[0]
    v1_port = v1.socket.getsockname()[1]
    accepted: list[trio.SocketStream] = []

    async def hold(stream: trio.SocketStream) -> None:
        accepted.append(stream)
        await trio.sleep_forever()

    await nursery.start(trio.serve_listeners, hold, [silent_http])
    await nursery.start(trio.serve_listeners, partial(fake_lookupd, http_port=silent_port), [v1])

    addrs = await start_nsqd(
        data_path=str(tmp_path), lookupd_tcp_addresses=[f"127.0.0.1:{v1_port}"]
    )
    if lookup_service(addrs.nsqd) is not None:  # serve_nsqd runs the loop: cannot stop it here
        return
    async with trio.open_nursery() as loop_nursery:
        service: LookupService = await loop_nursery.start(lookup_loop, addrs.nsqd)
        with trio.fail_after(TIMEOUT):
            await service.wait_synced()
        assert service.http_addresses() == [f"127.0.0.1:{silent_port}"]
        topic = addrs.nsqd.get_topic("t")
        with trio.fail_after(TIMEOUT):
            while not accepted:
                await trio.testing.wait_all_tasks_blocked()
        assert not topic.started  # still waiting on the silent HTTP API
        loop_nursery.cancel_scope.cancel()
    assert topic.started
