"""The Consumer over several nsqd nodes: discovery, nodes that go away, RDY across nodes."""

from __future__ import annotations

from pathlib import Path

import trio

from nsqbox.client import Config, open_consumer
from tests.client.helpers import (
    Collector,
    Node,
    lookupd_http,
    lookupd_tcp,
    start_lookupd,
    wait_for,
)


async def start_nodes(
    nursery: trio.Nursery, tmp_path: Path, count: int, **kw: object
) -> list[Node]:
    nodes = [Node(nursery, tmp_path / f"nsqd{i}", **kw) for i in range(count)]
    for node in nodes:
        await node.start()
    return nodes


class ReadySampler:
    """Sums the ready_count nsqd holds for every consumer connection, as often as it can."""

    def __init__(self, nodes: list[Node]) -> None:
        self.nodes = nodes
        self.peak = 0
        self.samples = 0

    def sample(self) -> None:
        total = sum(client.ready_count for node in self.nodes for client in node.clients)
        self.peak = max(self.peak, total)
        self.samples += 1

    async def run(self) -> None:
        while True:
            self.sample()
            await trio.sleep(0.01)


async def test_two_nodes_found_through_lookupd(nursery: trio.Nursery, tmp_path: Path) -> None:
    lookupd = await start_lookupd(nursery)
    nodes = await start_nodes(nursery, tmp_path, 2, lookupd_tcp_addresses=[lookupd_tcp(lookupd)])
    sent = set()
    for i, node in enumerate(nodes):
        bodies = [b"node%d-%d" % (i, j) for j in range(5)]
        node.publish("t", *bodies)
        sent.update(bodies)
        await node.synced()
    handler = Collector(expected=10)
    # a poll interval of an hour: finding both nodes proves the first query goes out at start
    config = Config(max_in_flight=10, lookupd_poll_interval=3600.0)
    async with open_consumer(
        "t", "c", handler, lookupd_http_addresses=[lookupd_http(lookupd)], config=config
    ) as consumer:
        await handler.wait()
        assert set(consumer.connections) == {node.address for node in nodes}
    assert set(handler.bodies) == sent


async def test_lookupd_answers_are_merged(nursery: trio.Nursery, tmp_path: Path) -> None:
    # each nsqd registers with its own lookupd; the consumer asks both
    lookupds = [await start_lookupd(nursery) for _ in range(2)]
    nodes = [
        Node(nursery, tmp_path / f"n{i}", lookupd_tcp_addresses=[lookupd_tcp(lookupds[i])])
        for i in range(2)
    ]
    for node in nodes:
        await node.start()
        node.publish("t", b"from " + node.address.encode())
        await node.synced()
    handler = Collector(expected=2)
    async with open_consumer(
        "t",
        "c",
        handler,
        lookupd_http_addresses=[lookupd_http(x) for x in lookupds],
        config=Config(max_in_flight=2),
    ) as consumer:
        await handler.wait()
        assert len(consumer.connections) == 2


