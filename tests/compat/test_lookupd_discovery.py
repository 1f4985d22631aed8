"""Third-party consumers that know only the lookupds find both nsqd nodes and read from both.

pynsq (tornado) and gnsq (gevent) run their own event loops in the test's
thread, so the cluster (two nsqlookupds, two nsqds registered with both) runs
in a background thread under its own ``trio.run``.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from nsqbox.lookupd.options import LookupdOptions
from nsqbox.lookupd.server import LookupdAddresses, serve_lookupd
from nsqbox.nsqd.domain.options import NSQDOptions
from nsqbox.nsqd.lookup import LookupService, lookup_loop, lookup_service
from nsqbox.nsqd.server import NSQDAddresses, serve_nsqd

TIMEOUT = 20.0
MESSAGES_PER_NODE = 5


class Cluster:
    """Two lookupds and two nsqds in a trio run on a background thread."""

    def __init__(self, data_path: Path) -> None:
        self.data_path = data_path
        self.lookupds: list[LookupdAddresses] = []
        self.nsqds: list[NSQDAddresses] = []
        self.services: list[LookupService] = []
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._cancel: trio.CancelScope | None = None
        self._thread = threading.Thread(target=self._thread_main, name="nsqbox-cluster")

    @property
    def lookupd_http_addresses(self) -> list[str]:
        return [f"http://{host}:{port}" for host, port in (x.http for x in self.lookupds)]

    def start(self) -> None:
        self._thread.start()
        if not self._ready.wait(TIMEOUT) or self._error is not None:
            raise RuntimeError("cluster did not start") from self._error

    def stop(self) -> None:
        if self._token is not None and self._cancel is not None:
            trio.from_thread.run_sync(self._cancel.cancel, trio_token=self._token)
        self._thread.join(TIMEOUT)
        assert not self._thread.is_alive()

    def call(self, fn: Any, *args: Any) -> Any:
        """Run the async ``fn(*args)`` in the cluster's trio run, from the test's thread."""
        assert self._token is not None
        return trio.from_thread.run(fn, *args, trio_token=self._token)

    def _thread_main(self) -> None:
        try:
            trio.run(self._main)
        except BaseException as exc:  # reported to start() if it happens before ready
            self._error = exc
            self._ready.set()

    async def _main(self) -> None:
        self._token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self._cancel = nursery.cancel_scope
            for _ in range(2):
                options = LookupdOptions(tcp_address="127.0.0.1:0", http_address="127.0.0.1:0")
                self.lookupds.append(await nursery.start(serve_lookupd, options))
            lookupd_tcp = [f"{host}:{port}" for host, port in (x.tcp for x in self.lookupds)]
            for index in range(2):
                path = self.data_path / f"nsqd{index}"
                await trio.Path(path).mkdir()
                options = NSQDOptions(
                    tcp_address="127.0.0.1:0",
                    http_address="127.0.0.1:0",
                    node_id=index + 1,
                    data_path=str(path),
                    lookupd_tcp_addresses=list(lookupd_tcp),
                )
                addrs: NSQDAddresses = await nursery.start(serve_nsqd, options)
                service = lookup_service(addrs.nsqd)
                if service is None:  # serve_nsqd does not run the lookup loop (yet)
                    service = await nursery.start(lookup_loop, addrs.nsqd)
                self.nsqds.append(addrs)
                self.services.append(service)
            await self.synced()
            self._ready.set()

    async def synced(self) -> None:
        with trio.fail_after(TIMEOUT):
            for service in self.services:
                await service.wait_synced()

    async def publish(self, topic: str) -> set[bytes]:
        """Publish distinct messages on each node; returns every body sent."""
        sent: set[bytes] = set()
        for index, addrs in enumerate(self.nsqds):
            bodies = [f"node{index}-{i}".encode() for i in range(MESSAGES_PER_NODE)]
            addrs.nsqd.get_topic(topic).put_messages(bodies)
            sent.update(bodies)
        await self.synced()  # both nodes registered the topic with both lookupds
        return sent


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    running = Cluster(tmp_path)
    running.start()
    try:
        yield running
    finally:
        running.stop()


def test_lookup_lists_both_nodes(cluster: Cluster) -> None:
    cluster.call(cluster.publish, "listed")
    ports = sorted(x.tcp[1] for x in cluster.nsqds)
    for base in cluster.lookupd_http_addresses:
        found = httpx.get(f"{base}/lookup", params={"topic": "listed"}).json()
        assert sorted(p["tcp_port"] for p in found["producers"]) == ports


def test_pynsq_reader_discovers_both_nodes(cluster: Cluster) -> None:
    import nsq
    import tornado.ioloop

    sent = cluster.call(cluster.publish, "pynsq_topic")
    received: set[bytes] = set()
    loop = tornado.ioloop.IOLoop()  # a private loop, closed below

    def handle(message: Any) -> bool:
        received.add(bytes(message.body))
        if received >= sent:
            loop.stop()
        return True

    async def make_reader() -> Any:
        return nsq.Reader(
            topic="pynsq_topic",
            channel="ch",
            lookupd_http_addresses=cluster.lookupd_http_addresses,
            message_handler=handle,
            max_in_flight=2 * MESSAGES_PER_NODE,
            lookupd_poll_interval=1,
        )

    reader = loop.run_sync(make_reader)
    timeout = loop.call_later(TIMEOUT, loop.stop)
    loop.start()
    loop.remove_timeout(timeout)
    connected = sorted(conn.port for conn in reader.conns.values())
    reader.close()
    loop.close(all_fds=True)
    assert received == sent  # each body exists on one node only
    assert connected == sorted(x.tcp[1] for x in cluster.nsqds)


def test_gnsq_consumer_discovers_both_nodes(cluster: Cluster) -> None:
    import gevent
    import gnsq

    sent = cluster.call(cluster.publish, "gnsq_topic")
    received: set[bytes] = set()
    done = gevent.event.Event()
    consumer = gnsq.Consumer(
        "gnsq_topic",
        "ch",
        lookupd_http_addresses=cluster.lookupd_http_addresses,
        max_in_flight=2 * MESSAGES_PER_NODE,
        lookupd_poll_interval=1,
    )

    def handle(consumer: Any, message: Any) -> None:
        received.add(bytes(message.body))
        if received >= sent:
            done.set()

    consumer.on_message.connect(handle)

    consumer.start(block=False)
    try:
        assert done.wait(TIMEOUT)
    finally:
        consumer.close()
        consumer.join(TIMEOUT)
    # each body exists on one node only, so having them all means both were consumed
    assert received == sent