async def test_a_node_known_to_two_lookupds_gets_one_connection(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lookupds = [await start_lookupd(nursery) for _ in range(2)]
    nodes = await start_nodes(
        nursery, tmp_path, 2, lookupd_tcp_addresses=[lookupd_tcp(x) for x in lookupds]
    )
    for node in nodes:
        node.publish("t", b"from " + node.address.encode())
        await node.synced()
    handler = Collector(expected=2)
    async with open_consumer(
        "t",
        "c",
        handler,
        lookupd_http_addresses=[lookupd_http(x) for x in lookupds],
        config=Config(max_in_flight=2, lookupd_poll_interval=0.05, lookupd_poll_jitter=0.0),
    ) as consumer:
        await handler.wait()
        await trio.sleep(1.0)  # twenty more polls find the same two nodes again
        assert sorted(consumer.connections) == sorted(node.address for node in nodes)
        # merged by broadcast_address:tcp_port: one connection per node, never two
        assert [len(node.clients) for node in nodes] == [1, 1]


async def test_node_found_through_lookupd_goes_away_and_comes_back(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    lookupd = await start_lookupd(nursery)
    (node,) = await start_nodes(nursery, tmp_path, 1, lookupd_tcp_addresses=[lookupd_tcp(lookupd)])
    node.publish("t", b"before")
    await node.synced()
    handler = Collector(expected=1)
    config = Config(max_in_flight=4, lookupd_poll_interval=5.0)
    async with open_consumer(
        "t", "c", handler, lookupd_http_addresses=[lookupd_http(lookupd)], config=config
    ) as consumer:
        await handler.wait()
        assert node.addrs is not None
        channel = node.addrs.nsqd.topics["t"].channels["c"]
        await wait_for(lambda: channel.in_flight_count() == 0)  # our FIN arrived
        await node.stop()
        await wait_for(lambda: not consumer.connections)
        await node.start()  # same port and data: topic and channel come back from nsqd.dat
        await node.synced()
        await wait_for(lambda: len(consumer.connections) == 1, within=30)
        handler.expected, handler.done = 2, trio.Event()
        node.publish("t", b"after")
        await handler.wait()
    assert handler.bodies == [b"before", b"after"]


async def test_direct_node_goes_away_and_comes_back(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    (node,) = await start_nodes(nursery, tmp_path, 1)
    handler = Collector(expected=1)
    config = Config(reconnect_delay=8.0, max_reconnect_delay=32.0)
    async with open_consumer(
        "t", "c", handler, nsqd_tcp_addresses=[node.address], config=config
    ) as consumer:
        await wait_for(lambda: len(consumer.connections) == 1)
        await node.stop()
        down = trio.current_time()
        await wait_for(lambda: not consumer.connections)
        await trio.sleep(30)  # attempts at 8s and 24s fail; the next one is at 56s
        await node.start()
        await wait_for(lambda: len(consumer.connections) == 1, within=60)
        assert trio.current_time() - down >= 56
        node.publish("t", b"back")
        await handler.wait()


async def test_max_in_flight_1_over_three_connections_drains_every_node(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    nodes = await start_nodes(nursery, tmp_path, 3)
    sent = set()
    for i, node in enumerate(nodes):
        bodies = [b"n%d-%d" % (i, j) for j in range(4)]
        node.publish("t", *bodies)
        sent.update(bodies)
    sampler = ReadySampler(nodes)
    nursery.start_soon(sampler.run)
    handler = Collector(expected=12)
    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[n.address for n in nodes],
        config=Config(max_in_flight=1),
    ) as consumer:
        await handler.wait(within=600)
        assert len(consumer.connections) == 3
        assert consumer.total_rdy <= 1
    assert set(handler.bodies) == sent
    assert sampler.samples > 100
    assert sampler.peak == 1


async def test_sum_of_ready_counts_never_exceeds_max_in_flight(
    nursery: trio.Nursery, tmp_path: Path, autojump_clock: trio.testing.MockClock
) -> None:
    nodes = await start_nodes(nursery, tmp_path, 3)
    sampler = ReadySampler(nodes)
    nursery.start_soon(sampler.run)
    handler = Collector(expected=3 * 40)

    async def keep_publishing() -> None:
        for j in range(40):
            for i, node in enumerate(nodes):
                node.publish("t", b"n%d-%d" % (i, j))
            await trio.sleep(0.5)

    async with open_consumer(
        "t",
        "c",
        handler,
        nsqd_tcp_addresses=[n.address for n in nodes],
        config=Config(max_in_flight=5),
    ) as consumer:
        await wait_for(lambda: len(consumer.connections) == 3)
        nursery.start_soon(keep_publishing)
        await handler.wait(within=120)
    assert len(set(handler.bodies)) == 120
    assert sampler.peak <= 5
    assert sampler.peak >= 3  # every node got some RDY
